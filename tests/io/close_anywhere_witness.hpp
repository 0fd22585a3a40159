// Witnesses for close_anywhere_test: sockets made with plain blocking syscalls right after a
// cogwheel socket was ended, so that they take the lowest free descriptor numbers (the ended
// socket's number first, when it is free). Each is loaded with something a stray operation
// on its number would take (bytes, a datagram, a pending connection) and later checked for
// what a stray operation would have done to it (taken bytes, sent bytes, shut it down,
// connected it, accepted its connection).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

namespace cogwheel::io_test {

inline constexpr std::string_view witness_bytes = "witness bytes nobody else may take";

inline sockaddr_in loopback_any_port() {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A plain listening socket on loopback (the witnesses' other ends connect to it).
struct plain_listener {
  int fd = -1;
  sockaddr_in at{};
  explicit plain_listener(int type = SOCK_STREAM) {
    fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
    at = loopback_any_port();
    ::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at);
    socklen_t len = sizeof at;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len);
    if (type == SOCK_STREAM) ::listen(fd, 64);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);  // checks never block
  }
  ~plain_listener() { ::close(fd); }
};

// Bytes waiting on fd, read without blocking: -1 when none (EAGAIN), 0 at end of stream.
inline long pending_bytes(int fd, std::string* out = nullptr) {
  char buf[4096];
  const long n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n > 0 && out != nullptr) out->assign(buf, static_cast<std::size_t>(n));
  return n < 0 ? -1 : n;
}

// What a witness found when checked: empty when nothing happened to it.
using witness_report = std::string;

// A TCP connection whose near end (`near`) takes a low number; the far end has sent
// witness_bytes, which only a read of `near` can take.
struct tcp_witness {
  int near = -1;
  int far = -1;
  explicit tcp_witness(const plain_listener& l) {
    near = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ::connect(near, reinterpret_cast<const sockaddr*>(&l.at), sizeof l.at);  // loopback: at once
    far = ::accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC);
    ::send(far, witness_bytes.data(), witness_bytes.size(), MSG_NOSIGNAL);
  }
  tcp_witness(const tcp_witness&) = delete;
  ~tcp_witness() {
    ::close(near);
    ::close(far);
  }
  witness_report check() const {
    std::string got;
    if (pending_bytes(near, &got) != static_cast<long>(witness_bytes.size()) || got != witness_bytes)
      return "the witness holds " + std::to_string(got.size()) + " bytes instead of the " +
             std::to_string(witness_bytes.size()) + " it was sent (a read took them, or a write added to them)";
    const long sent = pending_bytes(far);
    if (sent > 0) return "bytes were written to the witness (" + std::to_string(sent) + ")";
    if (sent == 0) return "the witness was shut down";
    return {};
  }
};

// A UDP socket connected to a plain one that has sent it one datagram.
struct udp_witness {
  int near = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);  // first: the lowest free number
  plain_listener far{SOCK_DGRAM};
  udp_witness() {
    sockaddr_in a = loopback_any_port();
    ::bind(near, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(near, reinterpret_cast<sockaddr*>(&a), &len);
    ::connect(near, reinterpret_cast<const sockaddr*>(&far.at), sizeof far.at);
    ::sendto(far.fd, witness_bytes.data(), witness_bytes.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  udp_witness(const udp_witness&) = delete;
  ~udp_witness() { ::close(near); }
  witness_report check() const {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    if (::getpeername(near, reinterpret_cast<sockaddr*>(&peer), &len) != 0 || peer.sin_port != far.at.sin_port)
      return "the witness was connected elsewhere";
    std::string got;
    // A datagram in flight on loopback is queued by the time sendto returns.
    if (pending_bytes(near, &got) != static_cast<long>(witness_bytes.size()) || got != witness_bytes)
      return "a receive took the witness's datagram";
    if (pending_bytes(far.fd) >= 0) return "a datagram was sent to the witness's peer";
    return {};
  }
};

// An unconnected TCP socket: a stray connect would connect it.
struct unconnected_witness {
  int near = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  unconnected_witness() = default;
  unconnected_witness(const unconnected_witness&) = delete;
  ~unconnected_witness() { ::close(near); }
  witness_report check() const {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    if (::getpeername(near, reinterpret_cast<sockaddr*>(&peer), &len) == 0) return "a connect connected the witness";
    return {};
  }
};

// A listening socket with one connection waiting: a stray accept would take it.
struct listener_witness {
  plain_listener near;
  int client = -1;
  listener_witness() {
    client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ::connect(client, reinterpret_cast<const sockaddr*>(&near.at), sizeof near.at);
  }
  listener_witness(const listener_witness&) = delete;
  ~listener_witness() { ::close(client); }
  witness_report check() const {
    const int fd = ::accept4(near.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return "an accept took the witness's connection";
    ::close(fd);
    return {};
  }
};

}  // namespace cogwheel::io_test
