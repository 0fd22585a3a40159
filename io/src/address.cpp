#include <cogwheel/io/address.hpp>

#include <cerrno>

#include <arpa/inet.h>
#include <net/if.h>

#include <charconv>
#include <cstring>

namespace cogwheel {

socket_address::socket_address() noexcept { storage_.v4.sin_family = AF_INET; }

socket_address socket_address::ipv4_loopback(std::uint16_t port) noexcept {
  socket_address a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage_);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  in->sin_port = htons(port);
  return a;
}

socket_address socket_address::ipv4_any(std::uint16_t port) noexcept {
  socket_address a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage_);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_ANY);
  in->sin_port = htons(port);
  return a;
}

socket_address socket_address::ipv6_loopback(std::uint16_t port) noexcept {
  socket_address a;
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
  in6->sin6_family = AF_INET6;
  in6->sin6_addr = in6addr_loopback;
  in6->sin6_port = htons(port);
  return a;
}

result<socket_address> socket_address::from_ip(std::string_view host, std::uint16_t port) {
  if (host.empty() || host.size() >= INET6_ADDRSTRLEN + IF_NAMESIZE) return errc::invalid_argument;
  // inet_pton stops at a NUL: "127.0.0.1\0junk" would otherwise pass as 127.0.0.1.
  if (host.find('\0') != std::string_view::npos) return errc::invalid_argument;
  char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 1];
  std::memcpy(buf, host.data(), host.size());
  buf[host.size()] = '\0';
  socket_address a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage_);
  if (::inet_pton(AF_INET, buf, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    return a;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
  std::memset(&a.storage_, 0, sizeof a.storage_);
  char* zone = std::strchr(buf, '%');
  if (zone != nullptr) {
    *zone++ = '\0';
    unsigned index = 0;
    const char* end = zone + std::strlen(zone);
    auto [p, ec] = std::from_chars(zone, end, index);
    if (ec != std::errc() || p != end) index = ::if_nametoindex(zone);
    if (index == 0) return errc::invalid_argument;
    in6->sin6_scope_id = index;
  }
  if (::inet_pton(AF_INET6, buf, &in6->sin6_addr) != 1) return errc::invalid_argument;
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(port);
  return a;
}

result<socket_address> socket_address::parse(std::string_view text) {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return errc::invalid_argument;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) return errc::invalid_argument;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  unsigned value = 0;
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || p != port.data() + port.size() || value > 65535)
    return errc::invalid_argument;
  auto a = from_ip(host, static_cast<std::uint16_t>(value));
  // Brackets exactly around IPv6 literals (RFC 3986): "::1:80" is ambiguous, "[1.2.3.4]:80" malformed.
  if (a && (text.front() == '[') != a->is_ipv6()) return errc::invalid_argument;
  return a;
}

result<socket_address> socket_address::from_sockaddr(const sockaddr* sa, socklen_t len) {
  socket_address a;
  if (sa == nullptr) return errc::invalid_argument;
  if (sa->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    std::memcpy(&a.storage_, sa, sizeof(sockaddr_in));
    return a;
  }
  if (sa->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    std::memcpy(&a.storage_, sa, sizeof(sockaddr_in6));
    return a;
  }
  return errc::address_family_not_supported;
}

std::uint16_t socket_address::port() const noexcept {
  if (is_ipv6()) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
}

void socket_address::set_port(std::uint16_t port) noexcept {
  if (is_ipv6())
    reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
  else
    reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
}

std::string socket_address::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  std::string s;
  if (is_ipv6()) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    s.append("[").append(buf);
    if (in6->sin6_scope_id != 0) s.append("%").append(std::to_string(in6->sin6_scope_id));
    s.append("]");
  } else {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&storage_);
    ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    s.append(buf);
  }
  s.append(":").append(std::to_string(port()));
  return s;
}

bool operator==(const socket_address& a, const socket_address& b) noexcept {
  if (a.family() != b.family()) return false;
  return std::memcmp(a.data(), b.data(), a.size()) == 0;
}

namespace {
template <class Query>
result<socket_address> query_address(int fd, Query query) noexcept {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (query(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return errno_code(errno);
  return socket_address::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}
}  // namespace

result<socket_address> socket_address::local_of(int fd) noexcept { return query_address(fd, ::getsockname); }
result<socket_address> socket_address::peer_of(int fd) noexcept { return query_address(fd, ::getpeername); }

}  // namespace cogwheel
