/// @file
/// runtime: one thread per core, each pinned and running its own loop (I/O backend, timer
/// queue, ready queue); core 0's thread is the one that calls run(). Nothing is shared on the
/// hot path; cores talk through submit_to, which posts to the other loop's inbox and wakes it
/// through the eventfd its loop keeps a read armed on.
#pragma once

#include <type_traits>
#include <utility>

#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/detail/submit.hpp>
#include <cogwheel/runtime/options.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {

/// The multi-core runtime: run() starts one loop per core (see the file comment). Not copyable;
/// one run() at a time.
class runtime {
 public:
  /// Keeps the options; nothing is started. Loops (and their rings) are created by run(), on
  /// the threads that use them.
  explicit runtime(runtime_options options = {});
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;
  /// Precondition: run() has returned (or was never called).
  ~runtime();

  /// Starts one loop per core and runs per_core_main(core) on each. Returns when every core's
  /// main task and the tasks spawned on it have finished, or after stop(), or as soon as a main
  /// task has ended with an exception. Pending timers and operations are then cancelled and
  /// every coroutine frame destroyed. Rethrows the first exception of a main task, or the ring
  /// set-up error of any core. Core 0 runs on the calling thread (pinned meanwhile when
  /// pin_threads, its CPU set given back on return), which must not itself run a cogwheel loop.
  /// per_core_main is any callable taking the core index and returning task<void> (a lambda, a
  /// std::function); it is called once per core, on that core's thread, concurrently.
  template <class F>
    requires std::is_invocable_r_v<task<void>, F&, unsigned>
  void run(F&& per_core_main) {
    run_cores(core_main_ref{&per_core_main, [](void* f, unsigned core) -> task<void> {
                              return (*static_cast<std::remove_reference_t<F>*>(f))(core);
                            }});
  }

  /// Thread-safe, and async-signal-safe: makes run() wind down. A stop() before run(), or
  /// racing its start, is not lost: that run() returns promptly (without starting the main
  /// tasks if it comes before them). Each run() consumes the stops made up to its return.
  void stop() noexcept;

  /// The number of cores run() starts: runtime_options::cores, or for 0 the hardware threads
  /// (std::thread::hardware_concurrency(), at least 1).
  unsigned cores() const noexcept;

  /// A borrowed per-core main (run() blocks until every core is done with it).
  struct core_main_ref {
    void* fn;                                     ///< the caller's callable
    task<void> (*call)(void* fn, unsigned core);  ///< calls it for one core
  };

 private:
  struct state;  // runtime/src/runtime.cpp: the loops, the threads' bookkeeping, stop flags
  void run_cores(core_main_ref per_core_main);
  state* state_;
};

/// The index of the core the caller runs on (0 under run()).
unsigned this_core() noexcept;

/// Runs f() on `core` (f returns R, or task<R> which is then awaited there) and resumes the
/// caller on its own core with the value, or f's exception. f is moved to the other core.
///
/// A cancellable operation (with_timeout(submit_to(core, f), d) works) that carries the
/// caller's budget (docs/deadlines.md): the caller's remaining time, the effective deadline
/// minus now, travels with the request and the target core re-anchors it on its own clock
/// (each core's clock, real or paused, is its own). A task runs there under it, and is stopped
/// when it passes or when the caller is stopped (its deadline, a stop from above, its frame
/// destroyed); the caller is resumed once that task has unwound, a cross-core round trip later,
/// and the scope that ran out answers timed_out. A plain function (not a task) cannot be stopped
/// midway: it runs to its end, and a timeout around it answers then. A caller already stopped or
/// past its deadline sends nothing when its outcome can say so (void or `result<U>`; see
/// operation.hpp). Precondition: on a core of a running runtime, `core` < cores() (a core that
/// does not exist aborts with a message). Allocates the request's shared state once per call.
template <class F>
[[nodiscard]] auto submit_to(unsigned core, F&& f) {
  return detail::submit_operation<std::decay_t<F>>(core, std::forward<F>(f));
}

}  // namespace cogwheel
