/// @file
/// with_timeout(op, d), with_deadline(op, t), with_deadline(op, deadline&): race an operation
/// against a timer of the core's wheel (or heap).
///
///   op completes first: the timer is cancelled (O(1)) and op's outcome returned.
///   the timer fires first: op is cancelled (ASYNC_CANCEL for a kernel operation, a stop request
///   for a task) and awaited until it has really completed, so the kernel is done with the
///   caller's buffer and the task has finished, before the caller resumes.
///
/// The one rule for what the caller gets once the timer has fired, for every kind of op: an
/// outcome that can say whether it was cut short is returned as it is when it says "not by
/// you", i.e. a `result<U>` holding a value (bytes read or written are never lost) or an error
/// other than errc::operation_canceled (a real failure that raced the timer); everything else
/// (operation_canceled, a void operation, a task<T> with a plain T, which cannot tell) becomes
/// errc::timed_out. A task that must keep a value it finished despite the timeout returns
/// `result<U>`. Timers due in the same tick fire in the order they were filed.
///
/// Scopes (docs/deadlines.md): around a task, these open a deadline scope; everything the task
/// awaits runs under the earliest deadline of the scopes around it (co_await current_deadline()).
/// A scope whose deadline is not earlier than that arms no timer: the scope around it fires
/// first, stops the task, and answers timed_out itself (this one answers operation_canceled, as
/// when its caller is stopped); if the deadline that came first is a movable `deadline`, a reset
/// that pushes it past this scope's makes this scope arm its timer then. When a scope around has
/// already run out, or the caller is already stopped, op is not started at all: the caller gets
/// operation_canceled (and an expired `deadline&` of its own: timed_out). An own time point
/// already past is raced as any other: the timer fires at the next iteration.
///
/// shielded(op, grace) runs op outside every scope around it and unreached by the caller's stop:
/// cleanup that must run after the deadline (a close_notify, an acknowledgement), bounded by its
/// own grace as with_timeout(op, grace) would.
///
/// `op` is a cancellable_operation (sleeps, socket operations, interval ticks) or a task<T>. The
/// result is `result<U>` when op yields `result<U>`, result<void> when op yields void, else
/// result<T>. An exception thrown by a task propagates. The awaiter (timer node included) lives
/// in the awaiting coroutine's frame: nothing is allocated.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/detail/deadline_scope.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/time.hpp>
#include <cogwheel/runtime/detail/posting_timer.hpp>
#include <cogwheel/timer/node.hpp>

namespace cogwheel {

namespace detail {

// A task as a cancellable_operation: it runs with a stop source of its own, which cancel()
// triggers; the operation completes when the task has finished.
template <class T>
class task_operation {
 public:
  explicit task_operation(task<T> t) noexcept : task_(std::move(t)) {}
  task_operation(task_operation&& o) noexcept : task_(std::move(o.task_)) {}

  // The task runs in s (the scope its with_timeout opens).
  void bind_scope(const deadline_scope* s) noexcept { stop_.set_scope(s); }
  std::coroutine_handle<> start(continuation c) noexcept { return task_.start(c, &stop_); }
  void cancel() noexcept { stop_.request_stop(); }
  T result() { return task_.take(); }

 private:
  // Declared first, destroyed last: destroying a suspended task's frame detaches its operation
  // from stop_.
  stop_source stop_;
  task<T> task_;
};

template <class Op>
auto as_operation(Op&& op) {
  if constexpr (requires { typename std::remove_cvref_t<Op>::promise_type; })
    return task_operation<typename std::remove_cvref_t<Op>::value_type>(std::forward<Op>(op));
  else {
    static_assert(cancellable_operation<std::remove_cvref_t<Op>>,
                  "with_timeout/with_deadline need a task<T> or a cancellable operation "
                  "(start/cancel/result, see <cogwheel/runtime/operation.hpp>)");
    return std::remove_cvref_t<Op>(std::forward<Op>(op));
  }
}

template <class R>
struct timeout_result {
  using type = result<R>;
};
template <class U>
struct timeout_result<result<U>> {
  using type = result<U>;
};

// Races Op against either its own timer (a time point) or a borrowed deadline, inside the
// deadline scope it opens (scope_).
template <class Op>
class timeout_awaiter : private cancel_hook, private posting_timer, private deadline_waiter {
  using op_result = decltype(std::declval<Op&>().result());

 public:
  using result_type = typename timeout_result<op_result>::type;

  // `op` as with_deadline took it (an operation or a task): op_ is made from it in place
  // (as_operation's prvalue initialises the member), one move from the caller's temporary and
  // no intermediate operation to move and destroy. shield: outside the caller's scopes and stop
  // (shielded()).
  template <class Raw>
  timeout_awaiter(Raw&& op, clock::time_point at, bool shield = false) noexcept
      : op_(as_operation(std::forward<Raw>(op))), at_(at), shield_(shield) {}
  template <class Raw>
  timeout_awaiter(Raw&& op, deadline& d) noexcept
      : op_(as_operation(std::forward<Raw>(op))), deadline_(&d) {}
  timeout_awaiter(timeout_awaiter&& o) noexcept
      : op_(std::move(o.op_)),
        at_(o.at_),
        deadline_(o.deadline_),
        shield_(o.shield_) {}
  ~timeout_awaiter() {
    // Once done_, on_done has cancelled the timer and nothing arms it again (on_outer_moved
    // looks at done_ first).
    if (loop_ != nullptr && !done_) detail::cancel_timer(*loop_, *this);
    deadline_waiter::unlink();  // not via deadline_: the deadline may be gone already
    if (parent_stop_ != nullptr) parent_stop_->detach(*this);
    // op_'s own destructor cancels and waits for it if it is still in flight.
  }

  bool await_ready() const noexcept { return false; }

  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> h) {
    awaiting_ = h;
    arm_expiry(current_loop(), continuation(&timeout_awaiter::fire_thunk, this));
    stop_source* caller = shield_ ? nullptr : stop_source_of(h);
    if (caller == nullptr && deadline_ == nullptr) {
      // The lean race: an own time point, and a caller with no stop source (a spawned task,
      // shielded(), a foreign coroutine). Then there is no scope around (scopes reach a chain
      // through its stop source) that could precede this one or have run out, no stop to
      // check or attach to, and no deadline object: what the general path below does in this
      // case, without its tests. The HTTP server's and echo's reads and writes come here.
      scope_.open(nullptr, at_);
      detail::schedule_timer(*loop_, *this, at_);
      return start_op();
    }
    const deadline_scope* around = caller != nullptr ? caller->scope() : nullptr;
    if (deadline_ != nullptr)
      scope_.open(around, *deadline_);
    else
      scope_.open(around, at_);
    // Past the deadline, nothing starts: a deadline object that has expired, or one of the
    // scopes around. (A time point already past is still raced, as it always was: the timer
    // fires at the next iteration, and a read that finds data there returns it.)
    if (deadline_ != nullptr && deadline_->expired()) {
      fired_ = true;
      return h;
    }
    if (caller != nullptr && must_not_start(*caller)) {
      stopped_ = true;
      return h;
    }
    parent_stop_ = caller;
    if (parent_stop_ != nullptr) {
      parent_stop_->attach(*this, &timeout_awaiter::on_parent_stop);
    }
    if (deadline_ != nullptr) {
      on_deadline = &timeout_awaiter::on_deadline_thunk;
      deadline_->attach(*this);
    } else {
      arm_unless_preceded();
    }
    return start_op();
  }

  result_type await_resume() {
    if (!started_) return result_type(fired_ ? errc::timed_out : errc::operation_canceled);
    if constexpr (std::is_void_v<op_result>) {
      op_.result();
      if (expired()) return result_type(errc::timed_out);
      // A void operation (a sleep) cannot say that it was cut short: say it for it, or the
      // stopped caller would take a cancelled sleep for a completed one.
      if (stopped_ || (refused_meanwhile() && deadline_scope::effective(&scope_) <= current_time()))
        return result_type(errc::operation_canceled);
      return result_type();
    } else if constexpr (is_result_v<op_result>) {
      op_result r = op_.result();
      if (!r.has_value() && r.error() == errc::operation_canceled && expired()) return result_type(errc::timed_out);
      return r;
    } else {
      op_result v = op_.result();
      if (expired()) return result_type(errc::timed_out);
      return result_type(std::move(v));
    }
  }

  // Whether the timer fired (valid after resumption).
  bool timer_fired() const noexcept { return fired_; }

 private:
  // The timer fired, or an operation inside was refused because a deadline had passed and it
  // is this scope's (its expiry would have come in a later batch, or a task computed past it).
  bool expired() const noexcept { return fired_ || (refused_meanwhile() && scope_.own() <= current_time()); }
  bool refused_meanwhile() const noexcept { return deadline_refusals != refusals_at_start_; }

  // Once the timer is armed (or waits on a deadline): op starts inside scope_.
  std::coroutine_handle<> start_op() {
    if constexpr (requires { op_.bind_scope(&scope_); }) op_.bind_scope(&scope_);
    refusals_at_start_ = deadline_refusals;
    started_ = true;
    return op_.start(continuation(&timeout_awaiter::on_done, this));
  }

  // One timer per scope, and none for a scope that a scope around it precedes: that one fires
  // first and stops this one's task. If what precedes it is a movable deadline, this scope
  // waits for it to be pushed later (on_outer_moved) and then looks again.
  void arm_unless_preceded() {
    const deadline_scope* first = deadline_scope::earliest(scope_.parent());
    if (first == nullptr || at_ < first->own()) {
      detail::schedule_timer(*loop_, *this, at_);
    } else if (deadline* d = first->movable()) {
      on_deadline = &timeout_awaiter::on_outer_moved;
      d->add_dependent(*this);
    }
  }
  static void on_outer_moved(deadline_waiter& w) noexcept {
    auto& self = static_cast<timeout_awaiter&>(w);
    if (!self.done_ && !self.fired_) self.arm_unless_preceded();
  }

  void fire() noexcept {
    if (done_ || fired_) return;
    fired_ = true;
    op_.cancel();
  }
  // Deferred like every expiry: the timer callback (posting_timer's) only queues the awaiter
  // into the loop's expired batch; this cancels the operation when that batch runs, right after
  // advance().
  static std::coroutine_handle<> fire_thunk(void* p) noexcept {
    static_cast<timeout_awaiter*>(p)->fire();
    return std::noop_coroutine();
  }
  static void on_deadline_thunk(deadline_waiter& w) noexcept { static_cast<timeout_awaiter&>(w).fire(); }
  static void on_parent_stop(cancel_hook& h) noexcept {
    auto& self = static_cast<timeout_awaiter&>(h);
    if (self.done_) return;
    self.stopped_ = true;  // the caller itself is being stopped: not a timeout
    self.op_.cancel();
  }
  static std::coroutine_handle<> on_done(void* p) noexcept {
    auto& self = *static_cast<timeout_awaiter*>(p);
    self.done_ = true;
    cancel_timer(*self.loop_, self);
    self.deadline_waiter::unlink();
    if (self.parent_stop_ != nullptr) {
      self.parent_stop_->detach(self);
      self.parent_stop_ = nullptr;
    }
    return self.awaiting_;
  }

  Op op_;
  clock::time_point at_{};
  deadline* deadline_ = nullptr;
  deadline_scope scope_;  // the scope op runs in; its parent is the caller's
  stop_source* parent_stop_ = nullptr;
  std::coroutine_handle<> awaiting_;
  std::uint64_t refusals_at_start_ = 0;  // deadline_refusals when op started
  bool shield_ = false;
  bool started_ = false;
  bool fired_ = false;
  bool stopped_ = false;
  bool done_ = false;
};

template <class Op>
using timeout_awaiter_for = timeout_awaiter<decltype(as_operation(std::declval<Op>()))>;

}  // namespace detail

/// Races `op` (an operation, or a task<T>: see the file comment) against a timer at `t`, on the
/// loop's clock. awaitable: op's outcome (a result<T> stays one; a task<T>'s T becomes
/// result<T>), or errc::timed_out when the timer won; op has finished either way (a kernel
/// operation's buffer is free again). A `t` already passed times out at the next iteration unless
/// op completes first. A task inside runs under this deadline (current_deadline()).
template <class Op>
[[nodiscard]] auto with_deadline(Op&& op, clock::time_point t) {
  return detail::timeout_awaiter_for<Op>(std::forward<Op>(op), t);
}

/// with_deadline(op, t) against a shared deadline object: the race ends at d.expiry(), and a
/// d.reset() while op runs moves the end (later or earlier). `d` must outlive the co_await.
template <class Op>
[[nodiscard]] auto with_deadline(Op&& op, deadline& d) {
  return detail::timeout_awaiter_for<Op>(std::forward<Op>(op), d);
}

namespace detail {
// now + d, or time_point::min() for d <= 0 (already passed, whichever clock reading it meets).
template <class Rep, class Period>
clock::time_point deadline_after(std::chrono::duration<Rep, Period> d) noexcept {
  const clock::duration ns = saturating_duration(d);
  return ns <= clock::duration::zero() ? clock::time_point::min() : saturating_add(now(), ns);
}
}  // namespace detail

/// with_deadline(op, now() + d). d <= 0 times out at the next loop iteration unless op
/// completes first (a task inside finds its operations refused at once: its scope has run
/// out); a d so large that now + d overflows (hours::max() included: any duration type
/// converts with saturation) never times out.
template <class Op, class Rep, class Period>
[[nodiscard]] auto with_timeout(Op&& op, std::chrono::duration<Rep, Period> d) {
  return with_deadline(std::forward<Op>(op), detail::deadline_after(d));
}

/// Runs op (what with_timeout takes; the result is flattened the same way) outside every scope
/// around the caller and unreached by the caller's stop, bounded by grace from now: cleanup that
/// must happen after the deadline. The caller's deadline passing or its stop still reaches what
/// it does after this.
template <class Op, class Rep, class Period>
[[nodiscard]] auto shielded(Op&& op, std::chrono::duration<Rep, Period> grace) {
  return detail::timeout_awaiter_for<Op>(std::forward<Op>(op), detail::deadline_after(grace), true);
}

}  // namespace cogwheel
