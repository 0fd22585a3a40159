// The Redis client by host name: the name is resolved by a DNS server of the test's own
// (tests/support/fake_dns.hpp) at the first connection and again at every reconnection, so a
// server that moves to a new address is found once DNS answers it; a name that does not
// resolve fails with the resolver's own error; connect_timeout (and a with_timeout around
// connect) bounds the resolution and the connection together, exactly on the paused clock.
#include <cogwheel/redis/client.hpp>

#include <cogwheel/cogwheel.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../support/co_assert.hpp"
#include "../support/fake_dns.hpp"
#include "../support/temp_file.hpp"
#include "redis_server.hpp"

namespace cogwheel::redis_test {
namespace {

using namespace std::chrono_literals;
using test_support::fake_dns;
using test_support::temp_file;

class redis_by_name : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed";
    if (!dns_.ok()) GTEST_SKIP() << "cannot listen on a loopback port for the fake DNS server";
  }
  // Names are asked of dns_ only: no search list, an empty hosts file.
  runtime_options options(bool paused = false) const {
    runtime_options o;
    o.paused_clock = paused;
    o.resolver.servers = {dns_.server()};
    o.resolver.search = std::vector<std::string>{};
    o.resolver.ndots = 1;
    o.resolver.timeout = 2000ms;
    o.resolver.attempts = 1;
    o.resolver.hosts_file = hosts_.path();
    return o;
  }
  fake_dns dns_;
  temp_file hosts_{""};
};

// On the paused clock, within the tick the timer fires in (as tests/io/happy_eyeballs_test.cpp).
void expect_at(clock::duration elapsed, clock::duration expected) {
  EXPECT_GE(elapsed, expected);
  EXPECT_LT(elapsed, expected + 1ms);
}

// Options built outside the coroutine: g++ 12 relocates a braced client_options temporary
// written inside a co_await's operand bitwise (a short std::string then points into the dead
// copy), so the tests name theirs.
redis::client_options by_name(std::string host, std::uint16_t port,
                              std::chrono::milliseconds connect_timeout = std::chrono::milliseconds(2000)) {
  redis::client_options o;
  o.host = std::move(host);
  o.port = port;
  o.connect_timeout = connect_timeout;
  o.reconnect_max = std::chrono::milliseconds(50);
  return o;
}

TEST_F(redis_by_name, a_name_connects_and_a_reconnection_resolves_it_again) {
  // Two servers on one port, at 127.0.0.1 and 127.0.0.2, both started before the client runs:
  // a free port for the first may be taken at 127.0.0.2 (or the wildcard) by another process, so
  // the pair is retried on another port rather than failing the test mid-way.
  std::optional<redis_server> first, second;
  for (int attempt = 0; attempt < 5 && !(second && second->running()); ++attempt) {
    second.reset();
    first.emplace();
    ASSERT_TRUE(first->running());
    second.emplace(server_config{.bind = "127.0.0.2", .port = first->port()});
  }
  ASSERT_TRUE(second->running());
  const std::uint16_t port = first->port();
  // TTL 0: nothing cached, every connection asks.
  dns_.set("redis.test", {.a = {"127.0.0.1"}, .ttl = 0});
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(by_name("redis.test", port));
    CO_ASSERT_OK(c);
    CO_ASSERT_OK(co_await c->command("SET", "where", "first"));
    const int asked = dns_.queries("redis.test", 1);
    EXPECT_GE(asked, 1);
    // The server moves to 127.0.0.2 (same port) and DNS says so; the old one goes away.
    dns_.set("redis.test", {.a = {"127.0.0.2"}, .ttl = 0});
    first->kill();
    // Commands fail while the client notices and reconnects; then they reach the new server.
    result<redis::reply> where = make_error_code(redis::error::not_connected);
    for (int i = 0; i < 500; ++i) {
      where = co_await with_timeout(c->command("GET", "where"), 1s);
      if (where) break;
      co_await sleep_for(10ms);
    }
    CO_ASSERT_OK(where);
    EXPECT_TRUE(where->is_nil()) << "still the first server: " << where->str();
    EXPECT_GT(dns_.queries("redis.test", 1), asked);  // resolved again
    EXPECT_GE(c->stats().connects, 2u);
    CO_ASSERT_OK(co_await c->command("SET", "where", "second"));
  }(), options());
}

TEST_F(redis_by_name, a_name_that_does_not_resolve_fails_with_the_resolvers_error) {
  dns_.set("broken.test", {.what = fake_dns::kind::servfail});
  run([&]() -> task<void> {
    auto missing = co_await redis::client::connect(by_name("nosuch.test", 6379));
    EXPECT_EQ(missing.error(), resolve_errc::not_found);
    EXPECT_STREQ(missing.error().category().name(), "cogwheel.resolve");
    auto broken = co_await redis::client::connect(by_name("broken.test", 6379));
    EXPECT_EQ(broken.error(), resolve_errc::server_failure);
  }(), options());
}

TEST_F(redis_by_name, connect_timeout_bounds_resolution_and_connection_together) {
  dns_.set("silent.test", {.what = fake_dns::kind::silent});
  run([&]() -> task<void> {
    auto start = now();
    auto own = co_await redis::client::connect(by_name("silent.test", 6379, 300ms));
    EXPECT_EQ(own.error(), errc::timed_out);
    expect_at(now() - start, 300ms);
    start = now();
    auto outer = co_await with_timeout(redis::client::connect(by_name("silent.test", 6379)), 120ms);
    EXPECT_EQ(outer.error(), errc::timed_out);
    expect_at(now() - start, 120ms);
  }(), options(/*paused=*/true));
}

// g++ 12 mishandles an aggregate temporary written inside a co_await's operand (it is copied
// bitwise and destroyed twice): options left at their defaults must survive that, as they did
// before client_options had a host (an empty std::string would be freed at a frame's address).
TEST_F(redis_by_name, options_braced_inside_the_await_with_host_unset_are_safe) {
  redis_server server;
  ASSERT_TRUE(server.running());
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect({.address = socket_address::ipv4_loopback(server.port())});
    CO_ASSERT_OK(c);
    CO_ASSERT_OK(co_await c->command("PING"));
  }(), options());
}

}  // namespace
}  // namespace cogwheel::redis_test
