/// @file
/// UDP: udp_socket (bind, connect, send_to, receive_from, send, receive, close).
/// Every transfer is one request (IORING_OP_SENDMSG, RECVMSG) and an awaitable that
/// allocates nothing: the msghdr, its iovec and the peer's address live in the operation object,
/// that is in the awaiting coroutine's frame. Each composes with with_timeout / with_deadline
/// exactly like TCP: on a timeout the request is cancelled and its completion awaited before the
/// caller resumes, and a datagram that was received (or sent) anyway is returned rather than
/// reported as timed_out, so no datagram is lost to a timeout.
///
/// Datagram rules:
/// - One receive returns exactly one datagram. 0 bytes is an empty datagram, not an end of
///   stream (UDP has none).
/// - A datagram longer than the buffer is reported as errc::message_size (EMSGSIZE), never
///   silently cut: the buffer holds its first buffer.size() bytes, the rest is gone (the kernel
///   discards it with the datagram) and the sender is not returned. Size buffers for the largest
///   datagram expected (65,507 bytes holds any IPv4 one).
/// - A connected socket receives only from its peer; an ICMP error from the peer (nobody
///   listening: errc::connection_refused) is reported by a later send or receive.
/// - Errors are the errno of the syscall or completion as a std::error_code. A socket belongs to the
///   core it is used on.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <utility>

#include <cogwheel/io/address.hpp>
#include <cogwheel/io/detail/kernel_operation.hpp>
#include <cogwheel/io/detail/socket_handle.hpp>
#include <cogwheel/runtime/result.hpp>

namespace cogwheel {

namespace detail {

// The msghdr of one datagram and what it points to. prepare() (in udp.cpp) points msg_ at
// iov_ and peer_ when the SQE is filled, i.e. after any move of the operation; the kernel
// reads them and writes msg_namelen and msg_flags back until the completion, which the
// operation's destructor awaits. A base listed before kernel_operation, so it is destroyed after
// kernel_operation's destructor has waited for the kernel.
class datagram_header {
 protected:
  datagram_header(int fd, std::span<const std::byte> data) noexcept
      : fd_(fd), data_(const_cast<std::byte*>(data.data())), size_(data.size()) {}
  datagram_header(int fd, std::span<const std::byte> data, const socket_address& to) noexcept;

  void prepare_send(io_request& req) noexcept;
  void prepare_receive(io_request& req) noexcept;
  // The received datagram's size; errc::message_size when it did not fit.
  cogwheel::result<std::size_t> received(int res) const noexcept;
  cogwheel::result<socket_address> sender() const noexcept;

 private:
  int fd_;
  std::byte* data_;  // read only by sends
  std::size_t size_;
  sockaddr_storage peer_{};
  socklen_t peer_size_ = 0;  // a send's destination; 0: the connected peer
  msghdr msg_{};
  iovec iov_{};
};

class udp_send_operation : public datagram_header,
                           public kernel_operation<udp_send_operation, cogwheel::result<std::size_t>> {
 public:
  udp_send_operation(fd_operations& owner, int fd, std::span<const std::byte> data) noexcept
      : datagram_header(fd, data), kernel_operation(&owner) {}
  udp_send_operation(fd_operations& owner, int fd, std::span<const std::byte> data, const socket_address& to) noexcept
      : datagram_header(fd, data, to), kernel_operation(&owner) {}
  void prepare(io_request& req) noexcept;
  cogwheel::result<std::size_t> make_result(int res) noexcept;
};

class udp_receive_operation : public datagram_header,
                              public kernel_operation<udp_receive_operation, cogwheel::result<std::size_t>> {
 public:
  udp_receive_operation(fd_operations& owner, int fd, std::span<std::byte> buf) noexcept
      : datagram_header(fd, buf), kernel_operation(&owner) {}
  void prepare(io_request& req) noexcept;
  cogwheel::result<std::size_t> make_result(int res) noexcept;
};

class udp_receive_from_operation
    : public datagram_header,
      public kernel_operation<udp_receive_from_operation, cogwheel::result<std::pair<std::size_t, socket_address>>> {
 public:
  udp_receive_from_operation(fd_operations& owner, int fd, std::span<std::byte> buf) noexcept
      : datagram_header(fd, buf), kernel_operation(&owner) {}
  void prepare(io_request& req) noexcept;
  cogwheel::result<std::pair<std::size_t, socket_address>> make_result(int res) noexcept;
};

// connect(2) on a UDP socket never blocks (it picks a route and records the peer), so, like
// shutdown, it is a plain syscall made when the operation starts, not a request. It also learns
// the local address the route gave (the bound port, now with a specific IP; an unbound socket
// gets a port) and stores it at *local, which must stay put from construction to start (the
// socket is not moved in between, as for every operation on it).
class udp_connect_operation : public operation<udp_connect_operation> {
 public:
  udp_connect_operation(int fd, const socket_address& to, socket_address* local) noexcept
      : fd_(fd), to_(to), local_(local) {}
  std::coroutine_handle<> start(continuation c) noexcept;
  void cancel() noexcept {}
  cogwheel::result<void> result() const noexcept { return outcome_; }

 private:
  int fd_;
  socket_address to_;
  socket_address* local_;
  cogwheel::result<void> outcome_;
};

}  // namespace detail

/// How udp_socket::bind() sets up the socket.
struct udp_options {
  bool reuse_address = false;  ///< SO_REUSEADDR
  bool reuse_port = false;     ///< SO_REUSEPORT: one socket per core on the same port
  bool ipv6_only = false;      ///< IPV6_V6ONLY for IPv6 sockets ([::] then takes no IPv4)
};

/// A UDP socket (see the file comment for the datagram rules). Move-only; destroying it closes
/// it. Its awaitables must be awaited on the core the socket is used on, and the socket must not
/// move between creating an awaitable and awaiting it.
class udp_socket {
 public:
  /// No socket: is_open() is false and every operation fails with errc::bad_file_descriptor.
  udp_socket() noexcept = default;
  /// Takes ownership of a bound UDP socket and learns its local address (getsockname); if that
  /// fails (fd is not an IPv4/IPv6 socket), local_address() is 0.0.0.0:0 until connect().
  explicit udp_socket(int fd) noexcept;
  /// As for tcp_stream: operations in flight move with the socket (on their thread); the
  /// moved-from socket is closed.
  udp_socket(udp_socket&&) noexcept = default;
  /// Closes this socket first, as close() does, then takes `o`'s.
  udp_socket& operator=(udp_socket&&) noexcept = default;

  /// A socket bound to `at` (port 0: any free port; see local_address()). A client binds to
  /// its family's loopback or any address with port 0. Errors: the errno of socket(),
  /// setsockopt(), bind() (EADDRINUSE...) or getsockname.
  static cogwheel::result<udp_socket> bind(const socket_address& at, udp_options options = {});

  /// awaitable<result<void>>: sets the default peer for send()/receive() and accepts datagrams
  /// from it only; local_address() becomes the one the route gave (a socket bound to 0.0.0.0
  /// now has the interface's IP). Completes at once: connect(2) never blocks on UDP. Errors:
  /// connect's errno (ENETUNREACH, EAFNOSUPPORT for the other family).
  detail::udp_connect_operation connect(const socket_address& to) noexcept { return {sock_.fd(), to, &local_}; }
  /// awaitable<result<size_t>>: one datagram to `to`, the bytes sent (all of `data`). `to` is
  /// copied: it need not outlive the operation; `data` must. EMSGSIZE for a datagram too large.
  detail::udp_send_operation send_to(std::span<const std::byte> data, const socket_address& to) noexcept {
    return {sock_.operations(), sock_.fd(), data, to};
  }
  /// awaitable<result<std::pair<size_t, socket_address>>>: one datagram (its size) and its
  /// sender. errc::message_size when it did not fit `buf`. `buf` must outlive the co_await.
  detail::udp_receive_from_operation receive_from(std::span<std::byte> buf) noexcept { return {sock_.operations(), sock_.fd(), buf}; }
  /// awaitable<result<size_t>>: one datagram to the connected peer (EDESTADDRREQ when not
  /// connected; errc::connection_refused after the peer's ICMP error).
  detail::udp_send_operation send(std::span<const std::byte> data) noexcept { return {sock_.operations(), sock_.fd(), data}; }
  /// awaitable<result<size_t>>: one datagram's size (from the connected peer, when connected).
  /// errc::message_size when it did not fit `buf`.
  detail::udp_receive_operation receive(std::span<std::byte> buf) noexcept { return {sock_.operations(), sock_.fd(), buf}; }

  /// Closes the socket (idempotent; also done by the destructor and by assigning onto it). As
  /// for tcp_stream::close(): operations in flight are cancelled first (errc::operation_canceled,
  /// or the datagram that raced ahead) and no request acts on whatever socket takes the number.
  /// Precondition: on the thread the in-flight operations run on.
  void close() noexcept { sock_.close(); }
  /// Whether the socket holds a descriptor (false after close(), release() or a move from it).
  bool is_open() const noexcept { return sock_.is_open(); }
  /// The descriptor, for options cogwheel does not wrap (-1 when closed); still owned here.
  int native_handle() const noexcept { return sock_.fd(); }
  /// Gives up the descriptor without closing it (-1 if none); operations in flight are
  /// cancelled, and the number may be closed or reused as soon as this returns.
  int release() noexcept { return sock_.release(); }
  /// The address the socket is bound to, learnt by bind() and again by connect() (no syscall
  /// here). 0.0.0.0:0 when !is_open().
  socket_address local_address() const noexcept { return is_open() ? local_ : socket_address{}; }

 private:
  detail::socket_handle sock_;
  socket_address local_;  // kept here, not in sock_, which every socket shares
};

}  // namespace cogwheel
