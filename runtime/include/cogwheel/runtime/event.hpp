/// @file
/// cogwheel::event: a flag that tasks on any core wait for.
#pragma once

#include <atomic>
#include <coroutine>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/waiter.hpp>
#include <cogwheel/runtime/operation.hpp>

namespace cogwheel {

/// A flag tasks wait for, usable from every core (set() and reset() from any thread). set()
/// wakes every task waiting and lets later waits through at once until reset(). A waiter woken
/// by set() resumes even if reset() comes before it runs: it was released.
///
/// wait() is a cancellable operation: with_timeout(ev.wait(), d) gives result<void>
/// (errc::timed_out when the flag was not set in time).
///
/// Precondition of the destructor: no task waits on it.
class event {
 public:
  class wait_operation;

  /// Not set.
  event() noexcept = default;
  event(const event&) = delete;
  event& operator=(const event&) = delete;

  /// Sets the flag and wakes every waiter (those on other cores through their loops' inboxes,
  /// one message per loop and burst). Any thread.
  void set() noexcept {
    detail::spin_guard g(lock_);
    set_.store(true, std::memory_order_release);
    while (!waiters_.empty()) detail::hand(waiters_.pop_front(), detail::waiter::outcome::granted);
  }
  /// Clears the flag: waits from now on suspend until the next set(). Any thread.
  void reset() noexcept {
    detail::spin_guard g(lock_);
    set_.store(false, std::memory_order_relaxed);
  }
  /// Whether the flag is set (a snapshot when other threads may change it).
  bool is_set() const noexcept { return set_.load(std::memory_order_acquire); }

  /// Completes when the flag is set: at once if it is now.
  wait_operation wait() noexcept;

 private:
  mutable detail::spin_lock lock_;
  std::atomic<bool> set_{false};  // written under lock_; read without it on the fast path
  detail::wait_list waiters_;
};

/// What event::wait() returns: a cancellable operation (see operation.hpp) with a void outcome.
/// Awaited once; movable only before it is awaited.
class event::wait_operation : public operation<wait_operation> {
 public:
  /// A wait for `e`, started when awaited (what event::wait() returns).
  explicit wait_operation(event& e) noexcept : event_(&e) {}
  /// Before it is awaited only.
  wait_operation(wait_operation&& o) noexcept : operation<wait_operation>(std::move(o)), event_(o.event_) {}
  wait_operation& operator=(wait_operation&&) = delete;
  /// A wait still queued leaves the queue; one released but not yet resumed is unqueued.
  ~wait_operation() {
    if (!in_flight_) return;
    detail::spin_guard g(event_->lock_);
    if (w_.state == detail::waiter::phase::waiting)
      event_->waiters_.remove(w_);
    else if (w_.state == detail::waiter::phase::handed)
      detail::unqueue(w_);
  }

  /// Part of the operation protocol: completes at once when the flag is set, else queues.
  std::coroutine_handle<> start(continuation c) noexcept {
    if (!event_->is_set()) {
      done_ = c;
      detail::spin_guard g(event_->lock_);
      if (!event_->set_.load(std::memory_order_relaxed)) {
        detail::prepare_wait(w_, continuation(&wait_operation::on_resume, this));
        event_->waiters_.push_back(w_);
        in_flight_ = true;
        return std::noop_coroutine();
      }
    }
    return c.complete();
  }
  /// Part of the operation protocol: a wait still queued completes now (cut).
  void cancel() noexcept {
    if (!in_flight_) return;
    detail::spin_guard g(event_->lock_);
    if (w_.state == detail::waiter::phase::waiting) detail::cancel_waiting(event_->waiters_, w_);
  }
  /// Part of the operation protocol: nothing (with_timeout tells a cut wait by its timer).
  void result() const noexcept {}

 private:
  static std::coroutine_handle<> on_resume(void* p) noexcept {
    auto& self = *static_cast<wait_operation*>(p);
    self.in_flight_ = false;
    self.w_.state = detail::waiter::phase::done;
    return self.done_.complete();
  }

  event* event_;
  bool in_flight_ = false;  // queued and not yet resumed; home thread only
  continuation done_;
  detail::waiter w_;
};

inline event::wait_operation event::wait() noexcept { return wait_operation(*this); }

}  // namespace cogwheel
