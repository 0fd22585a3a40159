// delay_queue: durable delayed jobs in Redis sorted sets, shared by every core of every process
// pointed at the same Redis, with the local wheel waking each worker when the next job is due.
//
// Keys (the {name} hash tag keeps them in one Cluster slot):
//   {name}:due       ZSET id -> due time (ms since the epoch, Redis's clock)
//   {name}:inflight  ZSET id -> visibility expiry of a claimed job
//   {name}:payload   HASH id -> payload;  {name}:attempts  HASH id -> claims so far
//   {name}:dead      ZSET id -> time it gave up (after max_attempts failures)
//   channel {name}:wake   published with the due time when a job becomes the earliest
//
// Guarantees: at-least-once; never before its due time (by Redis's TIME); never run twice at
// once while its visibility holds (a claim moves it atomically from due to in-flight, scored
// now + visibility; the worker runs the handler under a deadline that ends before that expiry).
// A job whose worker died goes back to due when its visibility expires, by whichever worker
// claims next.
//
// Workers do not poll: each claim (one Lua script) also returns the earliest due time and
// visibility expiry; the worker sleeps on its core's wheel until then (capped by max_wait), and
// a Pub/Sub message wakes it early when a producer schedules something earlier.
//
// Threading: a delay_queue belongs to one core, like its client; run one per core.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <cogwheel/io/address.hpp>
#include <cogwheel/redis/client.hpp>
#include <cogwheel/redis/script.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel::redis {

using wall_clock = std::chrono::system_clock;

struct job {
  std::string id;
  std::string payload;
  std::int64_t due_ms = 0;  // as scheduled, ms since the epoch (now, for a job whose worker died)
  std::int64_t attempt = 1;  // 1 on the first run
};

struct worker_options {
  socket_address address;  // of the Redis server, for the worker's Pub/Sub connection
  std::chrono::milliseconds visibility{30000};
  std::chrono::milliseconds max_wait{1000};
  unsigned concurrency = 64;  // jobs running at once on this worker
  std::chrono::milliseconds retry_initial{100};  // back-off after a failure, doubling
  std::chrono::milliseconds retry_max{60000};
  unsigned max_attempts = 10;  // then the job moves to {name}:dead
  // Extra sleep after the next due time, so that one claim takes every job due within it:
  // fewer claims (less Redis CPU per job when jobs are dense) for up to this much lateness.
  std::chrono::milliseconds coalesce{0};
};

struct worker_stats {
  std::uint64_t claims = 0;          // claim scripts run
  std::uint64_t jobs = 0;            // jobs claimed
  std::uint64_t acked = 0;
  std::uint64_t ack_batches = 0;     // acknowledgement scripts run (each for every job done since the last)
  std::uint64_t failed = 0;          // handler errors, exceptions and timeouts
  std::uint64_t woken_by_message = 0;
};

class delay_queue {
 public:
  // Commands go through `c`, which must outlive the queue.
  delay_queue(client& c, std::string name);

  // Adds the job unless one with this id is pending or running (then returns false).
  task<result<bool>> schedule(std::string_view id, std::string_view payload, wall_clock::time_point due);
  // Removes a pending or running job; false if there was none.
  task<result<bool>> cancel(std::string_view id);
  // Moves a pending job's due time (earlier or later); false if it is not pending.
  task<result<bool>> reschedule(std::string_view id, wall_clock::time_point due);

  // Claims and runs due jobs with `handler` until stop(); returns once the jobs it started have
  // finished. A handler's error, exception or timeout (visibility) is a failure: retried after
  // a back-off, up to max_attempts. `handler` must outlive run().
  using handler_type = std::function<task<result<void>>(const job&)>;
  task<result<void>> run(handler_type handler, worker_options options);
  void stop() noexcept;

  const worker_stats& stats() const noexcept { return stats_; }
  const std::string& name() const noexcept { return name_; }

 private:
  task<void> run_job(job j, const handler_type& handler, const worker_options& o, clock::time_point claimed_at);
  task<void> flush_acks();
  void on_message(std::string_view payload) noexcept;
  void wake() noexcept;

  client* client_;
  std::string name_;
  std::string due_, inflight_, payload_, attempts_, dead_, channel_;
  script schedule_, reschedule_, cancel_, claim_, ack_, fail_;
  bool stopping_ = false;
  unsigned running_ = 0;  // jobs started by run() not yet finished
  // Jobs done, acknowledged together by one script while the previous batch is on its way.
  std::vector<std::string> acks_;
  bool acking_ = false;
  std::int64_t sleeping_until_ms_ = 0;  // Redis time the worker sleeps until
  std::int64_t hint_ms_ = INT64_MAX;    // earliest due time announced since the last claim
  sleep_operation* idle_ = nullptr;     // the worker's sleep
  worker_stats stats_;
};

}  // namespace cogwheel::redis
