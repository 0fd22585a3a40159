// socket_handle: what every cogwheel socket (tcp_stream, udp_socket) owns: a descriptor and
// the operations in flight on it, with the one close path they all share.
//
// The rule it keeps: no request the backend will still act on ever names a descriptor number
// that another socket may have taken. A request is named by number when it is queued and the
// kernel looks the number up when it runs it, so there are three moments to cover:
//   - in the kernel: the request holds its own reference to the file; cancelled by close();
//   - completed, not yet dispatched: close() marks it so that it submits nothing more;
//   - queued, not yet handed to the kernel (io_uring: an SQE started in this iteration): the
//     number must not be free before the kernel has looked it up. So when requests are in
//     flight, close() does not release the number itself: it queues the close behind them on
//     the loop's backend (io_uring: a close request after them in the same submission queue,
//     which the kernel runs in order; epoll: the syscalls ran already, so at once). release()
//     hands the queued requests to the kernel before it gives the number away.
// A socket with nothing in flight closes at once, on any thread.
//
// Threading: a socket with operations in flight is closed or released on the thread they run
// on (checked: misuse aborts with a message); one with none may be used, moved and closed
// anywhere.
#pragma once

#include <utility>

#include <cogwheel/io/detail/fd_operations.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>

namespace cogwheel::detail {

class socket_handle {
 public:
  socket_handle() noexcept = default;
  // Takes ownership of fd (-1: none), a socket new to cogwheel.
  explicit socket_handle(int fd) noexcept : fd_(fd) {
    if (fd_ < 0) return;
    ops_.set_socket(new_socket_identity());
    ops_.open_on(current_loop_if_any());
  }
  // Takes ownership of fd, which a connect operation already used as socket `identity` on the
  // calling thread's loop (which may watch it already: it goes on doing so).
  socket_handle(int fd, std::uint64_t identity) noexcept : fd_(fd) {
    ops_.set_socket(identity);
    ops_.open_on(&current_loop());
  }
  // Operations in flight move with the handle (they stay linked, now here), on their thread.
  socket_handle(socket_handle&& o) noexcept : fd_(std::exchange(o.fd_, -1)), ops_(std::move(o.ops_)) {}
  // Closes this handle's socket first (see close()).
  socket_handle& operator=(socket_handle&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = std::exchange(o.fd_, -1);
      ops_ = std::move(o.ops_);
    }
    return *this;
  }
  socket_handle(const socket_handle&) = delete;
  socket_handle& operator=(const socket_handle&) = delete;
  ~socket_handle() { close(); }

  int fd() const noexcept { return fd_; }
  bool is_open() const noexcept { return fd_ >= 0; }
  // Where an operation on this socket links itself while it is in flight.
  fd_operations& operations() noexcept { return ops_; }

  // Idempotent. Cancels every operation in flight (each completes with operation_canceled or
  // with what it transferred; none submits again), then closes the descriptor: at once when
  // nothing was in flight, else ordered after every request already queued.
  // Postcondition: !is_open().
  void close() noexcept {
    if (fd_ < 0) return;
    const bool in_flight = !ops_.empty();
    ops_.close_all();
    const int fd = std::exchange(fd_, -1);
    ops_.depart(fd, false);
    if (in_flight)
      close_descriptor_after_queued(current_loop(), fd);
    else
      close_descriptor(fd);
  }

  // Gives the descriptor up without closing it (-1 when there is none). Operations in flight
  // are cancelled as by close(), and their queued requests handed to the kernel first, so the
  // caller may close or reuse the number at once.
  int release() noexcept {
    if (fd_ < 0) return -1;
    const bool in_flight = !ops_.empty();
    ops_.close_all();
    if (in_flight) flush_submissions(current_loop());
    ops_.depart(fd_, true);
    return std::exchange(fd_, -1);
  }

 private:
  int fd_ = -1;
  fd_operations ops_;  // in flight on fd_
};

}  // namespace cogwheel::detail
