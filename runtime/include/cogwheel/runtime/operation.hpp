/// @file
/// Writing your own awaitable: the protocol every cancellable operation of cogwheel follows
/// (sleeps, socket operations, a task under a timeout), so that with_timeout, with_deadline and
/// stop requests compose with any of them, yours included. An operation `op` of type Op provides:
///
///   std::coroutine_handle<> op.start(continuation c)
///       Begins the operation and returns the coroutine to run next: std::noop_coroutine() when
///       it is in flight (c is completed later, exactly once, on this core's thread: e.g.
///       `c.complete().resume()` from whatever finishes it), or c.complete() when it finished
///       at once. Called at most once.
///   void op.cancel() noexcept
///       Asks an in-flight operation to finish early (a timeout fired, the caller is stopped).
///       Never completes c from inside cancel(): use a resume_later to complete it at the next
///       iteration. A no-op once it finished. The operation still completes through c: with
///       errc::operation_canceled, or with its real outcome if that raced ahead (data is never
///       lost).
///   op.result()
///       The outcome, once completed (a result<T> carries errors as std::error_code).
///   ~Op()
///       If still in flight: cancels, and waits for whatever may still touch the frame's memory,
///       before returning. A destroyed coroutine frame leaves nothing behind.
///
/// Deriving from operation<Op> gives such a type its co_await: awaiting registers with the
/// awaiting task's stop source, so a stop request (a timeout above it) reaches op.cancel().
/// And past the deadline, nothing waits: when the awaiting task is already asked to stop, or its
/// effective deadline (the earliest of the scopes around it, see docs/deadlines.md) has passed
/// by the loop's time, start() is not called at all; the awaiter resumes at once with
/// errc::operation_canceled (a result<T> outcome) or nothing (a void one). Nothing reaches the
/// kernel or the timer queue. (An op whose result() is neither void nor a result<T> cannot say
/// "cancelled": it is started and cancelled at once instead.)
///   void op.bind_scope(const detail::deadline_scope*)
///       Optional: called before start() with the awaiting task's innermost scope (or null), for
///       an operation that carries the remaining budget somewhere (submit_to does).
/// Example: bench/idle_bench.cpp's mailbox, a receive that with_deadline can cut short.
#pragma once

#include <concepts>
#include <coroutine>
#include <type_traits>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/deadline_scope.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/detail/ready_queue.hpp>
#include <cogwheel/runtime/result.hpp>

namespace cogwheel {

template <class Op>
concept cancellable_operation = requires(Op& op, continuation c) {
  { op.start(c) } -> std::convertible_to<std::coroutine_handle<>>;
  { op.cancel() } noexcept;
  op.result();
};

/// A continuation completed at a coming iteration of this core's loop instead of now: how
/// cancel() completes an operation (it must not resume anything itself). Nothing is allocated:
/// the queue node lives here, and destroying a resume_later that is still queued unqueues it.
/// Not copyable, not movable: the loop links the node in place.
class resume_later {
 public:
  /// Not queued.
  resume_later() noexcept = default;
  resume_later(const resume_later&) = delete;
  resume_later& operator=(const resume_later&) = delete;

  /// Queues `c` to be completed (its coroutine resumed) at the loop's next iteration, in FIFO
  /// order with other ready work. O(1), allocates nothing.
  /// Precondition: on a cogwheel loop thread; !queued().
  void post(continuation c) noexcept { detail::post(detail::current_loop(), node_, c); }
  /// Whether a post() is still waiting for its iteration.
  bool queued() const noexcept { return node_.queued(); }

 private:
  detail::ready_node node_;
};

/// The base of a cancellable operation (CRTP): gives Op, which provides start(), cancel() and
/// result() as the file comment describes, its co_await. Awaiting registers with the awaiting
/// task's stop source, so with_timeout, with_deadline and stop requests reach Op::cancel();
/// an operation whose task is already stopped or past its deadline is not started at all.
template <class Op>
class operation : private detail::cancel_hook {
 public:
  /// Never ready at once: `co_await op` always goes through await_suspend().
  bool await_ready() const noexcept { return false; }

  /// Registers with the awaiting task's stop source and starts the operation (Op::start), or,
  /// when that task is already stopped or past its deadline, resumes it at once without
  /// starting anything. Returns the coroutine to run next.
  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> h) {
    detail::stop_source* const stop = detail::stop_source_of(h);
    if constexpr (can_say_cancelled()) {
      // Not started: awaiting_ stays null, which is how await_resume tells (a flag of its own
      // would pad this base from 24 to 32 bytes, in every awaiter of every frame).
      if (stop != nullptr && detail::must_not_start(*stop)) return h;  // resumes at once
    }
    awaiting_ = h;
    stop_ = stop;
    if constexpr (requires(Op& op, const detail::deadline_scope* s) { op.bind_scope(s); })
      self().bind_scope(stop_ != nullptr ? stop_->scope() : nullptr);
    if (stop_ != nullptr) stop_->attach(*this, &operation::cancel_thunk);
    // Without a stop source there is nothing to detach when it completes: the awaiting
    // coroutine itself is the continuation (no call through on_done when it resumes).
    std::coroutine_handle<> next = self().start(stop_ != nullptr ? continuation(&operation::on_done, this)
                                                                 : continuation(std::coroutine_handle<>(h)));
    if (stop_ != nullptr && stop_->stop_requested()) self().cancel();  // asked before it began
    return next;
  }

  /// Op::result(), or errc::operation_canceled (nothing for a void outcome) when it was never
  /// started.
  decltype(auto) await_resume() {
    if constexpr (can_say_cancelled()) {
      using outcome = decltype(self().result());
      if (!awaiting_) {  // not started (await_suspend)
        if constexpr (std::is_void_v<outcome>)
          return;
        else
          return outcome(errc::operation_canceled);
      }
    }
    return self().result();
  }

 protected:
  /// The frame of the coroutine awaiting this operation (null before it is awaited, when it was
  /// not started at all, or when it was started by other means): for prefetching it before
  /// that coroutine resumes.
  void* awaiting_frame() const noexcept { return awaiting_.address(); }
  /// Not awaiting anything yet.
  operation() noexcept = default;
  /// A copy (before the operation is awaited) carries no registration: only the object being
  /// awaited is attached to a stop source.
  operation(const operation&) noexcept : cancel_hook() {}
  /// A move (before the operation is awaited, e.g. into a with_timeout awaiter) carries no
  /// registration either.
  operation(operation&&) noexcept : cancel_hook() {}
  ~operation() {
    if (stop_ != nullptr) stop_->detach(*this);
  }

 private:
  Op& self() noexcept { return static_cast<Op&>(*this); }
  // Whether Op's outcome can be made up without starting it: void, or a result<T> by value.
  static constexpr bool can_say_cancelled() noexcept {
    using outcome = decltype(std::declval<Op&>().result());
    return std::is_void_v<outcome> || is_result_v<outcome>;
  }
  static void cancel_thunk(cancel_hook& h) noexcept {
    static_cast<operation&>(h).self().cancel();
  }
  static std::coroutine_handle<> on_done(void* p) noexcept {
    auto& self = *static_cast<operation*>(p);
    if (self.stop_ != nullptr) {
      self.stop_->detach(self);
      self.stop_ = nullptr;
    }
    return self.awaiting_;
  }

  std::coroutine_handle<> awaiting_;
  detail::stop_source* stop_ = nullptr;
};


}  // namespace cogwheel
