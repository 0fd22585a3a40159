// The client's Pub/Sub and a deep pipeline against a real redis-server, at scale and with
// hostile data: a reply shaped like a Pub/Sub message on a client without subscriptions,
// messages to a client without on_message, 100,000 subscriptions on one connection, a flood of
// messages, and 10,000 commands in flight when the connection is killed.
#include <cogwheel/redis/client.hpp>

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

using redis_pubsub = queue_test;  // a fresh redis-server per test

// Before: every reply that looked like a message (an array "message", channel, text) went to
// on_message when one was set, so data shaped like it (a list read by LRANGE) never reached its
// command, and each later command got the reply of the one after it. Only a client with
// subscriptions receives messages now.
TEST_F(redis_pubsub, a_reply_shaped_like_a_message_goes_to_its_command_on_a_client_without_subscriptions) {
  run([&]() -> task<void> {
    int messages = 0;
    auto o = options();
    o.on_message = [&](std::string_view, std::string_view) { ++messages; };
    auto c = co_await redis::client::connect(std::move(o));
    CO_ASSERT_OK(c);
    CO_ASSERT_OK(co_await c->command("RPUSH", "l", "message", "channel", "text"));
    auto l = co_await with_timeout(c->command("LRANGE", "l", 0, -1), 2s);
    CO_ASSERT_OK(l);
    CO_ASSERT_TRUE(l->is_array() && l->size() == 3u);
    EXPECT_EQ((*l)[2].str(), "text");
    auto e = co_await with_timeout(c->command("ECHO", "after"), 2s);
    CO_ASSERT_OK(e);
    EXPECT_EQ(e->str(), "after");
    EXPECT_EQ(messages, 0);
  }());
}

// Before: a client subscribed without on_message took each message for a reply nobody asked
// for and dropped the connection (unexpected_reply), reconnected, subscribed, and dropped it
// again at the next message. The messages are dropped now, and the connection kept.
TEST_F(redis_pubsub, messages_to_a_client_without_on_message_keep_its_connection) {
  run([&]() -> task<void> {
    auto o = options();
    o.subscriptions = {"ch"};
    auto sub = co_await redis::client::connect(std::move(o));
    CO_ASSERT_OK(sub);
    auto pub = co_await redis::client::connect(options());
    CO_ASSERT_OK(pub);
    for (int i = 0; i < 50; ++i) {
      auto n = co_await pub->command("PUBLISH", "ch", i);
      CO_ASSERT_OK(n);
      if (n->integer() == 0) co_await sleep_for(10ms);  // not subscribed yet
    }
    auto ping = co_await with_timeout(sub->command("PING"), 2s);  // ["pong", ""] when subscribed
    CO_ASSERT_OK(ping);
    EXPECT_TRUE(sub->connected());
    EXPECT_EQ(sub->stats().connects, 1u);
  }());
}

// Held: 100,000 channels subscribed on one connection (every confirmation read and dropped), a
// message on the last one delivered, and a flood of 100,000 messages published in pipelined
// batches received whole (the reader hands each to on_message as it is parsed: what it buffers
// is bounded by max_reply_bytes, whatever the publisher's rate).
TEST_F(redis_pubsub, a_hundred_thousand_subscriptions_and_a_flood_of_messages) {
  const int channels = scaled(100000);
  const int flood = scaled(100000);
  run([&]() -> task<void> {
    int got = 0;
    std::string last;
    auto o = options();
    for (int i = 0; i < channels; ++i) o.subscriptions.push_back("c" + std::to_string(i));
    o.on_message = [&](std::string_view channel, std::string_view m) {
      ++got;
      last = std::string(channel) + "=" + std::string(m);
    };
    auto sub = co_await redis::client::connect(std::move(o));
    CO_ASSERT_OK(sub);
    auto pub = co_await redis::client::connect(options());
    CO_ASSERT_OK(pub);
    const std::string final_channel = "c" + std::to_string(channels - 1);
    for (int i = 0; i < 500; ++i) {  // the subscriptions take a while
      auto n = co_await pub->command("PUBLISH", final_channel, "first");
      CO_ASSERT_OK(n);
      if (n->integer() == 1) break;
      co_await sleep_for(10ms);
    }
    for (int i = 0; i < 500 && got == 0; ++i) co_await sleep_for(10ms);
    CO_ASSERT_TRUE(got == 1);
    EXPECT_EQ(last, final_channel + "=first");
    auto batch = [&](int from) -> task<void> {
      for (int i = from; i < flood; i += 100) EXPECT_TRUE(co_await pub->command("PUBLISH", "c7", i));
    };
    std::vector<task<void>> all;
    for (int b = 0; b < 100; ++b) all.push_back(batch(b));
    co_await when_all(std::move(all));
    for (int i = 0; i < 1000 && got < flood + 1; ++i) co_await sleep_for(10ms);
    EXPECT_EQ(got, flood + 1);
    EXPECT_EQ(sub->stats().connects, 1u);
    EXPECT_EQ(sub->stats().discarded_replies, static_cast<std::uint64_t>(channels));
  }());
}

// Held: 10,000 commands in flight behind a blocked BLPOP when the server kills the connection:
// every one fails (none hangs, none gets another's reply), and the client reconnects.
TEST_F(redis_pubsub, ten_thousand_commands_in_flight_all_fail_when_the_connection_is_killed) {
  const int n = scaled(10000);
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    auto admin = co_await redis::client::connect(options());
    CO_ASSERT_OK(admin);
    auto id = co_await c->command("CLIENT", "ID");
    CO_ASSERT_OK(id);
    int failed = 0, answered = 0;
    auto one = [&](int i) -> task<void> {
      auto r = i == 0 ? co_await c->command("BLPOP", "nothing", 0) : co_await c->command("ECHO", i);
      if (r) ++answered; else ++failed;
    };
    auto killer = [&]() -> task<void> {
      co_await sleep_for(100ms);
      auto k = co_await admin->command("CLIENT", "KILL", "ID", id->integer());
      EXPECT_TRUE(k.has_value());
    };
    std::vector<task<void>> all;
    for (int i = 0; i < n; ++i) all.push_back(one(i));
    all.push_back(killer());
    auto everyone = [&]() -> task<void> { co_await when_all(std::move(all)); };
    EXPECT_TRUE(co_await with_timeout(everyone(), 10s));
    EXPECT_EQ(failed, n);
    EXPECT_EQ(answered, 0);
    for (int i = 0; i < 200 && !c->connected(); ++i) co_await sleep_for(10ms);
    auto e = co_await c->command("ECHO", "again");
    CO_ASSERT_OK(e);
    EXPECT_EQ(e->str(), "again");
  }());
}

}  // namespace
}  // namespace cogwheel::redis_test
