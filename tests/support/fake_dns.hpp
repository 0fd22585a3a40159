// A small DNS server for the tests of names (io's resolver, the Redis client by name), on
// 127.0.0.1 (UDP and TCP, one free port), run by a thread of its own. Each name answers as its
// rule says: addresses with a TTL, NXDOMAIN, SERVFAIL, REFUSED, silence, or a truncated UDP
// answer that must be asked again over TCP; any UDP answer may be sent late (per type), without
// holding up the others. Names without a rule are NXDOMAIN. It counts the queries per name and
// type.
//
// Only what the tests need of RFC 1035: one question per query, answers of type A (1) and
// AAAA (28) in class IN, the question echoed back.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cogwheel::test_support {

class fake_dns {
 public:
  enum class kind { answer, nxdomain, servfail, refused, silent, truncated };
  struct rule {
    kind what = kind::answer;
    std::vector<std::string> a = {};     // IPv4 addresses
    std::vector<std::string> aaaa = {};  // IPv6 addresses
    std::uint32_t ttl = 60;
    std::chrono::milliseconds delay{0};       // UDP answers are sent this late
    std::chrono::milliseconds aaaa_delay{-1};  // AAAA answers this late instead, when >= 0
    // CNAME records first, each from the previous name (the first from the name asked) to the
    // next; the addresses then belong to the last. A name twice makes a loop.
    std::vector<std::string> cnames = {};
  };

  fake_dns() {
    // A UDP port whose TCP twin is free too (another process may hold it): a few tries.
    for (int attempt = 0; attempt < 50 && !ok_; ++attempt) {
      if (udp_ >= 0) ::close(udp_);
      if (tcp_ >= 0) ::close(tcp_);
      udp_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in at{};
      at.sin_family = AF_INET;
      at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ::bind(udp_, reinterpret_cast<sockaddr*>(&at), sizeof at);
      socklen_t len = sizeof at;
      ::getsockname(udp_, reinterpret_cast<sockaddr*>(&at), &len);
      port_ = ntohs(at.sin_port);
      tcp_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const int one = 1;
      ::setsockopt(tcp_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      ok_ = ::bind(tcp_, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0 && ::listen(tcp_, 16) == 0;
    }
    thread_ = std::thread([this] { serve(); });
  }
  fake_dns(const fake_dns&) = delete;
  fake_dns& operator=(const fake_dns&) = delete;
  ~fake_dns() {
    stop_ = true;
    thread_.join();
    ::close(udp_);
    ::close(tcp_);
  }

  bool ok() const noexcept { return ok_; }
  std::uint16_t port() const noexcept { return port_; }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }

  void set(const std::string& name, rule r) {
    std::lock_guard lock(mutex_);
    rules_[name] = std::move(r);
  }
  // Queries seen for `name` of `type` (1: A, 28: AAAA; 0: any).
  int queries(const std::string& name, int type = 0) const {
    std::lock_guard lock(mutex_);
    int n = 0;
    for (const auto& [k, count] : counts_)
      if (k.first == name && (type == 0 || k.second == type)) n += count;
    return n;
  }
  int tcp_queries() const { return tcp_queries_.load(); }

 private:
  struct question {
    std::string name;
    int type = 0;
    std::size_t end = 0;  // offset just past the question
  };

  static bool parse(const std::uint8_t* q, std::size_t n, question& out) {
    if (n < 12) return false;
    std::size_t i = 12;
    while (i < n && q[i] != 0) {
      const std::size_t len = q[i];
      if (len > 63 || i + 1 + len > n) return false;
      if (!out.name.empty()) out.name += '.';
      out.name.append(reinterpret_cast<const char*>(q + i + 1), len);
      i += 1 + len;
    }
    if (i + 5 > n) return false;
    out.type = (q[i + 1] << 8) | q[i + 2];
    out.end = i + 5;
    return true;
  }

  // "a.b" as labels: 1 'a' 1 'b' 0.
  static std::vector<std::uint8_t> wire_name(const std::string& name) {
    std::vector<std::uint8_t> out;
    std::size_t start = 0;
    while (start < name.size()) {
      std::size_t dot = name.find('.', start);
      if (dot == std::string::npos) dot = name.size();
      out.push_back(static_cast<std::uint8_t>(dot - start));
      out.insert(out.end(), name.begin() + static_cast<std::ptrdiff_t>(start), name.begin() + static_cast<std::ptrdiff_t>(dot));
      start = dot + 1;
    }
    out.push_back(0);
    return out;
  }

  // The reply to query q, or nothing (silence); `tcp` lifts truncation.
  std::vector<std::uint8_t> reply(const std::uint8_t* q, std::size_t n, bool tcp) {
    question qu;
    if (!parse(q, n, qu)) return {};
    rule r;
    bool known = false;
    {
      std::lock_guard lock(mutex_);
      ++counts_[{qu.name, qu.type}];
      if (auto it = rules_.find(qu.name); it != rules_.end()) {
        r = it->second;
        known = true;
      }
    }
    if (tcp) ++tcp_queries_;
    if (!known) r.what = kind::nxdomain;
    if (r.what == kind::silent) return {};
    delay_ = qu.type == 28 && r.aaaa_delay.count() >= 0 ? r.aaaa_delay : r.delay;
    std::vector<std::uint8_t> out(q, q + qu.end);
    out[2] = static_cast<std::uint8_t>(0x80 | (q[2] & 0x79) | 0x04);  // QR, opcode, AA, RD
    int rcode = 0;
    if (r.what == kind::nxdomain) rcode = 3;
    if (r.what == kind::servfail) rcode = 2;
    if (r.what == kind::refused) rcode = 5;
    out[3] = static_cast<std::uint8_t>(0x80 | rcode);  // RA
    out[6] = out[7] = out[8] = out[9] = out[10] = out[11] = 0;
    if (r.what == kind::truncated && !tcp) {
      out[2] |= 0x02;  // TC: ask again over TCP
      return out;
    }
    if (rcode != 0) return out;
    int answers = 0;
    std::vector<std::uint8_t> owner = {0xc0, 0x0c};  // the question's name, compressed
    auto add = [&](int type, const void* rdata, std::size_t len) {
      out.insert(out.end(), owner.begin(), owner.end());
      const std::uint8_t head[] = {0, static_cast<std::uint8_t>(type), 0, 1,
                                   static_cast<std::uint8_t>(r.ttl >> 24), static_cast<std::uint8_t>(r.ttl >> 16),
                                   static_cast<std::uint8_t>(r.ttl >> 8), static_cast<std::uint8_t>(r.ttl),
                                   static_cast<std::uint8_t>(len >> 8), static_cast<std::uint8_t>(len)};
      out.insert(out.end(), head, head + sizeof head);
      out.insert(out.end(), static_cast<const std::uint8_t*>(rdata), static_cast<const std::uint8_t*>(rdata) + len);
      ++answers;
    };
    for (const std::string& target : r.cnames) {
      const std::vector<std::uint8_t> wire = wire_name(target);
      add(5, wire.data(), wire.size());
      owner = wire;
    }
    if (qu.type == 1)
      for (const std::string& a : r.a) {
        in_addr v4{};
        ::inet_pton(AF_INET, a.c_str(), &v4);
        add(1, &v4, 4);
      }
    if (qu.type == 28)
      for (const std::string& a : r.aaaa) {
        in6_addr v6{};
        ::inet_pton(AF_INET6, a.c_str(), &v6);
        add(28, &v6, 16);
      }
    out[6] = static_cast<std::uint8_t>(answers >> 8);
    out[7] = static_cast<std::uint8_t>(answers);
    return out;
  }

  void serve_tcp(int c) {
    timeval tv{1, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (;;) {
      std::uint8_t len[2];
      if (::recv(c, len, 2, MSG_WAITALL) != 2) break;
      std::vector<std::uint8_t> q(static_cast<std::size_t>((len[0] << 8) | len[1]));
      if (::recv(c, q.data(), q.size(), MSG_WAITALL) != static_cast<ssize_t>(q.size())) break;
      std::vector<std::uint8_t> a = reply(q.data(), q.size(), true);
      if (a.empty()) continue;
      const std::uint8_t out_len[2] = {static_cast<std::uint8_t>(a.size() >> 8), static_cast<std::uint8_t>(a.size())};
      ::send(c, out_len, 2, MSG_NOSIGNAL);
      ::send(c, a.data(), a.size(), MSG_NOSIGNAL);
    }
    ::close(c);
  }

  struct late_reply {
    std::chrono::steady_clock::time_point due;
    std::vector<std::uint8_t> bytes;
    sockaddr_storage to;
    socklen_t to_len;
  };

  void send_due() {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = late_.begin(); it != late_.end();) {
      if (it->due > now) {
        ++it;
        continue;
      }
      ::sendto(udp_, it->bytes.data(), it->bytes.size(), 0, reinterpret_cast<sockaddr*>(&it->to), it->to_len);
      it = late_.erase(it);
    }
  }

  void serve() {
    std::uint8_t buf[4096];
    while (!stop_) {
      send_due();
      pollfd fds[2] = {{udp_, POLLIN, 0}, {tcp_, POLLIN, 0}};
      if (::poll(fds, 2, late_.empty() ? 20 : 1) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        late_reply r{};
        r.to_len = sizeof r.to;
        const ssize_t n = ::recvfrom(udp_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&r.to), &r.to_len);
        if (n > 0) {
          delay_ = std::chrono::milliseconds(0);
          r.bytes = reply(buf, static_cast<std::size_t>(n), false);
          r.due = std::chrono::steady_clock::now() + delay_;
          if (!r.bytes.empty()) late_.push_back(std::move(r));
          send_due();
        }
      }
      if (fds[1].revents & POLLIN) {
        const int c = ::accept4(tcp_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) serve_tcp(c);
      }
    }
  }

  int udp_ = -1;
  int tcp_ = -1;
  std::uint16_t port_ = 0;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int> tcp_queries_{0};
  mutable std::mutex mutex_;
  std::map<std::string, rule> rules_;
  std::map<std::pair<std::string, int>, int> counts_;
  std::chrono::milliseconds delay_{0};  // of the reply being built (server thread only)
  std::vector<late_reply> late_;        // server thread only
  std::thread thread_;
};

}  // namespace cogwheel::test_support
