/// @file
/// deadline: a point in time that can be moved cheaply, e.g. a connection's idle deadline that
/// every received message pushes forward. It owns one timer in its core's queue, scheduled once;
/// reset() moves it in O(1) (plus one step per nested scope that waits for it to move later, see
/// add_dependent; usually none) (a later expiry is applied lazily by the wheel: the node stays put
/// and is re-filed when its old slot comes due), so a message costs no list or heap surgery.
///
/// with_deadline(op, d) makes `op` one of the deadline's waiters (any number: a connection's
/// reader and writer may share its idle deadline): when the timer fires, every operation
/// waiting on it is cancelled and completes with errc::timed_out. reset() moves the expiry for
/// all of them. Waiters are intrusive nodes in their awaiters: nothing is allocated.
///
/// A deadline belongs to the core that created it: construct, reset and destroy it there.
///
/// Expiry is deferred like every expiry: the timer callback only queues the deadline into the
/// loop's expired batch, and the waiters are told (their operations cancelled) when that batch
/// runs, right after the timer queue's advance(). A reset() in between (by an earlier entry of
/// the same batch) wins: the waiters are not told.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>

#include <cogwheel/runtime/detail/intrusive_list.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/time.hpp>
#include <cogwheel/timer/node.hpp>

namespace cogwheel {

namespace detail {
/// What a deadline tells the operations waiting on it; a node of the deadline's waiter list.
struct deadline_waiter : list_link {
  void (*on_deadline)(deadline_waiter&) noexcept = nullptr;
};
}  // namespace detail

/// A point in time that can be moved cheaply, waited on by any number of operations through
/// with_deadline(op, d); see the top of deadline.hpp for the whole contract.
class deadline : private timer::timer_node {
 public:
  /// Expires from_now after the current time. Precondition: called on a cogwheel loop thread.
  explicit deadline(clock::duration from_now);
  /// Any other duration type (hours::max() included) converts with saturation.
  template <class Rep, class Period>
  explicit deadline(std::chrono::duration<Rep, Period> from_now)
      : deadline(detail::saturating_duration(from_now)) {}
  deadline(const deadline&) = delete;             ///< Not copyable: its timer is linked.
  deadline& operator=(const deadline&) = delete;  ///< Not copyable: its timer is linked.
  /// Cancels its timer. Precondition: no operation waits on it any more.
  ~deadline();

  /// Moves the expiry to from_now after the current time, later or earlier. O(1) on the wheel.
  /// A deadline that had expired becomes pending again.
  void reset(clock::duration from_now);
  /// Any other duration type (hours::max() included) converts with saturation.
  template <class Rep, class Period>
  void reset(std::chrono::duration<Rep, Period> from_now) {
    reset(detail::saturating_duration(from_now));
  }
  /// Moves the expiry to the time point `expiry`, later or earlier. O(1) on the wheel.
  void reset_to(clock::time_point expiry);

  /// When it expires (or expired).
  clock::time_point expiry() const noexcept { return expiry_; }
  /// True once the expiry has passed: its timer fired, or the current time is past it.
  bool expired() const noexcept;

  /// For with_deadline: makes `w` a waiter, told at expiry. Precondition: !w.linked(). detach()
  /// is a no-op for a waiter that is not waiting (e.g. one the expiry already released).
  void attach(detail::deadline_waiter& w) noexcept { waiters_.push_back(w); }
  /// See attach().
  void detach(detail::deadline_waiter& w) noexcept { w.unlink(); }
  /// For a scope nested in one that follows this deadline, which armed no timer because this
  /// deadline came first: w.on_deadline is called (once; w is unlinked first) when reset()
  /// pushes the expiry later, so that the scope arms its own timer if it now comes first.
  /// Precondition: !w.linked(). A reset that pulls the expiry in tells nobody.
  void add_dependent(detail::deadline_waiter& w) noexcept {
    dependents_.push_back(w);
    maybe_dependents_ = true;
  }

 private:
  static void on_expire(timer::timer_node& n) noexcept;
  static std::coroutine_handle<> release_waiters(void* self) noexcept;

  // Layout: what every message of an idle connection touches (the timer node, the base, then
  // expiry_ and the flags for reset() and expired(), waiters_ for with_deadline's attach and
  // detach) is the first 48 bytes, so that it is one cache line or two, not three; what only
  // expiry, nested scopes and destruction use follows. reset() reaches the timer queue through
  // the thread's loop, which is this deadline's (the contract above), so loop_ is cold, and
  // reads dependents_ only when maybe_dependents_ says it may hold one. At a million connections
  // each of those loads was a cache miss per message, on a line nothing else had touched
  // (bench/idle_bench.cpp; docs/timer.md, "The deadline's cache lines").
  clock::time_point expiry_;
  bool fired_ = false;
  // False: dependents_ is empty. Set by add_dependent(), cleared by the reset() that finds the
  // list empty or drains it (a dependent may unlink itself meanwhile; then the flag is stale
  // and costs that one reset a look at the list).
  bool maybe_dependents_ = false;
  detail::intrusive_list<detail::deadline_waiter> waiters_;  // the operations waiting on it
  detail::intrusive_list<detail::deadline_waiter> dependents_;  // see add_dependent
  detail::event_loop* loop_;
  detail::ready_node expired_;  // queued in the expired batch between expiry and release
};

}  // namespace cogwheel
