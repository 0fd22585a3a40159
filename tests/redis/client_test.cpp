// The Redis client against a real redis-server started by the test: replies of every type,
// pipelining, timeouts that keep the connection in step, fail-fast while disconnected,
// reconnection, EVALSHA with EVAL fallback, and a stopped (SIGSTOP) server.
#include <cogwheel/redis/client.hpp>
#include <cogwheel/redis/script.hpp>

#include <cogwheel/cogwheel.hpp>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../io/support.hpp"
#include "queue_fixture.hpp"

namespace cogwheel::redis_test {
namespace {

using namespace std::chrono_literals;
using io_test::scaled;

using redis_client = queue_test;  // a fresh redis-server per test

// The harness itself: a port another process listens on (it accepts and never answers, as a
// parallel test's server may) is not taken for the redis-server started there. That server
// cannot bind and exits: start() says so instead of hanging on the stranger's silence.
TEST(redis_server_harness, a_port_another_process_holds_is_not_taken_for_the_server) {
  if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed";
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  redis_server taken(server_config{.port = ntohs(a.sin_port)});
  EXPECT_FALSE(taken.running());
  redis_server other;  // a port of its own
  EXPECT_TRUE(other.running());
  EXPECT_NE(other.port(), ntohs(a.sin_port));
  ::close(fd);
}

TEST_F(redis_client, replies_of_every_type_arrive_as_sent) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    auto set = co_await c->command("SET", "k", "value");
    CO_ASSERT_OK(set);
    EXPECT_TRUE(set->is_status());
    EXPECT_EQ(set->str(), "OK");
    auto get = co_await c->command("GET", "k");
    CO_ASSERT_OK(get);
    EXPECT_EQ(get->str(), "value");
    auto missing = co_await c->command("GET", "nothing");
    CO_ASSERT_OK(missing);
    EXPECT_TRUE(missing->is_nil());
    auto zadd = co_await c->command("ZADD", "z", 1.5, "a", 2, "b");
    CO_ASSERT_OK(zadd);
    EXPECT_EQ(zadd->integer(), 2);
    auto range = co_await c->command("ZRANGE", "z", 0, -1, "WITHSCORES");
    CO_ASSERT_OK(range);
    CO_ASSERT_TRUE(range->is_array() && range->size() == 4);
    EXPECT_EQ(range->elements()[0].str(), "a");
    EXPECT_EQ(range->elements()[1].to_double(), 1.5);
    EXPECT_EQ(range->elements()[3].to_integer(), 2);
  }());
}

TEST_F(redis_client, error_replies_are_error_codes_of_the_redis_category) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    CO_ASSERT_OK(co_await c->command("SET", "s", "x"));
    auto wrong = co_await c->command("LPUSH", "s", "y");
    EXPECT_EQ(wrong.error(), redis::error::wrong_type);
    auto unknown = co_await c->command("NOSUCHCOMMAND");
    EXPECT_EQ(unknown.error(), redis::error::server_error);
    EXPECT_STREQ(unknown.error().category().name(), "cogwheel.redis");
    auto after = co_await c->command("GET", "s");  // the connection is still in step
    CO_ASSERT_OK(after);
    EXPECT_EQ(after->str(), "x");
  }());
}

TEST_F(redis_client, pipelined_commands_each_get_their_own_reply) {
  const int n = scaled(2000);
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    auto one = [&](int i) -> task<void> {
      const std::string key = "p" + std::to_string(i);
      const std::string value = "v" + std::to_string(i * 7);
      auto set = co_await c->command("SET", key, value);
      EXPECT_TRUE(set.has_value());
      auto get = co_await c->command("GET", key);
      CO_ASSERT_OK(get);
      EXPECT_EQ(get->str(), value);
    };
    std::vector<task<void>> all;
    for (int i = 0; i < n; ++i) all.push_back(one(i));
    co_await when_all(std::move(all));
    auto size = co_await c->command("DBSIZE");
    CO_ASSERT_OK(size);
    EXPECT_EQ(size->integer(), n);
  }());
}

TEST_F(redis_client, a_timed_out_command_reply_is_discarded_and_no_other_command_gets_it) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    // BLPOP on an empty list answers nil after 0.3 s; the command gives up after 20 ms.
    auto slow = co_await with_timeout(c->command("BLPOP", "empty", 0.3), 20ms);
    EXPECT_EQ(slow.error(), errc::timed_out);
    // Issued behind it: its reply is the one after BLPOP's nil, which is discarded.
    auto echo = co_await c->command("ECHO", "mine");
    CO_ASSERT_OK(echo);
    EXPECT_EQ(echo->str(), "mine");
    EXPECT_EQ(c->stats().discarded_replies, 1u);
    // Many in flight, every other one timed out at once: the others keep their own replies.
    auto maybe = [&](int i) -> task<void> {
      const std::string tag = "t" + std::to_string(i);
      if (i % 2 == 0) {
        auto r = co_await with_timeout(c->command("ECHO", tag), 0ms);
        if (r) {
          EXPECT_EQ(r->str(), tag);
        }
      } else {
        auto r = co_await c->command("ECHO", tag);
        CO_ASSERT_OK(r);
        EXPECT_EQ(r->str(), tag);
      }
    };
    std::vector<task<void>> all;
    for (int i = 0; i < 200; ++i) all.push_back(maybe(i));
    co_await when_all(std::move(all));
    EXPECT_EQ(c->stats().connects, 1u);
  }());
}

TEST_F(redis_client, commands_fail_fast_while_disconnected_and_work_again_after_reconnect) {
  run([&]() -> task<void> {
    auto opts = options();
    opts.reconnect_initial = 5ms;
    opts.reconnect_max = 50ms;
    auto c = co_await redis::client::connect(opts);
    CO_ASSERT_OK(c);
    CO_ASSERT_OK(co_await c->command("PING"));
    server_->kill();
    auto lost = co_await with_timeout(c->command("PING"), 2s);
    EXPECT_TRUE(lost.error() == redis::error::connection_lost || lost.error() == redis::error::not_connected)
        << lost.error().message();
    // Not a timeout: while disconnected a command fails at once.
    auto fast = co_await with_timeout(c->command("PING"), 1s);
    EXPECT_EQ(fast.error(), redis::error::not_connected);
    EXPECT_FALSE(c->connected());
    CO_ASSERT_TRUE(server_->start());
    bool back = false;
    for (int i = 0; i < 400 && !back; ++i) {
      co_await sleep_for(10ms);
      back = c->connected() && (co_await c->command("PING")).has_value();
    }
    EXPECT_TRUE(back);
    EXPECT_GE(c->stats().connects, 2u);
  }());
}

TEST_F(redis_client, a_script_runs_by_evalsha_and_falls_back_to_eval_after_a_script_flush) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    redis::script add("return tonumber(ARGV[1]) + tonumber(ARGV[2])");
    const redis::command_arg args[] = {40, 2};
    auto r = co_await add.run(*c, {}, args);
    CO_ASSERT_OK(r);
    EXPECT_EQ(r->integer(), 42);
    EXPECT_EQ(add.sha1().size(), 40u);
    CO_ASSERT_OK(co_await c->command("SCRIPT", "FLUSH"));
    auto again = co_await add.run(*c, {}, args);  // NOSCRIPT, then EVAL
    CO_ASSERT_OK(again);
    EXPECT_EQ(again->integer(), 42);
    auto cached = co_await c->command("SCRIPT", "EXISTS", add.sha1());
    CO_ASSERT_OK(cached);
    EXPECT_EQ(cached->elements()[0].integer(), 1);
  }());
}

TEST_F(redis_client, a_stopped_server_times_commands_out_and_after_sigcont_the_client_recovers_without_reconnecting) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    CO_ASSERT_OK(co_await c->command("SET", "k", "before"));
    server_->signal(SIGSTOP);
    auto one = [&](int i) -> task<void> {
      const auto start = clock::now();
      auto r = co_await with_timeout(c->command("ECHO", std::to_string(i)), 50ms);
      EXPECT_EQ(r.error(), errc::timed_out);
      EXPECT_GE(clock::now() - start, 50ms);  // at its deadline, not before
    };
    std::vector<task<void>> all;
    for (int i = 0; i < 50; ++i) all.push_back(one(i));
    co_await when_all(std::move(all));
    EXPECT_TRUE(c->connected());
    server_->signal(SIGCONT);
    auto after = co_await with_timeout(c->command("GET", "k"), 5s);
    CO_ASSERT_OK(after);
    EXPECT_EQ(after->str(), "before");
    EXPECT_EQ(c->stats().connects, 1u);
    EXPECT_EQ(c->stats().connect_failures, 0u);
    EXPECT_EQ(c->stats().discarded_replies, 50u);
  }());
}

TEST_F(redis_client, a_client_that_outlives_its_loop_is_closed_without_touching_destroyed_frames) {
  redis::client kept;
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    kept = std::move(*c);
    CO_ASSERT_OK(co_await kept.command("PING"));
  }());
  // The loop has destroyed the session, reader and writer frames; closing now must not wake
  // their (gone) sleeps.
  kept.close();
  EXPECT_FALSE(kept.connected());
}

TEST_F(redis_client, commands_that_would_shift_the_replies_are_refused_unsent) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    CO_ASSERT_OK(co_await c->command("SET", "k", "mine"));
    const auto invalid = std::make_error_code(errc::invalid_argument);
    EXPECT_EQ((co_await c->command(std::span<const redis::command_arg>())).error(), invalid);
    EXPECT_EQ((co_await c->command("SUBSCRIBE", "a", "b")).error(), invalid);
    EXPECT_EQ((co_await c->command("psubscribe", "a*")).error(), invalid);
    EXPECT_EQ((co_await c->command("MONITOR")).error(), invalid);
    EXPECT_EQ((co_await c->command("HELLO", 3)).error(), invalid);
    // Nothing was sent: every later reply goes to its own command.
    auto ping = co_await c->command("PING");
    CO_ASSERT_OK(ping);
    EXPECT_EQ(ping->str(), "PONG");
    auto get = co_await c->command("GET", "k");
    CO_ASSERT_OK(get);
    EXPECT_EQ(get->str(), "mine");
  }());
}

TEST_F(redis_client, a_script_reply_nested_deeper_than_hiredis_allows_keeps_the_connection) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    // Ten levels of Lua tables (hiredis 0.14 stops at 7), pipelined with a PING behind it.
    auto deep = [&]() -> task<result<redis::reply>> {
      co_return co_await c->command("EVAL", "return {{{{{{{{{{42}}}}}}}}}}", 0);
    };
    auto ping = [&]() -> task<result<redis::reply>> { co_return co_await c->command("PING"); };
    auto [d, p] = co_await when_all(deep(), ping());
    CO_ASSERT_OK(d);
    const redis::reply* r = &*d;
    for (int i = 0; i < 10; ++i) {
      CO_ASSERT_TRUE(r->is_array() && r->size() == 1u);
      r = &(*r)[0];
    }
    EXPECT_EQ(r->integer(), 42);
    CO_ASSERT_OK(p);
    EXPECT_EQ(p->str(), "PONG");
    EXPECT_EQ(c->stats().connects, 1u);
  }());
}

// Commands cut by their timeouts while their 4 MiB replies stream in (the cut lands before,
// during or after the reply's bytes are read): the replies are read to their end and dropped,
// and the command behind each gets its own reply, on the same connection.
TEST_F(redis_client, commands_cut_while_their_large_replies_are_half_read_leave_the_others_in_step) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    const std::string big(4 << 20, 'b');
    CO_ASSERT_OK(co_await c->command("SET", "big", big));
    int cut = 0;
    for (int i = 0; i < 40; ++i) {
      auto get = [&]() -> task<void> {
        auto r = co_await with_timeout(c->command("GET", "big"), std::chrono::microseconds(250 * i));
        if (r) EXPECT_EQ(r->str().size(), big.size()); else ++cut;
      };
      auto echo = [&]() -> task<void> {
        auto r = co_await c->command("ECHO", i);
        CO_ASSERT_OK(r);
        EXPECT_EQ(r->str(), std::to_string(i));
      };
      co_await when_all(get(), echo());
    }
    EXPECT_GT(cut, 0);
    EXPECT_EQ(c->stats().discarded_replies, static_cast<std::uint64_t>(cut));
    EXPECT_EQ(c->stats().connects, 1u);
  }());
}

}  // namespace
}  // namespace cogwheel::redis_test
