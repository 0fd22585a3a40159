// The Redis client over TLS (client_options::tls) against redis-server's TLS port, with a CA and
// certificates the test makes with the openssl tool (tests/tls/make_certs.sh) in a temporary
// directory. Skipped when redis-server, openssl, or TLS in redis-server's build is missing.
// Commands and pipelining over TLS; the certificate checked for the name (IP or DNS); a name
// mismatch fails the connection with tls::error::name_mismatch; connect_timeout cuts a
// handshake the server never answers; a command cut by its timeout (the server stopped)
// leaves the TLS session whole, and a lost connection reconnects with a new handshake.
#include <cogwheel/redis/client.hpp>
#include <cogwheel/tls/context.hpp>
#include <cogwheel/tls/error.hpp>

#include <cogwheel/cogwheel.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "../support/co_assert.hpp"
#include "redis_server.hpp"

namespace cogwheel::redis_test {
namespace {

using namespace std::chrono_literals;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class redis_tls : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed";
    if (std::system("command -v openssl >/dev/null 2>&1") != 0) GTEST_SKIP() << "the openssl tool is not installed";
    ASSERT_TRUE(redis::tls_supported());  // this test is built only with cogwheel::tls
    char tmpl[] = "/tmp/cogwheel-redis-tls-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    const std::string make = std::string("sh ") + COGWHEEL_TLS_CERTS_SCRIPT + " " + dir_;
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
    server_ = std::make_unique<redis_server>(server_config{
        .tls_cert = dir_ + "/server.pem", .tls_key = dir_ + "/server.key", .tls_ca = dir_ + "/ca.pem"});
    if (!server_->running()) GTEST_SKIP() << "redis-server does not start with --tls-port (built without TLS?)";
    auto ctx = tls::context::client();
    ASSERT_TRUE(ctx);
    ASSERT_TRUE(ctx->trust(slurp(dir_ + "/ca.pem")));
    context_ = std::make_shared<const tls::context>(std::move(*ctx));
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  // TLS to the server's port on 127.0.0.1, checked for `name` (empty: the IP).
  redis::client_options options(std::string name = {}) const {
    redis::client_options o;
    o.address = socket_address::ipv4_loopback(server_->port());
    o.tls = redis::client_tls{context_, std::move(name)};
    o.reconnect_max = 50ms;
    return o;
  }
  std::string dir_;
  std::unique_ptr<redis_server> server_;
  std::shared_ptr<const tls::context> context_;
};

TEST_F(redis_tls, commands_and_pipelines_go_over_tls) {
  run([&]() -> task<void> {
    for (const std::string name : {"", "localhost"}) {  // the IP's certificate entry, then DNS
      auto c = co_await redis::client::connect(options(name));
      CO_ASSERT_OK(c);
      CO_ASSERT_OK(co_await c->command("SET", "k", "over tls"));
      auto get = co_await c->command("GET", "k");
      CO_ASSERT_OK(get);
      EXPECT_EQ(get->str(), "over tls");
      int ok = 0;
      auto one = [&](int i) -> task<void> {
        auto r = co_await c->command("INCRBY", "n", i);
        if (r) ++ok;
      };
      std::vector<task<void>> many;
      for (int i = 0; i < 200; ++i) many.push_back(one(i));
      co_await when_all(std::move(many));
      EXPECT_EQ(ok, 200);
    }
  }());
}

TEST_F(redis_tls, a_certificate_for_another_name_is_refused) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options("other.example"));
    EXPECT_EQ(c.error(), tls::error::name_mismatch) << c.error().message();
  }());
}

// A TLS server name with a NUL (or anything else that is not a host name) fails the connect
// with errc::invalid_argument before anything is connected: cut at the NUL it would be checked
// as "localhost". Needs no server: a listener that never speaks TLS would otherwise hold the
// handshake until connect_timeout. A host with a NUL (the name TLS uses when server_name is
// empty) is refused by connect(host, port) before any lookup.
TEST(redis_tls_names, a_server_name_that_is_not_a_host_name_is_refused_before_connecting) {
  auto silent = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(silent);
  auto ctx = tls::context::client();
  ASSERT_TRUE(ctx);
  auto shared = std::make_shared<const tls::context>(std::move(*ctx));
  run([&]() -> task<void> {
    for (const std::string& name : {std::string("localhost\0.evil.example", 23), std::string("local host"),
                                   std::string("localhost..")}) {
      redis::client_options o;
      o.address = silent->local_address();
      o.tls = redis::client_tls{shared, name};
      o.connect_timeout = 200ms;
      auto c = co_await redis::client::connect(o);
      CO_ASSERT_TRUE(!c);
      EXPECT_EQ(c.error(), errc::invalid_argument) << c.error().message();
    }
    redis::client_options by_host;
    by_host.host = std::string("localhost\0.evil.example", 23);
    by_host.port = silent->local_address().port();
    by_host.tls = redis::client_tls{shared, {}};
    by_host.connect_timeout = 200ms;
    auto c = co_await redis::client::connect(by_host);
    CO_ASSERT_TRUE(!c);
    EXPECT_EQ(c.error(), resolve_errc::bad_name) << c.error().message();
  }(), runtime_options{.paused_clock = true});
}

TEST_F(redis_tls, connect_timeout_cuts_a_handshake_nobody_answers) {
  // A listener that accepts (the kernel does) and never speaks TLS.
  auto silent = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(silent);
  redis::client_options o = options("localhost");
  o.address = silent->local_address();
  o.connect_timeout = 200ms;
  run([&]() -> task<void> {
    const auto start = now();
    auto c = co_await redis::client::connect(o);
    EXPECT_EQ(c.error(), errc::timed_out);
    EXPECT_GE(now() - start, 200ms);
    EXPECT_LT(now() - start, 201ms);
  }(), runtime_options{.paused_clock = true});
}

TEST_F(redis_tls, a_command_cut_by_its_timeout_keeps_the_session_and_a_lost_one_reconnects) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options("localhost"));
    CO_ASSERT_OK(c);
    CO_ASSERT_OK(co_await c->command("SET", "k", "v"));
    server_->signal(SIGSTOP);
    auto cut = co_await with_timeout(c->command("GET", "k"), 50ms);
    EXPECT_EQ(cut.error(), errc::timed_out);
    server_->signal(SIGCONT);
    auto after = co_await with_timeout(c->command("GET", "k"), 5s);  // the same session
    CO_ASSERT_OK(after);
    EXPECT_EQ(after->str(), "v");
    EXPECT_EQ(c->stats().connects, 1u);
    EXPECT_EQ(c->stats().discarded_replies, 1u);
    // Restarted on its port: the client reconnects with a new handshake.
    server_->kill();
    CO_ASSERT_TRUE(server_->start());
    result<redis::reply> pong = make_error_code(redis::error::not_connected);
    for (int i = 0; i < 500 && !pong; ++i) {
      pong = co_await with_timeout(c->command("PING"), 1s);
      if (!pong) co_await sleep_for(10ms);
    }
    CO_ASSERT_OK(pong);
    EXPECT_EQ(pong->str(), "PONG");
    EXPECT_EQ(c->stats().connects, 2u);
  }());
}

}  // namespace
}  // namespace cogwheel::redis_test
