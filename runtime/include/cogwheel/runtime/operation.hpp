// The protocol every cancellable operation of cogwheel follows (sleeps, socket operations, a
// task under a timeout), so that with_timeout, with_deadline and stop requests compose with any
// of them. An operation `op` of type Op provides:
//
//   std::coroutine_handle<> op.start(detail::continuation c)
//       Begins the operation and returns the coroutine to run next: std::noop_coroutine() when
//       it is in flight (c is completed later, exactly once), or c.complete() when it finished
//       at once. Called at most once.
//   void op.cancel() noexcept
//       Asks an in-flight operation to finish early. Never completes c from inside cancel(); a
//       no-op once it finished. The operation still completes through c: with
//       errc::operation_canceled, or with its real outcome if that raced ahead (data read or
//       written is never lost).
//   op.result()
//       The outcome, once completed.
//   ~Op()
//       If still in flight: cancels, and for kernel operations waits for the kernel to be done
//       with the buffers before returning. A destroyed coroutine frame leaves nothing behind.
//
// operation_base<Op> gives such a type its co_await: awaiting registers with the awaiting
// task's stop source, so a stop request (a timeout above it) cancels the operation.
#pragma once

#include <concepts>
#include <coroutine>

#include <cogwheel/runtime/continuation.hpp>

namespace cogwheel {

template <class Op>
concept cancellable_operation = requires(Op& op, detail::continuation c) {
  { op.start(c) } -> std::convertible_to<std::coroutine_handle<>>;
  { op.cancel() } noexcept;
  op.result();
};

namespace detail {

template <class Op>
class operation_base : private cancel_hook {
 public:
  bool await_ready() const noexcept { return false; }

  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> h) {
    awaiting_ = h;
    stop_ = stop_source_of(h);
    if (stop_ != nullptr) {
      on_cancel = &operation_base::cancel_thunk;
      stop_->attach(*this);
    }
    std::coroutine_handle<> next = self().start(continuation(&operation_base::on_done, this));
    if (stop_ != nullptr && stop_->stop_requested()) self().cancel();  // asked before it began
    return next;
  }

  decltype(auto) await_resume() { return self().result(); }

 protected:
  operation_base() noexcept = default;
  operation_base(const operation_base&) noexcept : cancel_hook() {}  // copies are not awaiting
  operation_base(operation_base&&) noexcept : cancel_hook() {}
  ~operation_base() {
    if (stop_ != nullptr) stop_->detach(*this);
  }

 private:
  Op& self() noexcept { return static_cast<Op&>(*this); }
  static void cancel_thunk(cancel_hook& h) noexcept {
    static_cast<operation_base&>(h).self().cancel();
  }
  static std::coroutine_handle<> on_done(void* p) noexcept {
    auto& self = *static_cast<operation_base*>(p);
    if (self.stop_ != nullptr) {
      self.stop_->detach(self);
      self.stop_ = nullptr;
    }
    return self.awaiting_;
  }

  std::coroutine_handle<> awaiting_;
  stop_source* stop_ = nullptr;
};

}  // namespace detail
}  // namespace cogwheel
