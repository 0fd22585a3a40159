// kernel_operation<Derived, R>: one I/O request in flight on the current core's backend
// (io_uring or epoll, see io_request.hpp), as a cancellable operation (see
// <cogwheel/runtime/operation.hpp>). Derived supplies
//   void prepare(io_request&)          describe the syscall (opcode, descriptor, buffer...);
//                                      defined in a source file (it needs <sys/socket.h>)
//   bool on_result(int res)            optional: false to keep going after re-preparing the
//                                      request with resubmit() (e.g. write_all after a partial
//                                      write)
//   bool on_completion(int res, unsigned flags)
//                                      optional, instead of on_result: also sees the
//                                      completion's flags (a pooled buffer's id)
//   R make_result(int res)             the outcome for the awaiting coroutine
//
// The operation object lives in the awaiting coroutine's frame, and so may the buffer it
// names, and the request. Hence the destructor: while the kernel may still touch any of them,
// it cancels the operation and waits for its completion (cancel_and_wait) before the frame's
// memory goes.
//
// An operation on a descriptor its owner may close (a stream's read, write, write_all,
// shutdown) is constructed with the owner's fd_operations: from start to its final
// completion it is linked there, and closing the owner cancels it and forbids any follow-up
// SQE (see fd_operations.hpp).
#pragma once

#include <cassert>
#include <coroutine>

#include <cogwheel/io/detail/fd_operations.hpp>
#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/operation.hpp>

namespace cogwheel::detail {

// A stream closed on another thread than the one its operation runs on: reported, then abort.
[[noreturn]] void abort_closed_on_other_thread() noexcept;

template <class Derived, class R>
class kernel_operation : public operation<Derived>, private io_completion, private fd_operation_link {
 public:
  explicit kernel_operation(fd_operations* owner = nullptr) noexcept : owner_(owner) {
    on_cqe = &kernel_operation::complete_thunk;
    on_close = &kernel_operation::close_thunk;
  }
  // Moves happen only before start (e.g. into a with_timeout awaiter).
  kernel_operation(kernel_operation&& o) noexcept : operation<Derived>(std::move(o)), owner_(o.owner_) {
    assert(!o.in_flight_);
    on_cqe = &kernel_operation::complete_thunk;
    on_close = &kernel_operation::close_thunk;
  }
  ~kernel_operation() { cancel_and_wait(); }

  std::coroutine_handle<> start(continuation c) {
    loop_ = &current_loop();
    continuation_ = c;
    derived().prepare(request_);
    if (owner_ != nullptr) {
      owner_->add(*this);
      request_.socket = owner_->socket();
      request_.fresh = owner_->arrive(*loop_, request_.fd);
    }
    in_flight_ = true;
    detail::submit(*loop_, *this, request_);
    return std::noop_coroutine();
  }

  void cancel() noexcept {
    if (in_flight_ && !cancel_requested_) {
      cancel_requested_ = true;
      detail::cancel_async(*loop_, *this);
    }
  }

  R result() { return derived().make_result(res_); }

 protected:
  bool cancel_requested() const noexcept { return cancel_requested_; }
  // What the destructor does, for a Derived whose own members take something from the final
  // completion (on_completion keeping a provided buffer): called first in ~Derived, the
  // completion still finds those members alive. Postcondition: nothing in flight, unlinked.
  void cancel_and_wait() noexcept {
    if (in_flight_) {
      continuation_ = {};        // nobody to resume: the frame is going away
      cancel_requested_ = true;  // and no follow-up SQE either
      detail::cancel_and_wait(*loop_, *this, in_flight_);
    }
    fd_operation_link::unlink();
  }
  // For on_result() returning false: start the next request of the same operation.
  void resubmit() { submit(); }
  bool on_result(int) noexcept { return true; }
  bool on_completion(int res, unsigned /*flags*/) noexcept { return derived().on_result(res); }

 private:
  Derived& derived() noexcept { return static_cast<Derived&>(*this); }

  void submit() {
    derived().prepare(request_);
    in_flight_ = true;
    detail::submit(*loop_, *this, request_);
  }

  static void complete_thunk(io_completion& c, int res, unsigned flags) noexcept {
    auto& self = static_cast<kernel_operation&>(c);
    self.in_flight_ = false;
    self.res_ = res;
    if (!self.derived().on_completion(res, flags)) return;  // resubmitted: still in flight
    self.fd_operation_link::unlink();
    if (self.continuation_) self.continuation_.complete().resume();
  }

  // The owner is closing: cancel, and no follow-up SQE may name its descriptor number again.
  static void close_thunk(fd_operation_link& l) noexcept {
    auto& self = static_cast<kernel_operation&>(l);
    if (self.loop_ != current_loop_if_any()) abort_closed_on_other_thread();
    self.cancel();
    self.cancel_requested_ = true;  // also when the completion is reaped but not yet dispatched
  }

  fd_operations* owner_;
  event_loop* loop_ = nullptr;
  io_request request_;  // the backend's until the final completion
  continuation continuation_;
  int res_ = 0;
  bool in_flight_ = false;
  bool cancel_requested_ = false;
};

}  // namespace cogwheel::detail
