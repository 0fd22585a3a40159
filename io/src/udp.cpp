#include <cogwheel/io/udp.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cogwheel {

namespace detail {

datagram_header::datagram_header(int fd, std::span<const std::byte> data, const socket_address& to) noexcept
    : datagram_header(fd, data) {
  peer_size_ = to.size();
  std::memcpy(&peer_, to.data(), peer_size_);
}

void datagram_header::prepare_send(io_request& req) noexcept {
  iov_ = {data_, size_};
  msg_ = {};
  msg_.msg_name = peer_size_ != 0 ? &peer_ : nullptr;
  msg_.msg_namelen = peer_size_;
  msg_.msg_iov = &iov_;
  msg_.msg_iovlen = 1;
  req.set(io_opcode::sendmsg, fd_, &msg_, 0, MSG_NOSIGNAL);
}

void datagram_header::prepare_receive(io_request& req) noexcept {
  iov_ = {data_, size_};
  msg_ = {};
  msg_.msg_name = &peer_;
  msg_.msg_namelen = sizeof peer_;
  msg_.msg_iov = &iov_;
  msg_.msg_iovlen = 1;
  req.set(io_opcode::recvmsg, fd_, &msg_);
}

result<std::size_t> datagram_header::received(int res) const noexcept {
  if (res < 0) return errno_code(res);
  if ((msg_.msg_flags & MSG_TRUNC) != 0) return errc::message_size;
  return static_cast<std::size_t>(res);
}

result<socket_address> datagram_header::sender() const noexcept {
  return socket_address::from_sockaddr(reinterpret_cast<const sockaddr*>(&peer_), msg_.msg_namelen);
}

void udp_send_operation::prepare(io_request& req) noexcept { prepare_send(req); }

result<std::size_t> udp_send_operation::make_result(int res) noexcept {
  if (res < 0) return errno_code(res);
  return static_cast<std::size_t>(res);
}

void udp_receive_operation::prepare(io_request& req) noexcept { prepare_receive(req); }

result<std::size_t> udp_receive_operation::make_result(int res) noexcept { return received(res); }

void udp_receive_from_operation::prepare(io_request& req) noexcept { prepare_receive(req); }

result<std::pair<std::size_t, socket_address>> udp_receive_from_operation::make_result(int res) noexcept {
  auto n = received(res);
  if (!n) return n.error();
  auto from = sender();
  if (!from) return from.error();
  return std::pair<std::size_t, socket_address>(*n, *from);
}

std::coroutine_handle<> udp_connect_operation::start(continuation c) noexcept {
  if (::connect(fd_, to_.data(), to_.size()) != 0) {
    outcome_ = errno_code(errno);
  } else if (auto local = socket_address::local_of(fd_); !local) {
    outcome_ = local.error();
  } else {
    *local_ = *local;
  }
  return c.complete();
}

}  // namespace detail

result<udp_socket> udp_socket::bind(const socket_address& at, udp_options options) {
  const int fd = ::socket(at.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_code(errno);
  udp_socket s;
  s.sock_ = detail::socket_handle(fd);  // not udp_socket(fd): nothing is bound yet to learn
  auto set = [&s](int level, int name, bool on) {
    const int value = on ? 1 : 0;
    return ::setsockopt(s.native_handle(), level, name, &value, sizeof value) == 0;
  };
  if (options.reuse_address && !set(SOL_SOCKET, SO_REUSEADDR, true)) return errno_code(errno);
  if (options.reuse_port && !set(SOL_SOCKET, SO_REUSEPORT, true)) return errno_code(errno);
  if (at.is_ipv6() && !set(IPPROTO_IPV6, IPV6_V6ONLY, options.ipv6_only)) return errno_code(errno);
  if (::bind(s.native_handle(), at.data(), at.size()) != 0) return errno_code(errno);
  auto local = socket_address::local_of(s.native_handle());  // the port a port 0 bind chose
  if (!local) return local.error();
  s.local_ = *local;
  return s;
}

udp_socket::udp_socket(int fd) noexcept : sock_(fd) {
  if (fd < 0) return;
  if (auto local = socket_address::local_of(fd)) local_ = *local;
}

}  // namespace cogwheel
