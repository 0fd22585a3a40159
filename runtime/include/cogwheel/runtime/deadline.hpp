// deadline: a point in time that can be moved cheaply, e.g. a connection's idle deadline that
// every received message pushes forward. It owns one timer in its core's queue, scheduled once;
// reset() moves it in O(1) (a later expiry is applied lazily by the wheel: the node stays put
// and is re-filed when its old slot comes due), so a message costs no list or heap surgery.
//
// with_deadline(op, d) makes `op` one of the deadline's waiters (any number: a connection's
// reader and writer may share its idle deadline): when the timer fires, every operation
// waiting on it is cancelled and completes with errc::timed_out. reset() moves the expiry for
// all of them. Waiters are intrusive nodes in their awaiters: nothing is allocated.
//
// A deadline belongs to the core that created it: construct, reset and destroy it there.
#pragma once

#include <chrono>
#include <cstdint>

#include <cogwheel/runtime/detail/event_loop.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/timer/node.hpp>

namespace cogwheel {

class deadline;

namespace detail {
// What a deadline tells the operations waiting on it; a node of the deadline's waiter list.
class deadline_waiter {
 public:
  deadline_waiter() noexcept = default;
  deadline_waiter(const deadline_waiter&) = delete;
  deadline_waiter& operator=(const deadline_waiter&) = delete;
  ~deadline_waiter() { unlink(); }

  void (*on_deadline)(deadline_waiter&) noexcept = nullptr;

  bool linked() const noexcept { return next_ != nullptr; }
  void unlink() noexcept {
    if (next_ == nullptr) return;
    prev_->next_ = next_;
    next_->prev_ = prev_;
    prev_ = next_ = nullptr;
  }

 private:
  friend class cogwheel::deadline;
  deadline_waiter* prev_ = nullptr;
  deadline_waiter* next_ = nullptr;  // null iff not waiting
};
}  // namespace detail

class deadline : private timer::timer_node {
 public:
  // Expires from_now after the current time. Precondition: called on a cogwheel loop thread.
  explicit deadline(clock::duration from_now);
  // Any other duration type (hours::max() included) converts with saturation.
  template <class Rep, class Period>
  explicit deadline(std::chrono::duration<Rep, Period> from_now)
      : deadline(detail::saturating_duration(from_now)) {}
  deadline(const deadline&) = delete;
  deadline& operator=(const deadline&) = delete;
  ~deadline();

  // Moves the expiry to from_now after the current time, later or earlier. O(1) on the wheel.
  // A deadline that had expired becomes pending again.
  void reset(clock::duration from_now);
  template <class Rep, class Period>
  void reset(std::chrono::duration<Rep, Period> from_now) {
    reset(detail::saturating_duration(from_now));
  }
  void reset_to(clock::time_point expiry);

  clock::time_point expiry() const noexcept { return expiry_; }
  // True once the expiry has passed: its timer fired, or the current time is past it.
  bool expired() const noexcept;

  // For with_deadline. Precondition of attach: !w.linked(). detach is a no-op for a waiter
  // that is not waiting (e.g. one the expiry already released).
  void attach(detail::deadline_waiter& w) noexcept {
    w.prev_ = waiters_.prev_;
    w.next_ = &waiters_;
    waiters_.prev_->next_ = &w;
    waiters_.prev_ = &w;
  }
  void detach(detail::deadline_waiter& w) noexcept { w.unlink(); }

 private:
  static void on_expire(timer::timer_node& n) noexcept;

  detail::event_loop* loop_;
  clock::time_point expiry_;
  bool fired_ = false;
  detail::deadline_waiter waiters_;  // sentinel of a circular list of waiting operations
};

// Periodic ticks on a fixed grid (start + k * period), so they never drift. If the loop was
// busy and ticks were missed, next() completes at once for the latest missed grid point and the
// following tick is the next grid point after now: missed ticks are skipped, not replayed in a
// burst; missed_ticks() counts them.
class interval {
 public:
  // The first tick is one period from now. Precondition: period > 0.
  explicit interval(clock::duration period);

  class tick_operation : public detail::operation_base<tick_operation> {
   public:
    tick_operation(interval& owner, clock::time_point at) noexcept : owner_(&owner), sleep_(at) {}
    std::coroutine_handle<> start(detail::continuation c) { return sleep_.start(c); }
    void cancel() noexcept { sleep_.cancel(); }
    // A tick cut short before its grid point (a timeout, a stop) is no tick: the grid stays
    // put and the next next() waits for the same point, instead of silently losing it.
    void result() noexcept {
      if (detail::current_time() >= sleep_.deadline()) owner_->advance_grid();
    }

   private:
    interval* owner_;
    sleep_operation sleep_;
  };

  // Completes at the next grid point.
  tick_operation next() noexcept { return tick_operation(*this, next_); }

  clock::duration period() const noexcept { return period_; }
  clock::time_point next_tick() const noexcept { return next_; }
  std::uint64_t missed_ticks() const noexcept { return missed_; }

 private:
  void advance_grid() noexcept;

  clock::duration period_;
  clock::time_point next_;
  std::uint64_t missed_ = 0;
};

}  // namespace cogwheel
