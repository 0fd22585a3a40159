// time_driver: one core's notion of time. It owns the clock (real, or virtual for a paused
// clock), the timer queue (wheel or heap), the batch of waiters whose timers expired, and it
// answers the one question the loop asks it before blocking: how long may I wait?
//
// Per iteration the loop calls, in this order:
//   tick()          reads the clock once; the queue advances to that timestamp (only timer
//                   work: callbacks queue their waiters into the expired batch)
//   run_expired()   resumes the expired batch in full
//   wait_ns()       the I/O driver's wait bound (or a poll), from the next deadline
//   after_wait()    paused clock: nothing but timers can make progress, so time jumps to the
//                   next deadline
//
// Timers are scheduled, moved and cancelled through it (schedule, reschedule, cancel), and it
// counts them, and each expiry's lateness, into the core's live_metrics: lateness is the time
// of the tick that fired the timer minus the start of its deadline's tick, told by the queue's
// fire observer (so no byte is added to a timer node).
//
// Threading: the loop's thread only.
#pragma once

#include <cstdint>
#include <optional>

#include <cogwheel/runtime/detail/ready_queue.hpp>
#include <cogwheel/runtime/options.hpp>
#include <cogwheel/timer/queue.hpp>

#include "cycle_clock.hpp"
#include "live_metrics.hpp"

namespace cogwheel::detail {

class time_driver {
 public:
  // `metrics` outlives the driver; the driver counts into it.
  time_driver(const runtime_options& options, live_metrics& metrics);
  time_driver(const time_driver&) = delete;
  time_driver& operator=(const time_driver&) = delete;

  // The timestamp of the current iteration (the one clock read).
  clock::time_point now() const noexcept { return now_; }
  // What a new deadline counts from: the real clock, or the virtual one when paused.
  clock::time_point current_time() const noexcept { return paused_ ? now_ : clock::now(); }
  bool paused() const noexcept { return paused_; }
  timer::timer_queue& timers() noexcept { return timers_; }
  const timer::timer_queue& timers() const noexcept { return timers_; }

  // The timer queue's operations, counted (timers_scheduled / _rescheduled / _cancelled).
  void schedule(timer::timer_node& n, clock::time_point at) {
    ++metrics_.timers_scheduled;
    timers_.schedule(n, at);
  }
  void reschedule(timer::timer_node& n, clock::time_point at) {
    ++(n.scheduled() ? metrics_.timers_rescheduled : metrics_.timers_scheduled);
    timers_.reschedule(n, at);
  }
  bool cancel(timer::timer_node& n) noexcept {
    const bool was_pending = timers_.cancel(n);
    if (was_pending) ++metrics_.timers_cancelled;
    return was_pending;
  }

  // For timer callbacks: c joins this iteration's expired batch. Its frame is fetched now,
  // while the queue expires the rest of the batch: resumed later from run_expired() it is
  // one of up to a million frames, and those misses (the first line holds the resume
  // address; the awaiters that re-arm follow) were most of a sleeper's cost. Four lines: a
  // small task's frame whole, a sleeper's header and first awaiters (more lines gain nothing).
  // A prefetch of memory freed meanwhile is harmless.
  void post_expired(ready_node& node, continuation c) noexcept {
    const char* frame = static_cast<const char*>(c.state_address());
    __builtin_prefetch(frame, 1, 3);
    __builtin_prefetch(frame + 64, 1, 3);
    __builtin_prefetch(frame + 128, 1, 3);
    __builtin_prefetch(frame + 192, 1, 3);
    expired_.push(node, c);
  }
  // The same for a node whose continuation is prepared (batch_node::prepare) and whose waiter
  // prefetched what it will touch itself (a sleep knows its frame: sleep.hpp).
  void post_expired(batch_node& node) noexcept { expired_.push(node); }

  // Reads the clock and advances the queue to it (timers_fired, timer_lateness). may_reuse:
  // the loop did not block since the last tick (it skipped the kernel), so a reading a few
  // microseconds old may stand (see read_clock). `cycles_now`: the cycle counter as it is now
  // (the timed loop passes the reading it already took: one read of the counter fewer).
  void tick(bool may_reuse = false) { tick(may_reuse, cycles()); }
  void tick(bool may_reuse, std::uint64_t cycles_now);
  // Resumes every waiter of the expired batch (those it resumes may add more: all run).
  void run_expired();
  // How long the loop may block when it has nothing else to do: -1 until a completion (no
  // timer pending), 0 a poll (something is due, or the clock is paused), else nanoseconds
  // until the next deadline, measured from a fresh clock reading (the work of this iteration
  // does not lengthen the sleep).
  std::int64_t wait_ns() noexcept;
  // After the I/O driver's wait: on a paused clock, if the wait was a poll that brought
  // nothing and no work is ready, time jumps to the next deadline.
  void after_wait(bool progress) noexcept;
  // Shutdown: drops the expired batch without resuming it.
  void clear_expired() noexcept { expired_.clear(); }

 private:
  // The queue's fire observer: `count` timers with this deadline tick fired.
  static void on_fire(void* self, timer::tick_t deadline_tick, std::size_t count) noexcept;

  live_metrics& metrics_;
  bool paused_;
  bool measure_;
  bool lateness_;                   // runtime_options::metrics
  std::uint64_t tick_ns_;           // the queue's tick
  std::uint64_t now_ns_ = 0;        // now_ since the clock's epoch, for on_fire
  timer::timer_queue timers_;
  clock::time_point now_;
  clock::time_point virtual_now_;                  // paused clock only
  std::optional<clock::time_point> jump_target_;  // set by wait_ns() on a paused clock
  ready_batch expired_;
  std::uint64_t cycles_at_read_ = 0;  // the cycle counter at the last clock read

  // The real clock, or now_ again when may_reuse and the cycle counter says that under ~10 us
  // passed since the last reading: what that adds to a timer's lateness.
  clock::time_point read_clock(bool may_reuse, std::uint64_t cycles_now) noexcept;
};

}  // namespace cogwheel::detail
