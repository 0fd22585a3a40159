// What a core's loop counts, for metrics and tests: loop_stats(), current_backend() and
// pending_timers() of the calling thread's loop.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cogwheel/runtime/options.hpp>

namespace cogwheel {

namespace detail {
struct loop_stats {
  std::uint64_t iterations = 0;
  std::uint64_t waits = 0;            // iterations that blocked (or would have) in the kernel
  std::uint64_t completions = 0;      // I/O completions dispatched (CQEs, or epoll results)
  std::uint64_t timers_fired = 0;
  std::uint64_t sq_full_flushes = 0;  // io_uring: the SQ was full and was submitted to make room
  std::uint64_t cq_overflows = 0;     // io_uring: reaps that found the kernel holding overflowed
                                      // CQEs
  std::uint64_t clock_jumps = 0;      // paused clock: jumps to the next deadline
  std::uint64_t spawn_failures = 0;   // spawned tasks that ended with an exception
  std::uint64_t timer_ns = 0;         // time inside the timer queue's advance() alone (only
                                      // with runtime_options::measure_timer_work); expired
                                      // waiters are resumed after it, outside this count
  std::uint64_t remote_messages = 0;  // messages from other cores delivered (submit_to)
  std::uint64_t remote_wakeups = 0;   // times another core had to wake this loop from its
                                      // sleep in the kernel (at most one per burst of messages)
  std::uint64_t timers_scheduled = 0;  // timers filed into the timer queue (sleeps, timeouts,
                                       // deadlines; a reschedule is not counted)
  std::uint64_t submissions = 0;       // I/O requests handed to the backend (io_uring or epoll)
};
}  // namespace detail

using loop_counters = detail::loop_stats;

// Counters of the calling thread's loop. Precondition: called on a cogwheel loop thread.
loop_counters loop_stats();

// The backend the calling thread's loop does its I/O through (io_uring or epoll, never
// automatic). Precondition: called on a cogwheel loop thread.
backend_kind current_backend();

// Timers pending in the calling thread's loop's queue.
std::size_t pending_timers();

}  // namespace cogwheel
