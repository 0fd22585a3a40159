/// @file
/// socket_address: an IPv4 or IPv6 address with a port, numeric only (no name resolution).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <cogwheel/runtime/result.hpp>

namespace cogwheel {

/// An IPv4 or IPv6 address with a port, numeric only (no name resolution). A value type.
class socket_address {
 public:
  /// 0.0.0.0:0
  socket_address() noexcept;

  /// "127.0.0.1:8080", "[::1]:8080", "[fe80::1%2]:80"; a missing port is an error.
  /// errc::invalid_argument on anything else.
  static result<socket_address> parse(std::string_view text);
  /// A numeric host ("127.0.0.1", "::1") and a port.
  static result<socket_address> from_ip(std::string_view host, std::uint16_t port);
  /// The IPv4 loopback address 127.0.0.1 with `port`.
  static socket_address ipv4_loopback(std::uint16_t port) noexcept;
  /// The IPv6 loopback address ::1 with `port`.
  static socket_address ipv6_loopback(std::uint16_t port) noexcept;
  /// 0.0.0.0 with `port`: every IPv4 interface, for a listener.
  static socket_address ipv4_any(std::uint16_t port) noexcept;
  /// From a sockaddr the kernel filled in; errc::address_family_not_supported unless IPv4/6.
  static result<socket_address> from_sockaddr(const sockaddr* sa, socklen_t len);
  /// The address the socket `fd` is bound to (getsockname).
  static result<socket_address> local_of(int fd) noexcept;
  /// The address the socket `fd` is connected to (getpeername).
  static result<socket_address> peer_of(int fd) noexcept;

  /// Whether it is an IPv4 address.
  bool is_ipv4() const noexcept { return storage_.any.sa_family == AF_INET; }
  /// Whether it is an IPv6 address.
  bool is_ipv6() const noexcept { return storage_.any.sa_family == AF_INET6; }
  /// AF_INET or AF_INET6.
  int family() const noexcept { return storage_.any.sa_family; }
  /// The port, in host byte order.
  std::uint16_t port() const noexcept;
  /// Sets the port (host byte order).
  void set_port(std::uint16_t port) noexcept;

  /// "127.0.0.1:8080" or "[::1]:8080".
  std::string to_string() const;

  ///@{
  /// The sockaddr to pass to a socket call, size() bytes long.
  const sockaddr* data() const noexcept { return &storage_.any; }
  sockaddr* data() noexcept { return &storage_.any; }
  ///@}
  /// The length of data(): sizeof(sockaddr_in) or sizeof(sockaddr_in6).
  socklen_t size() const noexcept {
    return is_ipv6() ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  }

  /// Same family, address and port (and scope for IPv6).
  friend bool operator==(const socket_address& a, const socket_address& b) noexcept;

 private:
  // The two families only (28 bytes, not sockaddr_storage's 128): every socket object holds
  // its local address, so this is per-connection memory.
  union storage {
    sockaddr any;
    sockaddr_in v4;
    sockaddr_in6 v6;
  } storage_{};
};

}  // namespace cogwheel
