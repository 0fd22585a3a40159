// io_request: one I/O operation, described independently of the backend that carries it out
// (io_uring: one SQE prepared from it; epoll: the non-blocking syscall, tried at once and again
// whenever the descriptor becomes ready). Whoever starts an operation owns its request, and
// keeps it alive and unchanged until the operation's final completion: the epoll backend
// links it into the descriptor's waiters meanwhile.
//
// Outcomes are the same on every backend: `res` is what the syscall returned, or -errno;
// -ECANCELED when a cancellation won. Completion flags use the values below.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cogwheel/runtime/detail/intrusive_list.hpp>

namespace cogwheel::detail {

struct io_completion;

enum class io_opcode : std::uint8_t {
  nop,          // completes with 0 (tests)
  read,         // read(2) into addr/len; the descriptor must be non-blocking (an eventfd)
  recv,         // recv(2) into addr/len with `flags`
  recv_pooled,  // recv(2) into a buffer of group `buffer_group`, picked when data is there
  send,         // send(2) of addr/len with `flags`
  recvmsg,      // recvmsg(2) with the msghdr at addr
  sendmsg,      // sendmsg(2) with the msghdr at addr
  connect,      // connect(2) to the sockaddr at addr, `len` bytes long
  accept,       // accept4(2) with `flags` (SOCK_*); res is the new descriptor
  poll,         // waits until the descriptor is ready: `flags` is POLLIN or POLLOUT, res the
                // poll(2) revents (a descriptor some library reads and writes itself: c-ares)
};

// Set in a recv_pooled completion that holds a buffer; the buffer's id is flags >> 16.
inline constexpr unsigned io_flag_buffer = 1u;
inline constexpr unsigned io_buffer_id_shift = 16;

// The most one read/write syscall transfers on Linux (MAX_RW_COUNT: INT_MAX rounded down to a
// page). A longer buffer is submitted as this many bytes: the syscall would stop there anyway,
// and the length fits io_request::len (and an SQE's 32-bit length) exactly. Operations that
// promise "all" (write_all) resubmit the rest; a read returns what one syscall gave.
inline constexpr std::size_t max_io_length = 0x7ffff000;

// The epoll backend links a waiting request into its descriptor's list (the list_link), so a
// request is neither copied nor moved while the backend has it.
struct io_request : list_link {
  io_opcode opcode = io_opcode::nop;
  bool poll_first = false;          // recv_pooled: the pool looked empty, wait for data first
  std::uint16_t buffer_group = 0;   // recv_pooled
  int fd = -1;
  int flags = 0;
  // Which socket `fd` is (0: not a socket's, e.g. the loop's own eventfd). What a backend
  // remembers of a descriptor (epoll: registered, made non-blocking) belongs to one socket, so
  // a socket that takes a closed one's number starts clean, whatever the number's history.
  std::uint64_t socket = 0;
  // The socket's first request on this loop since it was used on another: start clean too.
  bool fresh = false;
  std::uint32_t len = 0;
  void* addr = nullptr;

  // Describes the next syscall (the backend fields are left alone). `length` is clamped to
  // max_io_length: stored unchecked in 32 bits, 4 GiB would become 0 (a read reported as the
  // peer's end) and 5 GiB 1 GiB.
  void set(io_opcode op, int descriptor, const void* address = nullptr, std::size_t length = 0,
           int op_flags = 0) noexcept {
    opcode = op;
    fd = descriptor;
    addr = const_cast<void*>(address);
    len = static_cast<std::uint32_t>(length < max_io_length ? length : max_io_length);
    flags = op_flags;
  }

  // The backend's, between submission and final completion.
  io_completion* owner = nullptr;
  unsigned submissions = 0;  // started and not yet completed (an accept batch shares a request)
  std::uint32_t wanted = 0;  // epoll: the readiness (EPOLLIN/EPOLLOUT) it waits for, 0 if none
};

}  // namespace cogwheel::detail
