// Observing cancellation from inside a task. Operations already complete early with
// errc::operation_canceled once a stop is requested; a task that loops over sleeps or does
// long computations between operations checks this to finish promptly.
#pragma once

#include <coroutine>

#include <cogwheel/runtime/continuation.hpp>

namespace cogwheel {

// co_await stop_requested() -> bool: whether the awaiting task has been asked to stop (a
// timeout above it fired, or its caller was itself stopped). Never suspends.
class stop_requested_awaiter {
 public:
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) noexcept {
    detail::stop_source* s = detail::stop_source_of(h);
    requested_ = s != nullptr && s->stop_requested();
    return false;
  }
  bool await_resume() const noexcept { return requested_; }

 private:
  bool requested_ = false;
};

inline stop_requested_awaiter stop_requested() noexcept { return {}; }

}  // namespace cogwheel
