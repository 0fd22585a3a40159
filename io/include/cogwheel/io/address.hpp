// socket_address: an IPv4 or IPv6 address with a port, numeric only (no name resolution).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <cogwheel/runtime/result.hpp>

namespace cogwheel {

class socket_address {
 public:
  // 0.0.0.0:0
  socket_address() noexcept;

  // "127.0.0.1:8080", "[::1]:8080", "[fe80::1%2]:80"; a missing port is an error.
  // errc::invalid_argument on anything else.
  static result<socket_address> parse(std::string_view text);
  // A numeric host ("127.0.0.1", "::1") and a port.
  static result<socket_address> from_ip(std::string_view host, std::uint16_t port);
  static socket_address ipv4_loopback(std::uint16_t port) noexcept;
  static socket_address ipv6_loopback(std::uint16_t port) noexcept;
  static socket_address ipv4_any(std::uint16_t port) noexcept;
  // From a sockaddr the kernel filled in; errc::address_family_not_supported unless IPv4/6.
  static result<socket_address> from_sockaddr(const sockaddr* sa, socklen_t len);
  // The address a socket is bound to (getsockname) or connected to (getpeername).
  static result<socket_address> local_of(int fd) noexcept;
  static result<socket_address> peer_of(int fd) noexcept;

  bool is_ipv4() const noexcept { return storage_.ss_family == AF_INET; }
  bool is_ipv6() const noexcept { return storage_.ss_family == AF_INET6; }
  int family() const noexcept { return storage_.ss_family; }
  std::uint16_t port() const noexcept;
  void set_port(std::uint16_t port) noexcept;

  // "127.0.0.1:8080" or "[::1]:8080".
  std::string to_string() const;

  const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  sockaddr* data() noexcept { return reinterpret_cast<sockaddr*>(&storage_); }
  socklen_t size() const noexcept {
    return is_ipv6() ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  }

  friend bool operator==(const socket_address& a, const socket_address& b) noexcept;

 private:
  sockaddr_storage storage_{};
};

}  // namespace cogwheel
