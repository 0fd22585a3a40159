/// @file
/// delay_queue: durable delayed jobs in Redis sorted sets, shared by every core of every process
/// pointed at the same Redis, with the local wheel waking each worker when jobs fall due.
///
/// Keys (the {name} hash tag keeps them in one Cluster slot):
///   {name}:due       ZSET id -> due time (ms since the epoch, Redis's clock)
///   {name}:inflight  ZSET "<token>" -> lease expiry of a claim record: up to 128 jobs of one
///                    claim, fenced by the record's token (see below)
///   {name}:claims    HASH "<token>" -> the record's job ids in claim order, a job done being
///                    false (MessagePack array): which jobs the record still holds
///   {name}:job       HASH id -> the due time (16 digits and ':', the job's score while it is
///                    due) and the payload;  {name}:attempts  HASH id -> claims so far (no
///                    entry: none, or this one for a job in flight)
///   {name}:payload   HASH id -> payload: the layout before {name}:job, read and drained
///   {name}:token     the counter tokens come from (INCR)
///   {name}:dead      ZSET id -> time it was given up;  {name}:reason  HASH id -> why
///   channel {name}:wake   published with the due time when a job becomes the earliest
///
/// Guarantees: at-least-once; never before its due time by Redis's TIME (a prefetched job
/// starts at the local time the claim's reply arrived + (due - the server's TIME in that
/// reply)); every claim record carries a fencing token, greater than every earlier token of
/// its jobs, and acknowledging, failing, extending or handing back a job is refused by the
/// server unless the token is the job's current one (the job is still in that record). A
/// handler runs under a deadline that ends a margin before its lease; a worker that stalls past it (a stopped process, a long GC-like pause) loses the
/// job to the next claimant and its late reports are refused: side effects that must not happen
/// twice compare job::token (see docs/redis.md, "Fencing").
///
/// Workers do not poll: each claim (one Lua script) also returns the earliest due time and
/// lease expiry; the worker sleeps on its core's wheel until then (capped by max_wait), and a
/// Pub/Sub message wakes it early when a producer schedules something earlier. With a
/// lookahead, one claim takes the jobs due within it and holds them on the wheel.
///
/// Threading: a delay_queue belongs to one core, like its client; run one per core.
#pragma once

#include <array>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <cogwheel/io/address.hpp>
#include <cogwheel/redis/client.hpp>
#include <cogwheel/redis/script.hpp>
#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/histogram.hpp>
#include <cogwheel/runtime/metrics.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel::redis {

/// The clock of due times: wall time, as Redis's own clock counts (not the loop's steady clock).
using wall_clock = std::chrono::system_clock;

/// A claimed job, as its handler sees it.
struct job {
  std::string id;       ///< the job's id, as given to schedule()
  std::string payload;  ///< its bytes, as given to schedule()
  /// The time the producer asked for, ms since the epoch (Redis's clock): as given to
  /// schedule() or schedule_after(), or last to reschedule() or requeue_dead(). Retries and
  /// expired leases do not change it, so `now - scheduled_ms` is how late the job is for
  /// whoever scheduled it.
  std::int64_t scheduled_ms = 0;
  /// The due time of this attempt, ms since the epoch (Redis's clock): scheduled_ms on a first
  /// attempt; on a later one, when the server made the job due again (the retry back-off after
  /// a failure, the moment an expired lease was reaped, the due time a stopping worker handed
  /// it back at). The job never starts before it.
  std::int64_t attempt_due_ms = 0;
  std::int64_t attempt = 1;  ///< claims of this job so far, this one included
  /// The claim's fencing token: greater than every earlier claim's of this job (the jobs of
  /// one claim record, up to 128 of one claim, share it; it is checked per job). A side effect
  /// that must not be done twice is stored with it and refused when the store already holds a
  /// newer one (docs/redis.md, "Fencing").
  std::int64_t token = 0;

 private:
  friend class delay_queue;
  deadline* lease_ = nullptr;  // the handler's deadline, moved by delay_queue::extend
  std::uint32_t position_ = 0;  // in its claim record (1-based), named by its acknowledgement
};

/// Queue-wide bounds (producers and workers alike).
struct queue_options {
  /// schedule() refuses a larger payload (errc::value_too_large); a worker's claim sends a
  /// larger one that got in anyway (another client, a lower bound elsewhere) to the dead set.
  std::size_t max_payload_bytes = 1u << 20;
};

/// How a worker claims and runs jobs.
struct worker_options {
  /// The Redis server, for the worker's Pub/Sub connection: as client_options' fields of the
  /// same names (`host` and `port` when host is set, else `address`; `tls` when set).
  socket_address address;
  std::optional<std::string> host = {};  ///< see above
  std::uint16_t port = 6379;  ///< see above
  std::optional<client_tls> tls;  ///< see above
  /// How long a claim holds a job (after its due time) before another worker may take it.
  std::chrono::milliseconds visibility{30000};
  /// The handler's deadline ends this long before the lease does (default: visibility / 10,
  /// at most 1 s): the time its last report takes to reach Redis.
  std::chrono::milliseconds lease_margin{-1};
  /// The longest the worker sleeps between claims when no job is known to be due sooner (a
  /// producer's announcement of an earlier job wakes it before).
  std::chrono::milliseconds max_wait{1000};
  /// Jobs running or held (prefetched) at once on this worker. A worker at this bound claims
  /// again once a quarter of it (at least one slot) is free, not at each free slot. One claim
  /// takes at most 512 jobs (a script holds the whole server while it runs); a worker with more
  /// free slots claims again at once.
  unsigned concurrency = 64;
  std::chrono::milliseconds retry_initial{100};  ///< back-off after a failure, doubling
  std::chrono::milliseconds retry_max{60000};  ///< the retry back-off's ceiling
  unsigned max_attempts = 10;  ///< claims of a job before it moves to {name}:dead
  /// Extra sleep after the next due time, so that one claim takes every job due within it
  /// (without lookahead: trades this much lateness for fewer claims).
  std::chrono::milliseconds coalesce{0};
  /// Claim the jobs due within this window and hold them on the wheel until their due time:
  /// one claim per 3/4 to 7/8 of a lookahead (a per-worker jitter) instead of one per due
  /// instant; a job is claimed at least lookahead / 8 before it is due.
  /// The default, 200 ms (with ack_delay's 100 ms), is what a worker should have: a script
  /// costs Redis more than the jobs it takes, so with lookahead 0 (a claim at each due instant)
  /// and ack_delay 0 (an acknowledgement per job) jobs due at distinct milliseconds cost Redis
  /// 7-10x the CPU per job of a worker polling every 100 ms; with both defaults 0.8-1.0x that
  /// poller's, at a lateness p99 of milliseconds instead of its ~100
  /// (bench/redis/delay_queue_bench.cpp, bench/redis/README.md). The price: a job is held (in
  /// flight) from up to one lookahead before its due time, so reschedule() within that window
  /// no longer moves it and cancel() no longer stops its handler from starting, and a worker
  /// that dies holding it delays it by up to lookahead + visibility. 0 claims each job only
  /// when due.
  std::chrono::milliseconds lookahead{200};
  /// Acknowledgements wait this long to go as one batch (a full batch of 512 goes at once):
  /// one script per batch instead of one per job, for jobs held this much longer in flight.
  /// When the worker claims again within another ack_delay, they wait for that claim and go
  /// with it (one request instead of two): an acknowledgement waits at most 2 x ack_delay.
  /// The default, 100 ms, goes with lookahead's (see there): with 0, a worker sends about one
  /// acknowledgement script per job, which costs Redis as much as claiming each job alone. A
  /// worker that dies sees the jobs it finished but had not acknowledged run again
  /// (at-least-once), up to 2 x ack_delay's worth.
  std::chrono::milliseconds ack_delay{100};
  /// Bound of the payload bytes one claim takes (the first job always goes).
  std::size_t max_claim_bytes = 4u << 20;
  /// On stop: running handlers get this long to finish, then their deadline is cut.
  std::chrono::milliseconds stop_grace{5000};
};

/// Due-to-start lateness, a plain log2 histogram in microseconds (bucket i counts lateness in
/// [2^(i-1), 2^i) us; bucket 0 counts lateness under 1 us).
struct lateness_stats {
  std::uint64_t count = 0;                  ///< starts recorded
  std::uint64_t sum_us = 0;                 ///< their total lateness, for the mean
  std::uint64_t max_us = 0;                 ///< the largest lateness recorded
  std::array<std::uint64_t, 32> buckets{};  ///< counts per log2 bucket (see the struct comment)
  /// Counts one start `us` late (a negative lateness counts as 0).
  void record(std::int64_t us) noexcept;
  /// The upper bound of the bucket holding quantile q (0..1) in us; 0 when empty.
  std::uint64_t quantile_us(double q) const noexcept;
};

/// What a worker counts. Two latenesses per start, both by the server's clock: from the
/// attempt's due time (job::attempt_due_ms: how promptly the worker starts what is due, its
/// wake-ups and claims) and from the scheduled time (job::scheduled_ms: what the producer sees,
/// retry back-offs and expired leases included). They differ only for jobs on a later attempt.
struct worker_stats {
  std::uint64_t claims = 0;        ///< claim scripts run
  std::uint64_t jobs = 0;          ///< jobs claimed
  std::uint64_t fired = 0;         ///< handlers started
  std::uint64_t acked = 0;         ///< jobs acknowledged (their handler succeeded)
  std::uint64_t ack_batches = 0;   ///< batches of acknowledgements sent (alone, or with a claim)
  std::uint64_t failed = 0;        ///< handler errors, exceptions and timeouts
  std::uint64_t retries = 0;       ///< failures the server scheduled again
  std::uint64_t lost_leases = 0;   ///< acks, failures or extensions refused: another claim holds the job
  std::uint64_t dead = 0;          ///< jobs this worker's scripts moved to the dead set
  std::uint64_t handed_back = 0;   ///< claimed jobs released unstarted on stop
  std::uint64_t woken_by_message = 0;  ///< sleeps cut short by a producer's announcement of an earlier job
  /// This attempt's due time (job::attempt_due_ms) to handler start.
  lateness_stats attempt_lateness;
  /// The scheduled time (job::scheduled_ms) to handler start: every attempt's start counts, a
  /// retry's or a requeued job's from the time its producer asked for.
  lateness_stats scheduled_lateness;
};

/// Counts of a queue's sets.
struct queue_depth {
  std::int64_t due = 0;        ///< jobs scheduled and not claimed (due or not yet)
  std::int64_t in_flight = 0;  ///< jobs claimed and not yet acknowledged, failed or expired
  std::int64_t dead = 0;       ///< jobs given up (list_dead())
};

/// A job in the dead set.
struct dead_job {
  std::string id;            ///< the job's id
  std::string payload;       ///< its bytes; empty when over the queue's max_payload_bytes
  std::size_t payload_bytes = 0;  ///< the payload's size (also when it was left out)
  std::int64_t died_ms = 0;  ///< when it was given up (Redis's clock)
  std::int64_t attempts = 0; ///< claims it had
  std::string reason;        ///< why it was given up (the last failure's message, an oversized payload...)
};

/// Durable delayed jobs on Redis: producers' and operators' calls, and the worker (run).
class delay_queue {
 public:
  /// Commands go through `c`, which must outlive the queue.
  delay_queue(client& c, std::string name, queue_options options = {});
  delay_queue(const delay_queue&) = delete;
  delay_queue& operator=(const delay_queue&) = delete;

  /// Adds the job, due at `due` (an absolute time: the producer's wall clock must agree with
  /// Redis's, see schedule_after), unless a job with this id exists (pending, running or dead:
  /// false). errc::value_too_large for a payload over max_payload_bytes.
  task<result<bool>> schedule(std::string id, std::string payload, wall_clock::time_point due);
  /// The same, due `delay` after now by Redis's clock: the producer's clock does not matter.
  task<result<bool>> schedule_after(std::string id, std::string payload, std::chrono::milliseconds delay);
  /// Removes a pending, running or dead job; false if there was none.
  task<result<bool>> cancel(std::string id);
  /// Moves a pending job's due time (earlier or later); false if it is not pending.
  task<result<bool>> reschedule(std::string id, wall_clock::time_point due);

  /// From a running handler: prolongs the job's lease to `visibility` from now (Redis's
  /// clock) and moves the handler's deadline with it. The lease is its claim record's, so the
  /// jobs claimed with it (held by this worker) are prolonged too; a lease is never shortened.
  /// false: the lease was lost (another claim holds the job; stop working on it).
  task<result<bool>> extend(const job& j, std::chrono::milliseconds visibility);

  /// How many jobs are due (pending), in flight and dead.
  task<result<queue_depth>> depth();
  /// Dead jobs, oldest first, from `offset`, at most `count`.
  task<result<std::vector<dead_job>>> list_dead(std::size_t offset, std::size_t count);
  /// Makes a dead job due again after `delay` (Redis's clock), its attempts from zero; false
  /// if it is not dead.
  task<result<bool>> requeue_dead(std::string id, std::chrono::milliseconds delay = {});

  /// Claims and runs due jobs with `handler` until stop() or until run() itself is stopped (a
  /// with_timeout around it, a stop of its caller); then claims no more, hands back jobs it
  /// holds unstarted, gives running handlers stop_grace, cuts their deadline, and returns once
  /// they have finished and been reported (errc::operation_canceled when it was stopped from
  /// outside, so a with_timeout around it answers timed_out). A handler's error, exception (of any type) or
  /// timeout is a failure: retried after a back-off, up to max_attempts. errc::not_supported
  /// on a loop with a paused clock (its sleeps jump: the worker would claim in a busy loop);
  /// errc::invalid_argument for a max_wait or a visibility that is not positive.
  using handler_type = std::function<task<result<void>>(const job&)>;
  /// See above.
  task<result<void>> run(handler_type handler, worker_options options);
  /// Asks run() to finish (as described there). Idempotent.
  void stop() noexcept;

  /// What run() counted (this worker only).
  const worker_stats& stats() const noexcept { return stats_; }
  /// The worker's counts are also metrics, registered by the first run() (on its core, with
  /// labels core and queue="<name>") until the queue is destroyed, so snapshot_metrics() and
  /// to_prometheus() show them: cogwheel_delay_queue_claims_total, _jobs_fired_total,
  /// _retries_total, _lost_leases_total, _dead_jobs_total and the histogram
  /// cogwheel_delay_queue_lateness_seconds (this attempt's due time to handler start, as
  /// worker_stats::attempt_lateness) and cogwheel_delay_queue_scheduled_lateness_seconds (the
  /// scheduled time to handler start, as worker_stats::scheduled_lateness), Redis's clock.
  /// The queue's name (its keys are {name}:...).
  const std::string& name() const noexcept { return name_; }

 private:
  struct held;
  task<void> work();
  task<void> run_job(job j, clock::time_point start_at, clock::time_point lease_end, std::int64_t late_base_us,
                     std::int64_t scheduled_late_base_us);
  task<void> flush_acks();
  task<result<reply>> call(script& s, std::span<const command_arg> args);
  void on_message(std::string_view payload) noexcept;
  void wake() noexcept;
  void finished() noexcept;

  client* client_;
  std::string name_;
  queue_options qopts_;
  std::string keys_storage_[9];
  std::array<command_arg, 9> keys_;
  std::string channel_;
  script schedule_, reschedule_, cancel_, claim_, ack_, fail_, extend_, release_, depth_, list_dead_, requeue_;

  // The worker (run()).
  handler_type handler_;
  worker_options o_;
  bool running_run_ = false;
  bool stopping_ = false;
  bool working_ = false;        // work() has not finished
  unsigned running_ = 0;        // handlers running
  unsigned held_ = 0;           // jobs claimed, waiting for their due time on the wheel
  held* held_list_ = nullptr;   // every job of run_job not yet finished (held or running)
  std::error_code fatal_;       // why work() gave up on its own (a paused clock)
  // Jobs done, acknowledged together while the previous batch is on its way: (token, position
  // in the claim record of that token, 1-based).
  using done_job = std::pair<std::int64_t, std::uint32_t>;
  std::vector<done_job> acks_;
  bool acking_ = false;
  std::int64_t sleeping_until_ms_ = 0;  // Redis time the worker sleeps until
  // Local time of work()'s next claim, which carries the acknowledgements gathered by then
  // (while a claim is on its way: when it was sent); time_point::max() while work() waits for
  // a free slot or drains.
  clock::time_point next_claim_ = clock::time_point::max();
  std::uint64_t claims_carrying_acks_ = 0;  // claims sent with acknowledgements
  std::int64_t hint_ms_ = INT64_MAX;    // earliest due time announced since the last claim
  std::int64_t jitter_ms_ = 0;          // this worker's offset of its lookahead wake-ups
  // The worker's metrics: written by this core, read by snapshots on any thread. Declared
  // before their registrations, which are destroyed (unregistered) first.
  struct metered {
    counter claims, fired, retries, lost_leases, dead;
    histogram lateness_ns, scheduled_lateness_ns;
  };
  void count_lost_leases(std::uint64_t n) noexcept;
  void count_dead(std::uint64_t n) noexcept;
  void count_retry() noexcept;
  void register_metrics();
  metered metrics_;
  std::vector<metric_registration> registrations_;
  sleep_operation* idle_ = nullptr;     // work()'s sleep
  sleep_operation* run_idle_ = nullptr;  // run()'s wait for a stop
  sleep_operation* ack_idle_ = nullptr;  // flush_acks() gathering a batch
  std::coroutine_handle<> run_waiter_;  // run() waiting for work() to finish
  worker_stats stats_;
};

}  // namespace cogwheel::redis
