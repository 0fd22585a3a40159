// runtime: one thread per core, each pinned and running its own loop (ring, timer queue, ready
// queue). Nothing is shared on the hot path; cores talk through submit_to, which posts to the
// other loop's inbox and wakes it through the eventfd its ring keeps a read armed on.
#pragma once

#include <atomic>
#include <coroutine>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <cogwheel/runtime/detail/event_loop.hpp>
#include <cogwheel/runtime/options.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {

class runtime {
 public:
  // Rings are created by run(), on the threads that use them.
  explicit runtime(runtime_options options = {});
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;
  ~runtime();

  // Starts one loop per core and runs per_core_main(core) on each. Returns when every core's
  // main task and the tasks spawned on it have finished, or after stop(), or as soon as a main
  // task has ended with an exception. Pending timers and operations are then cancelled and
  // every coroutine frame destroyed. Rethrows the first exception of a main task, or the ring
  // set-up error of any core.
  void run(std::function<task<void>(unsigned core)> per_core_main);

  // Thread-safe, and async-signal-safe: makes run() wind down. A stop() before run(), or
  // racing its start, is not lost: that run() returns promptly (without starting the main
  // tasks if it comes before them). Each run() consumes the stops made up to its return.
  void stop() noexcept;

  unsigned cores() const noexcept { return cores_; }

 private:
  void core_main(unsigned core, const std::function<task<void>(unsigned)>& per_core_main);
  void core_finished() noexcept;
  void fail(std::exception_ptr e) noexcept;

  runtime_options options_;
  unsigned cores_;
  // Core i's loop while run() runs (null before it exists and after run()); atomics because
  // stop() may read them from any thread or a signal handler. The array itself lives as long
  // as the runtime.
  std::unique_ptr<std::atomic<detail::event_loop*>[]> loops_;
  std::atomic<unsigned> running_{0};        // cores whose work has not finished yet
  std::atomic<unsigned> stop_calls_{0};     // stop() calls using loops_ right now
  std::atomic<bool> stopping_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

// The index of the core the caller runs on (0 under run()).
unsigned this_core() noexcept;

namespace detail {

template <class F>
using submit_result_t = std::invoke_result_t<F&>;

template <class R>
struct unwrap_task {
  using type = R;
};
template <class T>
struct unwrap_task<task<T>> {
  using type = T;
};

// State shared by the caller's core and the target core. The caller's core alone reads
// `abandoned` and resumes `awaiting`, so no lock is needed beyond the inboxes'.
template <class T>
struct submit_state {
  std::conditional_t<std::is_void_v<T>, bool, std::optional<T>> value{};
  std::exception_ptr error;
  std::coroutine_handle<> awaiting;
  event_loop* home = nullptr;
  bool abandoned = false;
  bool completed = false;

  void reply(std::shared_ptr<submit_state> self) {
    home->post_remote([self] {
      self->completed = true;
      if (!self->abandoned) self->awaiting.resume();
    });
  }
};

// Calls f and awaits the task it returns. f lives in this frame until that task has finished:
// when f is a lambda coroutine, its captures live in the lambda object, not in the task's frame.
template <class T, class F>
task<void> run_submitted(std::shared_ptr<submit_state<T>> st, F f) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await f();
    } else {
      st->value.emplace(co_await f());
    }
  } catch (...) {
    st->error = std::current_exception();
  }
  st->reply(st);
}

void abort_bad_core(unsigned core) noexcept;

template <class F>
class submit_awaiter {
  using R = submit_result_t<F>;
  using T = typename unwrap_task<R>::type;

 public:
  submit_awaiter(unsigned core, F f) : core_(core), f_(std::move(f)) {}
  submit_awaiter(submit_awaiter&&) noexcept = default;
  ~submit_awaiter() {
    if (state_ && !state_->completed) state_->abandoned = true;  // caller's frame is going away
  }

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    event_loop& home = current_loop();
    event_loop* target = home.peer(core_);
    if (target == nullptr) abort_bad_core(core_);
    state_ = std::make_shared<submit_state<T>>();
    state_->awaiting = h;
    state_->home = &home;
    target->post_remote([st = state_, f = std::move(f_)]() mutable {
      if constexpr (std::is_same_v<R, task<T>>) {
        spawn(run_submitted<T>(st, std::move(f)));
      } else {
        try {
          if constexpr (std::is_void_v<T>)
            f();
          else
            st->value.emplace(f());
        } catch (...) {
          st->error = std::current_exception();
        }
        st->reply(st);
      }
    });
  }
  T await_resume() {
    if (state_->error) std::rethrow_exception(state_->error);
    if constexpr (!std::is_void_v<T>) return std::move(*state_->value);
  }

 private:
  unsigned core_;
  F f_;
  std::shared_ptr<submit_state<T>> state_;
};

}  // namespace detail

// Runs f() on `core` (f returns R, or task<R> which is then awaited there) and resumes the
// caller on its own core with the value, or f's exception. f is moved to the other core.
template <class F>
[[nodiscard]] auto submit_to(unsigned core, F&& f) {
  return detail::submit_awaiter<std::decay_t<F>>(core, std::forward<F>(f));
}

}  // namespace cogwheel
