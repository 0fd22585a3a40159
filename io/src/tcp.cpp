#include <cogwheel/io/tcp.hpp>

#include <sys/socket.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "acceptor.hpp"

namespace cogwheel {

namespace {

result<void> set_option(int fd, int level, int name, int value) noexcept {
  if (::setsockopt(fd, level, name, &value, sizeof value) != 0) return errno_code(errno);
  return {};
}

}  // namespace

namespace detail {

void abort_copied_bytewise() noexcept {
  std::fputs("cogwheel: a socket was copied byte for byte instead of moved, so two objects own its "
             "descriptor (g++ 12 does this to a temporary that owns a socket inside a co_await "
             "expression, e.g. a lambda capturing a stream passed to submit_to: name it in a "
             "variable first)\n",
             stderr);
  std::abort();
}

void abort_closed_on_other_thread() noexcept {
  std::fputs("cogwheel: a socket (tcp_stream, udp_socket) was closed on a thread other than the "
             "one its in-flight operation runs on. Close (or destroy) a socket on the core that "
             "uses it; a socket may move to another core only while no operation is in flight "
             "on it.\n",
             stderr);
  std::abort();
}

void connect_operation::prepare(io_request& req) noexcept {
  req.set(io_opcode::connect, fd_, to_.data(), to_.size());
  req.socket = socket_;
}
void recv_operation::prepare(io_request& req) noexcept { req.set(io_opcode::recv, fd_, buf_.data(), buf_.size(), flags_); }
void send_operation::prepare(io_request& req) noexcept {
  req.set(io_opcode::send, fd_, buf_.data(), buf_.size(), MSG_NOSIGNAL);
}
void send_all_operation::prepare(io_request& req) noexcept {
  req.set(io_opcode::send, fd_, buf_.data() + written_, buf_.size() - written_, MSG_NOSIGNAL);
}
std::coroutine_handle<> shutdown_operation::start(continuation c) noexcept {
  if (::shutdown(fd_, how_) != 0) error_ = errno;
  return c.complete();
}

connect_operation::connect_operation(connect_operation&& o) noexcept
    : kernel_operation(std::move(o)),
      to_(o.to_),
      fd_(std::exchange(o.fd_, -1)),
      socket_error_(o.socket_error_),
      socket_(o.socket_) {}

connect_operation::~connect_operation() {
  // The connect first (its SQE may still be queued, naming fd_ by number), then the number.
  cancel_and_wait();
  if (fd_ >= 0) close_descriptor(fd_);
}

std::coroutine_handle<> connect_operation::start(continuation c) {
  fd_ = ::socket(to_.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  socket_ = new_socket_identity();
  if (fd_ < 0) {
    socket_error_ = errno;  // EMFILE and friends: completes at once with that error
    return c.complete();
  }
  return kernel_operation::start(c);
}

cogwheel::result<tcp_stream> connect_operation::make_result(int res) {
  if (socket_error_ != 0) return errno_code(socket_error_);
  if (res < 0) {
    close_descriptor(std::exchange(fd_, -1));
    return errno_code(res);
  }
  return connected_stream(std::exchange(fd_, -1), socket_);
}

cogwheel::result<tcp_stream> connected_stream(int fd, std::uint64_t identity) noexcept {
  auto local = socket_address::local_of(fd);
  if (!local) {
    close_descriptor(fd);
    return local.error();
  }
  return tcp_stream(identity != 0 ? socket_handle(fd, identity) : socket_handle(fd), *local);
}

}  // namespace detail

tcp_stream::tcp_stream(int fd) noexcept : sock_(fd) {
  if (fd < 0) return;
  if (auto local = socket_address::local_of(fd)) local_ = *local;
}

result<void> tcp_stream::set_nodelay(bool on) noexcept { return set_option(sock_.fd(), IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0); }
result<void> tcp_stream::set_keepalive(bool on) noexcept { return set_option(sock_.fd(), SOL_SOCKET, SO_KEEPALIVE, on ? 1 : 0); }
result<void> tcp_stream::set_receive_buffer_size(int bytes) noexcept { return set_option(sock_.fd(), SOL_SOCKET, SO_RCVBUF, bytes); }
result<void> tcp_stream::set_send_buffer_size(int bytes) noexcept { return set_option(sock_.fd(), SOL_SOCKET, SO_SNDBUF, bytes); }

result<void> tcp_stream::set_linger(bool on, int seconds) noexcept {
  const linger l{on ? 1 : 0, seconds};
  if (::setsockopt(sock_.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l) != 0) return errno_code(errno);
  return {};
}

result<socket_address> tcp_stream::peer_address() const noexcept { return socket_address::peer_of(sock_.fd()); }

tcp_listener::tcp_listener() noexcept = default;
tcp_listener::tcp_listener(tcp_listener&& o) noexcept
    : acceptor_(std::exchange(o.acceptor_, nullptr)), local_(o.local_) {}
tcp_listener& tcp_listener::operator=(tcp_listener&& o) noexcept {
  if (this != &o) {
    close();
    acceptor_ = std::exchange(o.acceptor_, nullptr);
    local_ = o.local_;
  }
  return *this;
}
tcp_listener::~tcp_listener() { close(); }

void tcp_listener::close() noexcept { delete std::exchange(acceptor_, nullptr); }

int tcp_listener::native_handle() const noexcept { return acceptor_ ? acceptor_->fd() : -1; }

result<tcp_listener> tcp_listener::bind(const socket_address& at, listen_options options) {
  const int fd = ::socket(at.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_code(errno);
  auto fail = [fd](int err) {
    detail::close_descriptor(fd);
    return errno_code(err);
  };
  if (options.reuse_address && !set_option(fd, SOL_SOCKET, SO_REUSEADDR, 1)) return fail(errno);
  if (options.reuse_port && !set_option(fd, SOL_SOCKET, SO_REUSEPORT, 1)) return fail(errno);
  if (at.is_ipv6() && !set_option(fd, IPPROTO_IPV6, IPV6_V6ONLY, options.ipv6_only ? 1 : 0)) return fail(errno);
  if (::bind(fd, at.data(), at.size()) != 0) return fail(errno);
  if (::listen(fd, options.backlog) != 0) return fail(errno);
  auto local = socket_address::local_of(fd);  // the port a port 0 bind chose
  if (!local) {
    detail::close_descriptor(fd);
    return local.error();
  }
  tcp_listener l;
  l.acceptor_ = new detail::acceptor(fd, options.max_unclaimed);
  l.local_ = *local;
  return l;
}

}  // namespace cogwheel
