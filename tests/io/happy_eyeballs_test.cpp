// tcp_stream::connect(host, port): Happy Eyeballs v2 on loopback, without privileges. A
// listener whose accept queue is full drops SYNs (a black hole); ::1 with nothing listening
// refuses at once. Names come from a hosts file of the test's own, or from the fake DNS server.
#include <cogwheel/io/tcp.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cogwheel/cogwheel.hpp>
#include <cogwheel/io/resolve.hpp>

#include "../support/fake_dns.hpp"
#include "support.hpp"
#include "../support/temp_file.hpp"

namespace cogwheel::io_test {
namespace {

using test_support::fake_dns;
using test_support::temp_file;

using namespace std::chrono_literals;

// A loopback listener that accepts nothing and whose accept queue is full: the kernel drops
// further SYNs, so a connect to it hangs (retransmitting) until cancelled.
class black_hole {
 public:
  explicit black_hole(socket_address at) {
    fd_ = ::socket(at.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (at.is_ipv6()) ::setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (::bind(fd_, at.data(), at.size()) != 0 || ::listen(fd_, 0) != 0) return;
    auto bound = socket_address::local_of(fd_);
    if (!bound) return;
    address_ = *bound;
    for (int i = 0; i < 2; ++i) {  // the first fills the queue, the second is already dropped
      const int c = ::socket(at.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      (void)::connect(c, address_.data(), address_.size());
      fillers_.push_back(c);
      ::usleep(20000);
    }
    ok_ = true;
  }
  black_hole(black_hole&& o) noexcept
      : fd_(std::exchange(o.fd_, -1)), fillers_(std::move(o.fillers_)), address_(o.address_), ok_(o.ok_) {
    o.fillers_.clear();
  }
  black_hole(const black_hole&) = delete;
  black_hole& operator=(const black_hole&) = delete;
  ~black_hole() {
    for (int c : fillers_) ::close(c);
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const noexcept { return ok_; }
  std::uint16_t port() const noexcept { return address_.port(); }

 private:
  int fd_ = -1;
  std::vector<int> fillers_;
  socket_address address_;
  bool ok_ = false;
};

// Something on ::1 and something on 127.0.0.1 with one port number: `first` is made on a free
// port of its family, then `second` tries the same number; another process may hold it, so a
// few tries. Returns false (the test skips) when no pair could be made.
template <class First, class Second, class MakeFirst, class MakeSecond>
bool same_port(std::optional<First>& first, std::optional<Second>& second, MakeFirst make_first,
               MakeSecond make_second) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    first.reset();
    second.reset();
    first.emplace(make_first());
    if (!first->ok()) return false;
    second.emplace(make_second(first->port()));
    if (second->ok()) return true;
  }
  return false;
}

// A tcp_listener with the ok()/port() of black_hole, for same_port.
struct listening {
  explicit listening(result<tcp_listener> l) : listener(std::move(l)) {}
  bool ok() const noexcept { return listener.has_value(); }
  std::uint16_t port() const { return listener->local_address().port(); }
  result<tcp_listener> listener;
};

runtime_options with_hosts(const temp_file& hosts, bool paused = true) {
  runtime_options o;
  o.paused_clock = paused;
  o.resolver.hosts_file = hosts.path();
  o.resolver.servers = {"127.0.0.1:1"};  // nothing there: no name here may need a server
  o.resolver.search = std::vector<std::string>{};
  o.resolver.attempts = 1;
  return o;
}

// "::1 <name>" and "127.0.0.1 <name>", the usual shape of a dual-stack name.
const temp_file& dual_hosts() {
  static const temp_file hosts("::1 dual.test localhost\n127.0.0.1 dual.test localhost\n");
  return hosts;
}

void expect_at(clock::duration elapsed, clock::duration expected) {
  EXPECT_GE(elapsed, expected);
  EXPECT_LT(elapsed, expected + 1ms);
}

TEST(happy_eyeballs, ipv6_refused_at_once_falls_back_to_ipv4_without_waiting) {
  auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(listener);
  const std::uint16_t port = listener->local_address().port();
  run([](tcp_listener& l, std::uint16_t port) -> task<> {
    const auto start = now();
    auto s = co_await with_timeout(tcp_stream::connect("dual.test", port), 5s);
    CO_ASSERT_OK(s);
    EXPECT_LT(now() - start, 250ms);  // not the attempt delay: ::1 refused at once
    EXPECT_TRUE(s->peer_address()->is_ipv4());
    CO_ASSERT_OK(co_await with_timeout(l.accept(), 5s));
  }(*listener, port), with_hosts(dual_hosts()));
}

TEST(happy_eyeballs, a_black_holed_ipv6_gets_the_attempt_delay_then_ipv4_wins) {
  std::optional<black_hole> v6;
  std::optional<listening> v4;
  if (!same_port(v6, v4, [] { return black_hole(socket_address::ipv6_loopback(0)); },
                 [](std::uint16_t p) { return listening(tcp_listener::bind(socket_address::ipv4_loopback(p))); }))
    GTEST_SKIP() << "no ::1 black hole with a 127.0.0.1 listener on its port here";
  tcp_listener* listener = &*v4->listener;
  const int before = open_descriptors();
  for (auto delay : {250ms, 100ms}) {
    run([](tcp_listener& l, std::uint16_t port, clock::duration delay) -> task<> {
      const auto start = now();
      auto s = co_await with_timeout(tcp_stream::connect("dual.test", port, {.attempt_delay = delay}), 5s);
      CO_ASSERT_OK(s);
      expect_at(now() - start, delay);
      EXPECT_TRUE(s->peer_address()->is_ipv4());
      CO_ASSERT_OK(co_await with_timeout(l.accept(), 5s));
    }(*listener, v6->port(), delay), with_hosts(dual_hosts()));
  }
  EXPECT_EQ(open_descriptors(), before);  // the IPv6 attempt's socket was closed
}

TEST(happy_eyeballs, prefer_ipv4_tries_ipv4_first) {
  std::optional<black_hole> v4;
  std::optional<listening> v6;
  if (!same_port(v4, v6, [] { return black_hole(socket_address::ipv4_loopback(0)); }, [](std::uint16_t p) {
        return listening(tcp_listener::bind(socket_address::ipv6_loopback(p), {.ipv6_only = true}));
      }))
    GTEST_SKIP() << "no 127.0.0.1 black hole with a ::1 listener on its port here";
  tcp_listener* listener = &*v6->listener;
  run([](tcp_listener& l, std::uint16_t port) -> task<> {
    const auto start = now();
    auto s = co_await with_timeout(
        tcp_stream::connect("dual.test", port, {.attempt_delay = 50ms, .prefer_family = ip_family::ipv4}), 5s);
    CO_ASSERT_OK(s);
    expect_at(now() - start, 50ms);
    EXPECT_TRUE(s->peer_address()->is_ipv6());
    CO_ASSERT_OK(co_await with_timeout(l.accept(), 5s));
  }(*listener, v4->port()), with_hosts(dual_hosts()));
}

TEST(happy_eyeballs, every_address_dropping_is_cut_at_the_deadline_leaving_nothing_open) {
  std::optional<black_hole> v6, v4;
  if (!same_port(v6, v4, [] { return black_hole(socket_address::ipv6_loopback(0)); },
                 [](std::uint16_t p) { return black_hole(socket_address::ipv4_loopback(p)); }))
    GTEST_SKIP() << "no pair of black holes on one port here";
  const int before = open_descriptors();
  run([](std::uint16_t port) -> task<> {
    const auto start = now();
    auto s = co_await with_timeout(tcp_stream::connect("dual.test", port, {.attempt_delay = 100ms}), 1s);
    EXPECT_EQ(s.error(), errc::timed_out);
    expect_at(now() - start, 1s);
  }(v6->port()), with_hosts(dual_hosts()));
  EXPECT_EQ(open_descriptors(), before);
}

TEST(happy_eyeballs, a_refused_address_everywhere_fails_with_the_connection_error) {
  // Nothing listens on this port on either family (bound, then closed).
  auto probe = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(probe);
  const std::uint16_t port = probe->local_address().port();
  probe->close();
  run([](std::uint16_t port) -> task<> {
    const auto start = now();
    auto s = co_await with_timeout(tcp_stream::connect("dual.test", port), 5s);
    EXPECT_EQ(s.error(), std::errc::connection_refused);
    EXPECT_LT(now() - start, 250ms);  // each failure started the next at once
  }(port), with_hosts(dual_hosts()));
}

TEST(happy_eyeballs, localhost_reaches_an_ipv4_only_listener) {
  auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(listener);
  const std::uint16_t port = listener->local_address().port();
  temp_file empty("");
  // The machine's own hosts file, one that lists ::1 too, and none at all (RFC 6761's answer).
  for (const std::string& file : {std::string("/etc/hosts"), dual_hosts().path(), empty.path()}) {
    runtime_options o;
    o.resolver.hosts_file = file;
    run([](tcp_listener& l, std::uint16_t port) -> task<> {
      auto s = co_await with_timeout(tcp_stream::connect("localhost", port), 5s);
      CO_ASSERT_OK(s);
      EXPECT_EQ(s->peer_address()->to_string(), "127.0.0.1:" + std::to_string(port));
      CO_ASSERT_OK(co_await with_timeout(l.accept(), 5s));
    }(*listener, port), o);
  }
}

TEST(happy_eyeballs, numeric_hosts_and_a_local_address) {
  auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(listener);
  const std::uint16_t port = listener->local_address().port();
  run([](tcp_listener& l, std::uint16_t port) -> task<> {
    auto local = socket_address::from_ip("127.0.0.2", 0);
    auto s = co_await with_timeout(tcp_stream::connect("127.0.0.1", port, {.local_address = *local}), 5s);
    CO_ASSERT_OK(s);
    EXPECT_EQ(s->local_address().to_string().rfind("127.0.0.2:", 0), 0u);
    CO_ASSERT_OK(co_await with_timeout(l.accept(), 5s));
    auto wrong = co_await tcp_stream::connect("::1", port, {.local_address = *local});
    EXPECT_EQ(wrong.error(), errc::address_family_not_supported);
    // A name: only IPv4 is asked for and tried from an IPv4 local address.
    auto named = co_await with_timeout(tcp_stream::connect("dual.test", port, {.local_address = *local}), 5s);
    CO_ASSERT_OK(named);
    CO_ASSERT_OK(co_await with_timeout(l.accept(), 5s));
  }(*listener, port), with_hosts(dual_hosts()));
}

// A hosts file naming `count` IPv4 loopback addresses (127.1.x.y) "many.test".
temp_file many_loopback_hosts(int count) {
  std::string text;
  char line[64];
  for (int i = 0; i < count; ++i) {
    std::snprintf(line, sizeof line, "127.1.%d.%d many.test\n", i / 250, i % 250 + 1);
    text += line;
  }
  return temp_file(text);
}

TEST(happy_eyeballs, held_a_thousand_refusing_addresses_fail_with_the_connection_error) {
  // Each attempt fails at once and starts the next: a chain of 1,000 two-way races, unwound
  // when the last fails.
  auto probe = tcp_listener::bind(socket_address::ipv4_any(0));
  ASSERT_TRUE(probe);
  const std::uint16_t port = probe->local_address().port();
  probe->close();
  const temp_file hosts = many_loopback_hosts(1000);
  const int before = open_descriptors();
  run([](std::uint16_t port) -> task<> {
    auto s = co_await with_timeout(tcp_stream::connect("many.test", port), 60s);
    EXPECT_EQ(s.error(), std::errc::connection_refused);
  }(port), with_hosts(hosts, false));
  EXPECT_EQ(open_descriptors(), before);
}

TEST(happy_eyeballs, held_a_thousand_black_holed_attempts_are_all_closed_at_the_deadline) {
  // One black hole on 0.0.0.0 takes every 127.1.x.y: 1,000 attempts in flight at once (1 ms
  // apart on the paused clock), all stopped by one timeout through 1,000 nested races.
  black_hole hole(socket_address::ipv4_any(0));
  if (!hole.ok()) GTEST_SKIP() << "no black hole on 0.0.0.0 here";
  const temp_file hosts = many_loopback_hosts(1000);
  const int before = open_descriptors();
  run([](std::uint16_t port) -> task<> {
    const auto start = now();
    auto s = co_await with_timeout(tcp_stream::connect("many.test", port, {.attempt_delay = 1ms}), 2s);
    EXPECT_EQ(s.error(), errc::timed_out);
    expect_at(now() - start, 2s);
  }(hole.port()), with_hosts(hosts));
  EXPECT_EQ(open_descriptors(), before);
}

class happy_eyeballs_dns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dns_.ok()) GTEST_SKIP() << "cannot listen on a loopback port for the fake DNS server";
  }
  runtime_options options(bool paused) const {
    runtime_options o = with_hosts(empty_, paused);
    o.resolver.servers = {dns_.server()};
    o.resolver.timeout = 5000ms;
    return o;
  }
  fake_dns dns_;
  temp_file empty_{""};
};

TEST_F(happy_eyeballs_dns, a_name_that_does_not_exist_is_not_found) {
  run([]() -> task<> {
    auto s = co_await with_timeout(tcp_stream::connect("nosuch.test", 80), 5s);
    EXPECT_EQ(s.error(), resolve_errc::not_found);
  }(), options(false));
}

TEST_F(happy_eyeballs_dns, one_timeout_bounds_the_resolution_too) {
  dns_.set("silent.test", {.what = fake_dns::kind::silent});
  run([]() -> task<> {
    const auto start = now();
    auto s = co_await with_timeout(tcp_stream::connect("silent.test", 80), 300ms);
    EXPECT_EQ(s.error(), errc::timed_out);
    expect_at(now() - start, 300ms);
  }(), options(true));
}

TEST_F(happy_eyeballs_dns, aaaa_arriving_within_the_resolution_delay_is_preferred) {
  std::optional<listening> v6, v4;
  if (!same_port(v6, v4, [] { return listening(tcp_listener::bind(socket_address::ipv6_loopback(0), {.ipv6_only = true})); },
                 [](std::uint16_t p) { return listening(tcp_listener::bind(socket_address::ipv4_loopback(p))); }))
    GTEST_SKIP() << "no ::1 and 127.0.0.1 listeners on one port here";
  dns_.set("soon.test", {.a = {"127.0.0.1"}, .aaaa = {"::1"}, .aaaa_delay = 20ms});
  dns_.set("late.test", {.a = {"127.0.0.1"}, .aaaa = {"::1"}, .aaaa_delay = 400ms});
  run([](std::uint16_t port) -> task<> {
    auto soon = co_await with_timeout(tcp_stream::connect("soon.test", port, {.resolution_delay = 200ms}), 5s);
    CO_ASSERT_OK(soon);
    EXPECT_TRUE(soon->peer_address()->is_ipv6());
    const auto start = now();
    auto late = co_await with_timeout(tcp_stream::connect("late.test", port, {.resolution_delay = 50ms}), 5s);
    CO_ASSERT_OK(late);
    EXPECT_TRUE(late->peer_address()->is_ipv4());  // A did not wait for AAAA beyond the delay
    EXPECT_LT(now() - start, 350ms);
  }(v6->port()), options(false));
}

}  // namespace
}  // namespace cogwheel::io_test
