/// @file
/// Observing cancellation from inside a task. Operations already complete early with
/// errc::operation_canceled once a stop is requested; a task that loops over sleeps or does
/// long computations between operations checks this to finish promptly. current_deadline()
/// tells a task the budget it runs under (docs/deadlines.md).
#pragma once

#include <coroutine>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/deadline_scope.hpp>
#include <cogwheel/runtime/time.hpp>

namespace cogwheel {

/// What stop_requested() returns: `co_await` it for a bool. Never suspends.
class stop_requested_awaiter {
 public:
  ///@{
  /// The awaitable protocol: await_suspend() reads the awaiting task's stop source and resumes
  /// it at once; await_resume() answers whether a stop was requested.
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) noexcept {
    detail::stop_source* s = detail::stop_source_of(h);
    requested_ = s != nullptr && s->stop_requested();
    return false;
  }
  bool await_resume() const noexcept { return requested_; }
  ///@}

 private:
  bool requested_ = false;
};

/// co_await stop_requested() -> bool: whether the awaiting task has been asked to stop (a
/// timeout above it fired, or its caller was itself stopped). Never suspends; usable only
/// inside a cogwheel task.
inline stop_requested_awaiter stop_requested() noexcept { return {}; }

/// What current_deadline() returns: `co_await` it for a clock::time_point. Never suspends.
class current_deadline_awaiter {
 public:
  ///@{
  /// The awaitable protocol: await_suspend() reads the awaiting task's scopes and resumes it
  /// at once; await_resume() returns the effective deadline.
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) noexcept {
    const detail::stop_source* s = detail::stop_source_of(h);
    at_ = detail::deadline_scope::effective(s != nullptr ? s->scope() : nullptr);
    return false;
  }
  clock::time_point await_resume() const noexcept { return at_; }
  ///@}

 private:
  clock::time_point at_ = clock::time_point::max();
};

/// co_await current_deadline() -> clock::time_point: the awaiting task's effective deadline,
/// the earliest of every scope around it (with_timeout/with_deadline on a task, inherited by
/// when_all children, none in a spawned task or inside shielded()); time_point::max() when
/// there is none. Never suspends. On the loop's clock (now()); the budget left is the
/// difference, e.g. to send along to another service.
inline current_deadline_awaiter current_deadline() noexcept { return {}; }

}  // namespace cogwheel
