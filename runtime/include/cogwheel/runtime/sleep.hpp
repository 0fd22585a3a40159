/// @file
/// sleep_for, sleep_until and yield. A sleep is a timer_node inside the awaiter, i.e. inside the
/// coroutine frame: registering it in the core's wheel (or heap) allocates nothing.
#pragma once

#include <chrono>
#include <coroutine>

#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/time.hpp>
#include <cogwheel/timer/node.hpp>

namespace cogwheel {

/// Completes when the core's timer queue reaches its deadline (never before; at most one tick
/// after). A deadline in the past completes at the next loop iteration. Cancelling it (a stop
/// request, or with_timeout) completes it at the next iteration.
class sleep_operation : public operation<sleep_operation>, private timer::timer_node {
 public:
  /// Sleeps until `deadline`.
  explicit sleep_operation(clock::time_point deadline) noexcept : timer_node(timer_node::calls<&sleep_operation::on_expire>{}) {
    expired_.keep(deadline.time_since_epoch().count());
  }
  /// Moves a sleep that has not started.
  sleep_operation(sleep_operation&& o) noexcept
      : operation(std::move(o)), timer_node(timer_node::calls<&sleep_operation::on_expire>{}) {
    expired_.keep(o.expired_.kept());
  }
  /// Removes its timer if it is still filed (a sleep that ran its course has nothing to remove:
  /// no call into the loop then).
  ~sleep_operation() {
    if (scheduled()) detail::cancel_timer(*this);
  }

  /// When it will complete. Precondition: not started (from its start, the sleep keeps its
  /// continuation in these bytes: 8 bytes less in every sleeping coroutine's frame; whoever needs
  /// the deadline later keeps a copy, as interval's tick does).
  clock::time_point deadline() const noexcept { return clock::time_point(clock::duration(expired_.kept())); }

  /// The operation protocol (operation.hpp): files the timer.
  std::coroutine_handle<> start(detail::continuation c) {
    const clock::time_point at = deadline();
    expired_.prepare(c);  // the one copy of c, over the deadline: what the expired batch resumes
    // A deadline the loop's time has reached is filed as due now (see start_sleep_timer): the
    // loop would otherwise sleep up to a tick before the "next iteration" (a paused clock would
    // jump).
    detail::start_sleep_timer(*this, at);
    return std::noop_coroutine();
  }
  /// The operation protocol: completes the sleep at the next iteration.
  void cancel() noexcept {
    // Re-file at a past deadline: it completes through the ordinary expiry at the next advance.
    if (scheduled()) detail::reschedule_timer(*this, clock::time_point::min());
  }
  /// The operation protocol: a sleep has no outcome.
  void result() const noexcept {}

 private:
  // Frame lines fetched when the timer fires: a small coroutine's frame whole (a frame of up to
  // ~400 bytes at any 16-byte offset spans 7 lines; prefetching fewer lines gains nothing
  // for frames that small).
  static constexpr int frame_lines = 7;

  static void on_expire(timer::timer_node& n) noexcept {
    auto& self = static_cast<sleep_operation&>(n);
    // The coroutine resumes right after advance, one of possibly a million: its frame is
    // fetched now, while the queue fires the rest of the batch. From the frame's start: the
    // resume address is there, and the awaiters the coroutine touches next (its next sleep)
    // follow this one. Awaited by other means (with_timeout's start), the awaiter's own lines.
    const char* at = static_cast<const char*>(self.awaiting_frame());
    const int lines = at != nullptr ? frame_lines : 4;
    if (at == nullptr) at = static_cast<const char*>(self.expired_.prepared().state_address());
    for (int i = 0; i < lines; ++i) __builtin_prefetch(at + 64 * i, 1, 3);
    detail::post_expired(self.expired_);  // resumed right after advance
  }

  // No pointer to the loop: a sleep is filed, moved, cancelled and fired on its loop's thread
  // only (timers and stop requests are single-threaded), which finds it as the current loop.
  // Until start: the deadline (batch_node::keep). From start: the continuation; unlinks itself
  // from the expired batch if the frame goes first.
  detail::batch_node expired_;
};

// Every sleeping coroutine's frame holds one (or, awaited in turn, one per co_await): at a
// million sleepers its bytes are what resuming them fetches from memory.
static_assert(sizeof(void*) != 8 || sizeof(sleep_operation) <= 64, "sleep_operation grew past 64 bytes");

/// Sleeps for d counted from now. d <= 0 completes at the next loop iteration; a d so large that
/// now + d overflows sleeps until time_point::max() (forever, in practice).
inline sleep_operation sleep_for(clock::duration d) noexcept {
  if (d <= clock::duration::zero()) return sleep_operation(clock::time_point::min());  // due now
  return sleep_operation(detail::saturating_add(detail::current_time(), d));
}
/// Any other duration type (hours::max() included) converts with saturation.
template <class Rep, class Period>
sleep_operation sleep_for(std::chrono::duration<Rep, Period> d) noexcept {
  return sleep_for(detail::saturating_duration(d));
}

/// Sleeps until t (a t in the past completes at the next loop iteration).
inline sleep_operation sleep_until(clock::time_point t) noexcept { return sleep_operation(t); }

/// Lets every other ready coroutine, expired timer and completion run, then resumes. In a task
/// asked to stop, resumes at once without requeueing: the task is on its way out (a compute
/// loop that yields also checks co_await stop_requested(), or it never ends).
class yield_awaiter {
 public:
  /// The awaiter protocol: always suspends.
  bool await_ready() const noexcept { return false; }
  /// The awaiter protocol: queues `h` behind everything ready (in a task asked to stop,
  /// resumes at once instead).
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) noexcept {
    const detail::stop_source* s = detail::stop_source_of(h);
    if (s != nullptr && s->stop_requested()) return false;
    detail::post(detail::current_loop(), node_, std::coroutine_handle<>(h));
    return true;
  }
  /// The awaiter protocol: nothing to return.
  void await_resume() const noexcept {}

 private:
  detail::ready_node node_;
};

/// Lets every other ready coroutine, expired timer and completion run, then resumes. Not cut
/// short by a stop request or a timeout: it completes at the next iteration anyway.
inline yield_awaiter yield() noexcept { return {}; }

}  // namespace cogwheel
