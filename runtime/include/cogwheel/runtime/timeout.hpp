// with_timeout(op, d), with_deadline(op, t), with_deadline(op, deadline&): race an operation
// against a timer of the core's wheel (or heap).
//
//   op completes first: the timer is cancelled (O(1)) and op's outcome returned.
//   the timer fires first: op is cancelled (ASYNC_CANCEL for a kernel operation, a stop request
//   for a task) and awaited until it has really completed, so the kernel is done with the
//   caller's buffer and the task has finished, before the caller resumes.
//
// The one rule for what the caller gets once the timer has fired, for every kind of op: an
// outcome that can say whether it was cut short is returned as it is when it says "not by
// you", i.e. a result<U> holding a value (bytes read or written are never lost) or an error
// other than errc::operation_canceled (a real failure that raced the timer); everything else
// (operation_canceled, a void operation, a task<T> with a plain T, which cannot tell) becomes
// errc::timed_out. A task that must keep a value it finished despite the timeout returns
// result<U>. Timers due in the same tick fire in the order they were filed.
//
// `op` is a cancellable_operation (sleeps, socket operations, interval ticks) or a task<T>. The
// result is result<U> when op yields result<U>, result<void> when op yields void, else
// result<T>. An exception thrown by a task propagates. The awaiter (timer node included) lives
// in the awaiting coroutine's frame: nothing is allocated.
#pragma once

#include <chrono>
#include <coroutine>
#include <type_traits>
#include <utility>

#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/time.hpp>
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

// Races Op against either its own timer (a time point) or a borrowed deadline.
template <class Op>
class timeout_awaiter : private cancel_hook, private timer::timer_node, private deadline_waiter {
  using op_result = decltype(std::declval<Op&>().result());

 public:
  using result_type = typename timeout_result<op_result>::type;

  timeout_awaiter(Op op, clock::time_point at) noexcept
      : timer_node(&timeout_awaiter::on_expire), op_(std::move(op)), at_(at) {}
  timeout_awaiter(Op op, deadline& d) noexcept
      : timer_node(&timeout_awaiter::on_expire), op_(std::move(op)), deadline_(&d) {}
  timeout_awaiter(timeout_awaiter&& o) noexcept
      : timer_node(&timeout_awaiter::on_expire), op_(std::move(o.op_)), at_(o.at_), deadline_(o.deadline_) {}
  ~timeout_awaiter() {
    if (loop_ != nullptr) detail::cancel_timer(*loop_, *this);
    deadline_waiter::unlink();  // not via deadline_: the deadline may be gone already
    if (parent_stop_ != nullptr) parent_stop_->detach(*this);
    // op_'s own destructor cancels and waits for it if it is still in flight.
  }

  bool await_ready() const noexcept { return false; }

  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> h) {
    awaiting_ = h;
    loop_ = &current_loop();
    parent_stop_ = stop_source_of(h);
    if (parent_stop_ != nullptr) {
      on_cancel = &timeout_awaiter::on_parent_stop;
      parent_stop_->attach(*this);
    }
    if (deadline_ != nullptr) {
      if (deadline_->expired()) {
        fired_ = true;  // already past: do not start the operation at all
        return h;
      }
      on_deadline = &timeout_awaiter::on_deadline_thunk;
      deadline_->attach(*this);
    } else {
      detail::schedule_timer(*loop_, *this, at_);
    }
    started_ = true;
    std::coroutine_handle<> next = op_.start(continuation(&timeout_awaiter::on_done, this));
    if (parent_stop_ != nullptr && parent_stop_->stop_requested()) {
      stopped_ = true;
      op_.cancel();
    }
    return next;
  }

  result_type await_resume() {
    if (!started_) return result_type(errc::timed_out);
    if constexpr (std::is_void_v<op_result>) {
      op_.result();
      if (fired_) return result_type(errc::timed_out);
      // A void operation (a sleep) cannot say that it was cut short: say it for it, or the
      // stopped caller would take a cancelled sleep for a completed one.
      if (stopped_) return result_type(errc::operation_canceled);
      return result_type();
    } else if constexpr (is_result_v<op_result>) {
      op_result r = op_.result();
      if (fired_ && !r.has_value() && r.error() == errc::operation_canceled) return result_type(errc::timed_out);
      return r;
    } else {
      op_result v = op_.result();
      if (fired_) return result_type(errc::timed_out);
      return result_type(std::move(v));
    }
  }

  // Whether the timer fired (valid after resumption).
  bool timer_fired() const noexcept { return fired_; }

 private:
  void fire() noexcept {
    if (done_ || fired_) return;
    fired_ = true;
    op_.cancel();
  }
  // Deferred like every expiry: the timer callback only queues the awaiter into the loop's
  // expired batch; the operation is cancelled when that batch runs, right after advance().
  static void on_expire(timer::timer_node& n) noexcept {
    auto& self = static_cast<timeout_awaiter&>(n);
    post_expired(*self.loop_, self.expired_, continuation(&timeout_awaiter::fire_thunk, &self));
  }
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
  event_loop* loop_ = nullptr;
  stop_source* parent_stop_ = nullptr;
  std::coroutine_handle<> awaiting_;
  ready_node expired_;  // queued in the expired batch between the timer firing and fire()
  bool started_ = false;
  bool fired_ = false;
  bool stopped_ = false;
  bool done_ = false;
};

template <class Op>
using timeout_awaiter_for = timeout_awaiter<decltype(as_operation(std::declval<Op>()))>;

}  // namespace detail

template <class Op>
[[nodiscard]] auto with_deadline(Op&& op, clock::time_point t) {
  return detail::timeout_awaiter_for<Op>(detail::as_operation(std::forward<Op>(op)), t);
}

template <class Op>
[[nodiscard]] auto with_deadline(Op&& op, deadline& d) {
  return detail::timeout_awaiter_for<Op>(detail::as_operation(std::forward<Op>(op)), d);
}

// d <= 0 times out at the next loop iteration unless op completes at once; a d so large that
// now + d overflows (hours::max() included: any duration type converts with saturation) never
// times out.
template <class Op, class Rep, class Period>
[[nodiscard]] auto with_timeout(Op&& op, std::chrono::duration<Rep, Period> d) {
  return with_deadline(std::forward<Op>(op),
                       detail::saturating_add(now(), detail::saturating_duration(d)));
}

}  // namespace cogwheel
