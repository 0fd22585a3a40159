// The delay queue's Lua scripts: each change of the queue is one script, so it is atomic on the
// server; times are ms since the epoch by the server's TIME, so clocks of producers and workers
// need not agree.
//
// Claim records and fencing: a claim puts the jobs it takes into records of up to
// ARGV[7] (claim_record_jobs) jobs each, and each record takes one token from {name}:token
// (INCR: one counter per queue, so the tokens of one job only grow, across retries, expiries,
// requeues and re-schedules of its id). A record is one member of {name}:inflight, its token
// ("<token>", scored with the lease expiry of its jobs), and one field of {name}:claims, token
// -> its jobs' ids in claim order, a job done being false (a MessagePack array). A claim of k
// jobs thus writes k / claim_record_jobs entries, not k, and a job's token names its record.
// ack (by the job's position in the record), fail, extend and release (hand back, by id) name
// the record by the token they hold and do nothing unless the job is still in it: a worker whose lease expired cannot remove, retry or prolong the claim of the
// worker that took the job after it (its record is gone: an expired record is reaped whole, its
// jobs due again; the next claim puts the job in a record with a greater token). A job is in at
// most one record: it is claimed only from {name}:due, where its id is once, and schedule refuses
// an id whose payload exists (a cancelled running job leaves its record first). Whatever takes a
// job out of its record rewrites the record (at most claim_record_jobs entries) or, when it was
// the last, deletes it with its in-flight member: no record outlives its jobs.
// Versions before wrote one in-flight member per job ("<token>:<id>", or the plain id, with
// {name}:lease id -> token): such a member has no record; it is reaped as that one job when it
// expires, and acknowledged by nothing (it runs again).
//
// {name}:attempts counts the claims of a job, and a job's first claim writes nothing there (the
// common case costs no write at claim and no delete at acknowledgement): a pending or dead job
// without an entry had no claim, an in-flight one without an entry is on its first. Whatever
// moves a job out of flight (expiry, failure, hand-back, burial) writes its count.
//
// Every script's KEYS are the queue's keys in one fixed order (K below), so that one array of
// keys serves them all.
#pragma once

namespace cogwheel::redis::detail {

// KEYS, in this order, for every script.
enum key_index { k_due = 1, k_inflight, k_job, k_attempts, k_claims, k_dead, k_reason, k_token, k_legacy_payload, k_count = 9 };

// Shared prologue: `now` in ms; `announce(at, channel)` publishes when `at` becomes the
// earliest due time (call before adding it; no job due at or before `at`: asked without
// WITHSCORES, so no score is formatted and parsed); `bury(id, why, tries)` moves a job out of
// flight (already taken from its record) to the dead set with `tries` claims; `claims(id)` is
// an in-flight job's count of claims, this one included; `id_of(m)` the id of a member written
// by a version before claim records.
#define COGWHEEL_REDIS_LUA_PRELUDE                                                        \
  "local t = redis.call('TIME')\n"                                                        \
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"               \
  "local function announce(at, channel)\n"                                                \
  "  if #redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', at, 'LIMIT', 0, 1) == 0 then\n"     \
  "    redis.call('PUBLISH', channel, at)\n"                                               \
  "  end\n"                                                                               \
  "end\n"                                                                                 \
  "local function bury(id, why, tries)\n"                                                 \
  "  redis.call('ZREM', KEYS[1], id)\n"                                                   \
  "  redis.call('HSET', KEYS[4], id, tries)\n"                                            \
  "  redis.call('ZADD', KEYS[6], now, id)\n"                                              \
  "  redis.call('HSET', KEYS[7], id, why)\n"                                              \
  "end\n"                                                                               \
  "local function claims(id) return tonumber(redis.call('HGET', KEYS[4], id) or '1') end\n" \
  "local function id_of(m) return string.match(m, '^%d+:(.*)$') or m end\n"

// Job entries. KEYS[3] ({name}:job) maps an id to a stamp and the payload: the job's scheduled
// time (the time its producer asked for) as 16 decimal digits and ':' (17 bytes), then the
// payload's bytes. A claim reads a job's due time with its payload in the one HMGET it makes
// anyway, and lists the due set without WITHSCORES: Redis 7.0 formats every score it replies
// with snprintf("%.17g"), a large share of the claim's work per job
// (bench/redis/claim_cachegrind.py measures it).
// Invariant: a job without an entry in {name}:attempts (never claimed, or requeued from the
// dead set) has its stamp as its score in {name}:due whenever it is there: what files such a
// job at another time restamps it (`restamp`: reschedule, requeue). What makes a claimed job
// due again (a retry's back-off, an expired lease, a hand-back) writes its attempts entry and
// leaves the stamp alone: its score is then the due time of its next attempt, which the claim
// reads (ZSCORE) for those jobs only. `stamped(at, payload)` clamps the stamp to
// 0..2^53-1 (a due time before 1970 is stamped 0 and starts at once, as its score says; one
// past the year 287,000 is never claimed), so its width never changes.
// KEYS[9] ({name}:payload) is the layout before: id -> the bare payload, the due time only the
// score. Nothing writes there any more; its jobs are claimed (their score read, the stamp made
// by the claim), refused as duplicates, listed and deleted like the others, so a queue that is
// upgraded with jobs pending drains it. `legacy()`: whether it exists (asked once per script).
#define COGWHEEL_REDIS_LUA_JOBS                                                         \
  "local function stamped(at, payload)\n"                                               \
  "  local ms = math.min(math.max(tonumber(at), 0), 9007199254740991)\n"                \
  "  return string.format('%016d:', ms) .. payload\n"                                   \
  "end\n"                                                                               \
  "local function restamp(id, at)\n"                                                    \
  "  local v = redis.call('HGET', KEYS[3], id)\n"                                       \
  "  if v then redis.call('HSET', KEYS[3], id, stamped(at, string.sub(v, 18))) end\n"   \
  "end\n"                                                                               \
  "local has_legacy = nil\n"                                                            \
  "local function legacy()\n"                                                           \
  "  if has_legacy == nil then has_legacy = redis.call('EXISTS', KEYS[9]) == 1 end\n"   \
  "  return has_legacy\n"                                                               \
  "end\n"

// Claim records (see the top). A record is an array of its jobs' ids in the claim's order, in
// which a job done is `false`: positions never move, so an acknowledgement names a job by its
// position. `record(m)`: the array of record m (a token, as text), or nil when there is none
// (reaped, done, or a member of an older version); `decode(r)` of its bytes, read with
// unpack_limit past the array's header (`header(r)`: entries and header bytes, -1 for a form
// not read that way): its entries go on the stack and into a table made at their number
// (cmsgpack.unpack grows its table one entry at a time, rehashing at each power of two: garbage
// for the GC). `keep(m, ids)`: writes back record m after entries of `ids` were set to false,
// deleting the record and its in-flight member when none is left. `take(m, id)`: sets id's
// entry false; false when it is not there (the lease was lost). O(claim_record_jobs) each.
#define COGWHEEL_REDIS_LUA_RECORDS                                                       \
  "local function header(r)\n"                                                          \
  "  local b = string.byte(r, 1)\n"                                                      \
  "  if b >= 0x90 and b <= 0x9f then return b - 0x90, 1 end\n"                           \
  "  if b == 0xdc then return string.byte(r, 2) * 256 + string.byte(r, 3), 3 end\n"       \
  "  return -1, 0\n"                                                                     \
  "end\n"                                                                               \
  "local function decode(r)\n"                                                          \
  "  local k, at = header(r)\n"                                                          \
  "  if k < 0 or k > 4000 then return cmsgpack.unpack(r) end\n"                          \
  "  return {select(2, cmsgpack.unpack_limit(r, k, at))}\n"                              \
  "end\n"                                                                               \
  "local function record(m)\n"                                                          \
  "  local r = redis.call('HGET', KEYS[5], m)\n"                                         \
  "  if r then return decode(r) end\n"                                                   \
  "end\n"                                                                               \
  "local function keep(m, ids)\n"                                                       \
  "  for p = 1, #ids do\n"                                                              \
  "    if ids[p] then redis.call('HSET', KEYS[5], m, cmsgpack.pack(ids)) return end\n"  \
  "  end\n"                                                                             \
  "  redis.call('HDEL', KEYS[5], m)\n"                                                   \
  "  redis.call('ZREM', KEYS[2], m)\n"                                                   \
  "end\n"                                                                               \
  "local function take(m, id)\n"                                                         \
  "  local ids = record(m)\n"                                                            \
  "  if not ids then return false end\n"                                                 \
  "  for p, x in ipairs(ids) do\n"                                                       \
  "    if x == id then ids[p] = false keep(m, ids) return true end\n"                    \
  "  end\n"                                                                               \
  "  return false\n"                                                                      \
  "end\n"

// ARGV: id, payload, due (ms since the epoch, or a delay in ms when ARGV[5] == 'after'),
// channel, mode. -> 1 added, 0 a job with this id exists (pending, running or dead).
// A delay's due time is made an integer's digits once (at most 2^53 - 1: the year 287,000, so
// that a delay of milliseconds::max() stays far ahead and exact), and those digits go to every
// command: a Lua number would be formatted with snprintf("%.17g") for each.
inline constexpr const char* schedule_lua = COGWHEEL_REDIS_LUA_PRELUDE COGWHEEL_REDIS_LUA_JOBS R"(
if legacy() and redis.call('HEXISTS', KEYS[9], ARGV[1]) == 1 then return 0 end
local at = ARGV[3]
if ARGV[5] == 'after' then at = string.format('%d', math.min(now + tonumber(at), 9007199254740991)) end
if redis.call('HSETNX', KEYS[3], ARGV[1], stamped(at, ARGV[2])) == 0 then return 0 end
announce(at, ARGV[4])
redis.call('ZADD', KEYS[1], at, ARGV[1])
return 1
)";

// ARGV: id, due_ms, channel. -> 1 moved, 0 not pending.
inline constexpr const char* reschedule_lua = COGWHEEL_REDIS_LUA_PRELUDE COGWHEEL_REDIS_LUA_JOBS R"(
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local at = tonumber(ARGV[2])
announce(at, ARGV[3])
redis.call('ZADD', KEYS[1], 'XX', at, ARGV[1])
restamp(ARGV[1], at)
return 1
)";

// ARGV: id. -> 1 removed (pending, running or dead), 0 none. A job neither due nor dead but
// with a payload is in flight: its record is found by reading the in-flight set and the records
// (O(jobs in flight), a price only cancelling a running job pays; its worker's reports are then
// refused).
inline constexpr const char* cancel_lua = COGWHEEL_REDIS_LUA_RECORDS COGWHEEL_REDIS_LUA_JOBS R"(
local function id_of(m) return string.match(m, '^%d+:(.*)$') or m end
local id = ARGV[1]
local n = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[6], id)
if n == 0 and (redis.call('HEXISTS', KEYS[3], id) == 1 or (legacy() and redis.call('HEXISTS', KEYS[9], id) == 1)) then
  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if redis.call('HEXISTS', KEYS[5], m) == 1 then
      if take(m, id) then n = 1 break end
    elseif id_of(m) == id then
      n = redis.call('ZREM', KEYS[2], m)
      break
    end
  end
end
for _, k in ipairs({KEYS[3], KEYS[4], KEYS[7], KEYS[9]}) do redis.call('HDEL', k, id) end
return n
)";

// Calls `cmd key args...` over a list, 30 arguments per call: one command per batch instead of
// one per job is most of the claim's and ack's cost, and the script engine reuses the argument
// objects of a call's first 32 arguments (command and key included) but allocates and frees one
// for each beyond (so 30 per call costs Redis less than a few thousand per call; the claim's
// HMGET stays one call: merging its parts cost more than that saved).
#define COGWHEEL_REDIS_LUA_BULK                                                 \
  "local function bulk(cmd, key, list)\n"                                       \
  "  for i = 1, #list, 30 do\n"                                               \
  "    redis.call(cmd, key, unpack(list, i, math.min(i + 29, #list)))\n"      \
  "  end\n"                                                                     \
  "end\n"

// `ack(from)`: ARGV[from..] are groups token, k, then k ranges first, last (1-based positions,
// inclusive): the jobs of record `token` that are done, by their position in it (the worker
// sends ranges: jobs mostly end in their due order, so a whole record is usually one range, and
// no id travels). Those still in their record are set done (one read and one write of the
// record per group: no command per job), and their payloads and attempts deleted.
// A group of one range over a whole record none of whose jobs was taken out (its bytes hold no
// 0xc2, MessagePack's false: an id holding that byte only sends it the general way) deletes the
// record and gives its ids to HDEL straight from its bytes, 30 at a time (`gone`, with
// unpack_limit; 30 for the reason `bulk` gives): no table, no entry set to false, no copy into
// `done`. -> how many were still held.
#define COGWHEEL_REDIS_LUA_ACK                                                        \
  "local function ack(from)\n"                                                        \
  "  local done, nd, n, counted = {}, 0, 0, nil\n"                                    \
  "  local function gone(off, ...)\n"                                                 \
  "    redis.call('HDEL', KEYS[3], ...)\n"                                            \
  "    if legacy() then redis.call('HDEL', KEYS[9], ...) end\n"                          \
  "    if counted == nil then counted = redis.call('EXISTS', KEYS[4]) == 1 end\n"     \
  "    if counted then redis.call('HDEL', KEYS[4], ...) end\n"                        \
  "    return off\n"                                                                  \
  "  end\n"                                                                           \
  "  local i, last = from, #ARGV\n"                                                   \
  "  while i < last do\n"                                                             \
  "    local m, k = ARGV[i], tonumber(ARGV[i + 1])\n"                                 \
  "    local r = redis.call('HGET', KEYS[5], m)\n"                                    \
  "    if r then\n"                                                                   \
  "      local size, at = header(r)\n"                                                \
  "      if k == 1 and size > 0 and size <= 4000 and tonumber(ARGV[i + 2]) <= 1 and tonumber(ARGV[i + 3]) >= size\n" \
  "          and not string.find(r, '\\194', at + 1, true) then\n"                    \
  "        redis.call('HDEL', KEYS[5], m)\n"                                          \
  "        redis.call('ZREM', KEYS[2], m)\n"                                          \
  "        local off = at\n"                                                          \
  "        while off > 0 do off = gone(cmsgpack.unpack_limit(r, 30, off)) end\n"      \
  "        n = n + size\n"                                                            \
  "      else\n"                                                                      \
  "        local ids = decode(r)\n"                                                   \
  "        local before, size = n, #ids\n"                                            \
  "        for q = i + 2, i + 2 * k, 2 do\n"                                          \
  "          for p = tonumber(ARGV[q]), math.min(tonumber(ARGV[q + 1]), size) do\n"   \
  "            local id = ids[p]\n"                                                   \
  "            if id then ids[p] = false n = n + 1 nd = nd + 1 done[nd] = id end\n"   \
  "          end\n"                                                                   \
  "        end\n"                                                                     \
  "        if n > before then keep(m, ids) end\n"                                     \
  "      end\n"                                                                       \
  "    end\n"                                                                         \
  "    i = i + 2 + 2 * k\n"                                                           \
  "  end\n"                                                                           \
  "  for a = 1, nd, 30 do gone(0, unpack(done, a, math.min(a + 29, nd))) end\n"       \
  "  return n\n"                                                                      \
  "end\n"

// ARGV: visibility_ms, limit, lookahead_ms, max_attempts, max_payload_bytes, max_claim_bytes,
// claim_record_jobs, then acknowledgements (ack(8): the worker's finished jobs riding on its
// claim, one request instead of two). First the acknowledgements, then the records whose
// lease expired (their worker died or stalled: floor(limit / claim_record_jobs) records, at
// least one, each whole) send their
// jobs back to due, or to the dead set once they used max_attempts claims. Then up to `limit`
// jobs due within now + lookahead move to in flight, in records of claim_record_jobs jobs (the
// last one shorter), each record with a new token (consecutive: the first token, then one more
// per record; one INCRBY), leased until now + lookahead + visibility (at least each job's own
// max(due, now) + visibility: one score for every record, so that no per-job number is
// formatted or parsed); their payloads together stay under max_claim_bytes (the first one
// always goes), and a payload over max_payload_bytes sends its job to the dead set. The jobs
// taken are the first `taken` of the due set (ZRANGEBYSCORE from -inf lists them in rank
// order), removed by one ZREMRANGEBYRANK.
// Per job, the script only reads: the reply is the due listing (ids, no scores) and the
// HMGET's entries as they came, each its job's stamp and payload (cut to the jobs claimed;
// compacted only when a job was buried amid them), and a record is packed from a slice of the
// ids (`slice`), with no table per record or job.
// -> {now, {id, ...}, earliest due left or -1,
//     earliest expiry or -1, more (1: stopped by a bound, more may be due), buried,
//     seconds and microseconds of TIME read at the script's end (the reference of
//     the workers' start times: the later it is read, the less a batch starts late),
//     acknowledgements that held their lease, the first record's token (0: none taken; the
//     job at index i of the list is in the record of token first + floor(i / claim_record_jobs)),
//     {i, attempt, attempt due, ...} for the jobs claimed before (the others are on their first
//     attempt, due at their stamp: no number per job in the common case), {stamp (the scheduled
//     time) and payload, ...} (one per job of the list)}
inline constexpr const char* claim_lua =
    COGWHEEL_REDIS_LUA_PRELUDE COGWHEEL_REDIS_LUA_BULK COGWHEEL_REDIS_LUA_RECORDS COGWHEEL_REDIS_LUA_JOBS COGWHEEL_REDIS_LUA_ACK R"(
-- The record of ids[a..b]: cmsgpack.pack of a table made at its size (`{unpack(...)}`: one
-- allocation; filled one by one, a table grows by doubling). Not cmsgpack.pack(unpack(...)):
-- that makes one Lua string per id (interned, then swept by the GC) and concatenates them.
-- Over a few thousand (Lua's unpack limit), filled one by one.
local function slice(ids, a, b)
  local k = b - a + 1
  if k > 4000 then
    local t = {}
    for i = a, b do t[i - a + 1] = ids[i] end
    return cmsgpack.pack(t)
  end
  return cmsgpack.pack({unpack(ids, a, b)})
end
local acked = ack(8)
local visibility = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local max_attempts = tonumber(ARGV[4])
local max_payload = tonumber(ARGV[5])
local max_bytes = tonumber(ARGV[6])
local per_record = tonumber(ARGV[7])
local buried = 0
-- Expired records: about `limit` jobs' worth (at least one record) per claim, so that a script
-- stays short after a worker with many records died; the rest go with the claims that follow
-- (the earliest expiry in the reply is then already past: the worker claims again at once).
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, math.max(1, math.floor(limit / per_record)))) do
  local ids = record(m)
  if ids then redis.call('HDEL', KEYS[5], m) else ids = {id_of(m)} end
  redis.call('ZREM', KEYS[2], m)
  for _, id in ipairs(ids) do if id then
    local tries = claims(id)
    if tries >= max_attempts then
      bury(id, 'visibility expired on attempt ' .. tries .. ' of ' .. max_attempts, tries)
      buried = buried + 1
    else
      redis.call('HSET', KEYS[4], id, tries)
      redis.call('ZADD', KEYS[1], now, id)  -- due again now; the stamp keeps the scheduled time
    end
  end end
end
-- Listed without WITHSCORES: each job's due time comes with its payload (its stamp).
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now + tonumber(ARGV[3]), 'LIMIT', 0, limit)
local count = #ids
local more = count == limit and 1 or 0
local payloads, later = {}, {}
local first = nil
-- Counters instead of `#t` (a search in Lua 5.1) in the loops below: they run per job.
if count > 0 then
  payloads = redis.call('HMGET', KEYS[3], unpack(ids))
  -- No job has a count while no job was claimed twice (or died): nothing to read then.
  local tries = redis.call('EXISTS', KEYS[4]) == 1 and redis.call('HMGET', KEYS[4], unpack(ids)) or {}
  local attempts = {}
  local bytes, n, taken, skipped = 0, 0, 0, 0  -- n jobs claimed of the first `taken` listed
  for k = 1, count do
    local payload = payloads[k]
    if not payload then  -- rare: a job of the layout before (its due time is its score), or none
      payload = stamped(redis.call('ZSCORE', KEYS[1], ids[k]), legacy() and redis.call('HGET', KEYS[9], ids[k]) or '')
      payloads[k] = payload
    end
    local size = #payload - 17
    if size > max_payload then
      redis.call('ZADD', KEYS[6], now, ids[k])
      redis.call('HSET', KEYS[7], ids[k], 'payload of ' .. size .. ' bytes over max_payload_bytes ' .. max_payload)
      buried = buried + 1
      skipped = skipped + 1
      ids[k] = false
    elseif n > 0 and bytes + size > max_bytes then
      more = 1
      break
    else
      bytes = bytes + size
      if tries[k] then  -- claimed before: count it (a first claim writes nothing)
        local attempt = tonumber(tries[k]) + 1
        attempts[#attempts + 1] = ids[k]
        attempts[#attempts + 1] = attempt
        later[#later + 1] = n
        later[#later + 1] = attempt
        -- This attempt's due time is its score (the stamp is the scheduled time), read while
        -- the job is still in the due set: a ZSCORE per job claimed again, none on a first claim.
        later[#later + 1] = tonumber(redis.call('ZSCORE', KEYS[1], ids[k]))
      end
      n = n + 1
    end
    taken = k
  end
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, taken - 1)
  if skipped > 0 then  -- rare: close the gaps of the buried, so that the list is the claimed
    local j = 0
    for k = 1, taken do
      if ids[k] then
        j = j + 1
        ids[j], payloads[j] = ids[k], payloads[k]
      end
    end
  end
  for k = count, n + 1, -1 do ids[k] = nil payloads[k] = nil end  -- rare: a bound or a burial cut the list
  if n > 0 then
    local records = math.floor((n - 1) / per_record) + 1
    first = redis.call('INCRBY', KEYS[8], records) - records + 1
    local expiry = now + tonumber(ARGV[3]) + visibility
    local members, fields = {}, {}
    for r = 1, records do
      local m = string.format('%d', first + r - 1)
      local a = (r - 1) * per_record + 1
      members[2 * r - 1], members[2 * r] = expiry, m
      fields[2 * r - 1], fields[2 * r] = m, slice(ids, a, math.min(a + per_record - 1, n))
    end
    bulk('ZADD', KEYS[2], members)
    bulk('HSET', KEYS[5], fields)
    if #attempts > 0 then bulk('HSET', KEYS[4], attempts) end
  end
end
local nd = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local ni = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local te = redis.call('TIME')  -- not frozen in a script: read last, it is the reply's own time
return {now, ids, tonumber(nd[2] or -1), tonumber(ni[2] or -1), more, buried, te[1], te[2], acked, first or 0, later, payloads}
)";

// ARGV: groups token, k, k ranges (see ack) -> how many still held their lease (and are done). A
// worker with a claim coming soon sends them with the claim instead (claim_lua's ARGV[8..]).
inline constexpr const char* ack_lua = COGWHEEL_REDIS_LUA_RECORDS COGWHEEL_REDIS_LUA_JOBS COGWHEEL_REDIS_LUA_ACK R"(
return ack(1)
)";

// ARGV: id, token, retry_delay_ms, max_attempts, channel, reason.
// -> 1 retried, 2 dead, 0 refused (the lease was lost).
inline constexpr const char* fail_lua = COGWHEEL_REDIS_LUA_PRELUDE COGWHEEL_REDIS_LUA_RECORDS COGWHEEL_REDIS_LUA_JOBS R"(
local id = ARGV[1]
if not take(ARGV[2], id) then return 0 end
local tries = claims(id)
if tries >= tonumber(ARGV[4]) then
  bury(id, 'failed on attempt ' .. tries .. ': ' .. ARGV[6], tries)
  return 2
end
redis.call('HSET', KEYS[4], id, tries)
local at = now + tonumber(ARGV[3])
announce(at, ARGV[5])
redis.call('ZADD', KEYS[1], at, id)  -- the next attempt's due time; the stamp keeps the scheduled time
return 1
)";

// ARGV: id, token, visibility_ms. Prolongs the lease of the job's record (the jobs claimed with
// it, held by the same worker, too) to visibility_ms from now; never shortens it.
// -> {now, the record's expiry}, or 0 refused (the lease was lost).
inline constexpr const char* extend_lua = COGWHEEL_REDIS_LUA_PRELUDE COGWHEEL_REDIS_LUA_RECORDS R"(
local m = ARGV[2]
local ids = record(m)
local held = false
for _, x in ipairs(ids or {}) do if x == ARGV[1] then held = true break end end
if not held then return 0 end
local until_ms = now + tonumber(ARGV[3])
local current = tonumber(redis.call('ZSCORE', KEYS[2], m))
if current and current >= until_ms then return {now, current} end
redis.call('ZADD', KEYS[2], 'XX', until_ms, m)
return {now, until_ms}
)";

// ARGV: id, token, attempt_due_ms, ... Hands back claimed jobs that never started (a worker
// stopping with jobs prefetched): due again at their attempt's due time (their stamp, the
// scheduled time, stays), the claim not counted as an attempt.
// -> how many were handed back.
inline constexpr const char* release_lua = COGWHEEL_REDIS_LUA_PRELUDE COGWHEEL_REDIS_LUA_RECORDS R"(
local n = 0
for i = 1, #ARGV, 3 do
  local id = ARGV[i]
  if take(ARGV[i + 1], id) then
    redis.call('HSET', KEYS[4], id, claims(id) - 1)
    redis.call('ZADD', KEYS[1], tonumber(ARGV[i + 2]), id)
    n = n + 1
  end
end
return n
)";

// ARGV: (none). -> {due, in flight, dead}; in flight counts the jobs of every record (and a
// member of an older version as one job): O(jobs in flight).
inline constexpr const char* depth_lua = COGWHEEL_REDIS_LUA_RECORDS R"(
local n = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local ids = record(m) or {true}
  for _, x in ipairs(ids) do if x then n = n + 1 end end
end
return {redis.call('ZCARD', KEYS[1]), n, redis.call('ZCARD', KEYS[6])}
)";

// One page of the dead set. ARGV: offset, count (a page: at most a few hundred), page_bytes,
// max_payload_bytes, then optionally the id of the previous page's last job: the page starts
// right after it wherever it is now (jobs requeued or buried meanwhile shift no page), else at
// offset. Its payloads, ids and reasons together stay under page_bytes (the first job always
// goes), and a payload over max_payload_bytes is left out (its size is told): a page stays far
// below the client's max_reply_bytes, whatever the dead set holds. The offset is compared with ZCARD before it is
// used, so no offset or count reaches ZRANGE as a float (Lua's numbers past 2^53 are).
// -> {offset after the page, more (1: jobs follow), id, payload, died_ms, attempts, reason,
//     payload bytes, ...}, oldest first.
inline constexpr const char* list_dead_lua = COGWHEEL_REDIS_LUA_JOBS R"(
local card = redis.call('ZCARD', KEYS[6])
local start = tonumber(ARGV[1])
if ARGV[5] then
  local r = redis.call('ZRANK', KEYS[6], ARGV[5])
  if r then start = r + 1 end
end
if start >= card then return {card, 0} end
local ids = redis.call('ZRANGE', KEYS[6], start, start + tonumber(ARGV[2]) - 1, 'WITHSCORES')
local page, max_payload = tonumber(ARGV[3]), tonumber(ARGV[4])
local out, bytes, n = {0, 0}, 0, 0
for i = 1, #ids, 2 do
  local id = ids[i]
  -- A job entry's stamp (17 bytes) is not the payload's; an entry of the layout before is bare.
  local key, skip = KEYS[3], 17
  local size = redis.call('HSTRLEN', key, id) - skip
  if size < 0 then
    key, skip = KEYS[9], 0
    size = legacy() and redis.call('HSTRLEN', key, id) or 0
  end
  local reason = redis.call('HGET', KEYS[7], id) or ''
  local kept = size <= max_payload and size or 0
  bytes = bytes + #id + kept + #reason
  if n > 0 and bytes > page then break end
  n = n + 1
  out[#out + 1] = id
  out[#out + 1] = kept == size and string.sub(redis.call('HGET', key, id) or '', skip + 1) or ''
  out[#out + 1] = ids[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[4], id) or '0'
  out[#out + 1] = reason
  out[#out + 1] = size
end
out[1] = start + n
out[2] = start + n < card and 1 or 0
return out
)";

// ARGV: id, delay_ms, channel. A dead job becomes due again after delay_ms (server clock),
// its attempts counted from zero. -> 1 requeued, 0 it is not dead.
inline constexpr const char* requeue_lua = COGWHEEL_REDIS_LUA_PRELUDE COGWHEEL_REDIS_LUA_JOBS R"(
if redis.call('ZREM', KEYS[6], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[7], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
local at = now + tonumber(ARGV[2])
announce(at, ARGV[3])
redis.call('ZADD', KEYS[1], at, ARGV[1])
restamp(ARGV[1], at)
return 1
)";

#undef COGWHEEL_REDIS_LUA_PRELUDE
#undef COGWHEEL_REDIS_LUA_RECORDS
#undef COGWHEEL_REDIS_LUA_BULK
#undef COGWHEEL_REDIS_LUA_ACK
#undef COGWHEEL_REDIS_LUA_JOBS

}  // namespace cogwheel::redis::detail
