// The Lua scripts of delay_queue. Each runs atomically on the server; times are ms since the
// epoch by the server's TIME, so clocks of producers and workers need not agree.
#pragma once

namespace cogwheel::redis::detail {

// Shared prologue: `now` in ms; `announce(at)` publishes when `at` becomes the earliest due
// time (call before adding it). KEYS[1] is always the due set.
#define COGWHEEL_REDIS_LUA_PRELUDE                                              \
  "local t = redis.call('TIME')\n"                                              \
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"     \
  "local function announce(at, channel)\n"                                      \
  "  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')\n"         \
  "  if first[2] == nil or at < tonumber(first[2]) then\n"                      \
  "    redis.call('PUBLISH', channel, at)\n"                                     \
  "  end\n"                                                                     \
  "end\n"

// KEYS: due, payload. ARGV: id, payload, due_ms, channel. -> 1 added, 0 already there.
inline constexpr const char* schedule_lua = COGWHEEL_REDIS_LUA_PRELUDE R"(
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
local at = tonumber(ARGV[3])
announce(at, ARGV[4])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], at, ARGV[1])
return 1
)";

// KEYS: due. ARGV: id, due_ms, channel. -> 1 moved, 0 not pending.
inline constexpr const char* reschedule_lua = COGWHEEL_REDIS_LUA_PRELUDE R"(
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local at = tonumber(ARGV[2])
announce(at, ARGV[3])
redis.call('ZADD', KEYS[1], 'XX', at, ARGV[1])
return 1
)";

// KEYS: due, inflight, payload, attempts. ARGV: id. -> 1 removed, 0 none.
inline constexpr const char* cancel_lua = R"(
local n = redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return n
)";

// KEYS: due, inflight, payload, attempts. ARGV: visibility_ms, limit.
// Returns jobs whose visibility expired to due, then moves up to `limit` due jobs to inflight.
// -> {now, {id, payload, due, attempt, ...}, earliest due or -1, earliest expiry or -1}
inline constexpr const char* claim_lua = COGWHEEL_REDIS_LUA_PRELUDE R"(
local limit = tonumber(ARGV[2])
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZADD', KEYS[1], now, id)
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
local out = {}
local until_ms = now + tonumber(ARGV[1])
for i = 1, #due, 2 do
  local id = due[i]
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[2], until_ms, id)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[3], id) or ''
  out[#out + 1] = due[i + 1]
  out[#out + 1] = redis.call('HINCRBY', KEYS[4], id, 1)
end
local nd = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local ni = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return {now, out, tonumber(nd[2] or -1), tonumber(ni[2] or -1)}
)";

// KEYS: inflight, payload, attempts. ARGV: ids. -> how many were still in flight (and are done).
inline constexpr const char* ack_lua = R"(
local n = 0
for _, id in ipairs(ARGV) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    redis.call('HDEL', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    n = n + 1
  end
end
return n
)";

// KEYS: due, inflight, dead. ARGV: id, retry_delay_ms, attempt, max_attempts, channel.
// -> 1 retried, 2 dead, 0 it was no longer in flight.
inline constexpr const char* fail_lua = COGWHEEL_REDIS_LUA_PRELUDE R"(
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return 0 end
if tonumber(ARGV[3]) >= tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[3], now, ARGV[1])
  return 2
end
local at = now + tonumber(ARGV[2])
announce(at, ARGV[5])
redis.call('ZADD', KEYS[1], at, ARGV[1])
return 1
)";

#undef COGWHEEL_REDIS_LUA_PRELUDE

}  // namespace cogwheel::redis::detail
