// The Redis client against a fake server (a tcp_listener in the test) that answers with bytes
// a real server never sends: truncated replies, bytes that are not RESP, bulk strings and
// arrays announced larger than the client's bounds. Each gives a clear error, no crash and no
// unbounded buffer, and the client carries on (reconnecting).
#include <cogwheel/redis/client.hpp>

#include <cogwheel/cogwheel.hpp>

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "../io/support.hpp"

namespace cogwheel::redis_test {
namespace {

using namespace std::chrono_literals;

// Accepts connections one after another; on each, reads a command and answers `answer`, then
// closes the connection if `close_after`, else keeps it open (reading and ignoring) until the
// client goes. stream_more: after the answer, keeps sending filler bytes while the client reads.
struct fake_server {
  tcp_listener listener;
  std::string answer;
  bool close_after = false;
  bool stream_more = false;
  std::string extra_after;  // sent 20 ms after the answer, unasked

  task<void> serve_one(tcp_stream s) {
    std::byte buf[4096];
    auto n = co_await s.read(buf);
    if (!n || *n == 0) co_return;
    if (!co_await s.write_all(std::as_bytes(std::span(answer.data(), answer.size())))) co_return;
    if (stream_more) {
      const std::string filler(65536, 'x');
      for (int i = 0; i < 64; ++i)
        if (!co_await s.write_all(std::as_bytes(std::span(filler.data(), filler.size())))) co_return;
    }
    if (!extra_after.empty()) {
      co_await sleep_for(20ms);
      if (!co_await s.write_all(std::as_bytes(std::span(extra_after.data(), extra_after.size())))) co_return;
    }
    if (close_after) co_return;
    while (true) {
      auto more = co_await s.read(buf);
      if (!more || *more == 0) co_return;
    }
  }
  task<void> serve() {
    while (true) {
      auto s = co_await listener.accept();
      if (!s) co_return;
      spawn(serve_one(std::move(*s)));
    }
  }
};

result<fake_server*> start(fake_server& f, std::string answer) {
  auto l = tcp_listener::bind(socket_address::ipv4_loopback(0));
  if (!l) return l.error();
  f.listener = std::move(*l);
  f.answer = std::move(answer);
  spawn(f.serve());
  return &f;
}

redis::client_options options_for(const fake_server& f, std::size_t max_bytes = 64u << 20) {
  redis::client_options o;
  o.address = f.listener.local_address();
  o.max_reply_bytes = max_bytes;
  o.reconnect_initial = 1000ms;  // no reconnection during the test
  return o;
}

// Issues one command against a server answering `answer` and returns its outcome.
std::error_code outcome_of(std::string answer, bool close_after, std::size_t max_bytes = 64u << 20,
                           bool stream_more = false) {
  return run([&]() -> task<std::error_code> {
    fake_server f;
    f.close_after = close_after;
    f.stream_more = stream_more;
    auto started = start(f, std::move(answer));
    if (!started) co_return started.error();
    auto c = co_await redis::client::connect(options_for(f, max_bytes));
    if (!c) co_return c.error();
    auto r = co_await with_timeout(c->command("GET", "k"), 5s);
    const std::error_code ec = r.error();
    // The connection was dropped: the next command fails at once instead of waiting.
    if (ec && ec != errc::timed_out) {
      auto next = co_await with_timeout(c->command("PING"), 1s);
      EXPECT_EQ(next.error(), redis::error::not_connected);
    }
    f.listener.close();
    co_return ec;
  }());
}

TEST(redis_fake_server, a_well_formed_reply_is_returned) {
  EXPECT_FALSE(outcome_of("$5\r\nhello\r\n", false));
}

TEST(redis_fake_server, a_truncated_reply_then_close_is_a_lost_connection) {
  EXPECT_EQ(outcome_of("$10\r\nhel", true), redis::error::connection_lost);
}

TEST(redis_fake_server, bytes_that_are_not_resp_are_a_protocol_error) {
  EXPECT_EQ(outcome_of("?what is this\r\n", false), redis::error::protocol_error);
}

TEST(redis_fake_server, a_bad_length_is_a_protocol_error) {
  EXPECT_EQ(outcome_of("$abc\r\n", false), redis::error::protocol_error);
}

// Lengths beyond what hiredis can parse are its protocol errors; within, they are ours.
bool refused(std::error_code ec) {
  return ec == redis::error::reply_too_large || ec == redis::error::protocol_error;
}

TEST(redis_fake_server, a_huge_bulk_length_is_refused_before_its_bytes_are_buffered) {
  EXPECT_EQ(outcome_of("$99999999999\r\n", false), redis::error::reply_too_large);
  EXPECT_EQ(outcome_of("*2\r\n$1\r\na\r\n$99999999999\r\n", false), redis::error::reply_too_large);
  EXPECT_TRUE(refused(outcome_of("$99999999999999999999999\r\n", false)));
}

TEST(redis_fake_server, a_bulk_over_the_bound_is_refused_while_its_bytes_stream_in) {
  // Announced at 1 MiB + the filler the server streams; the client's bound is 256 KiB.
  EXPECT_EQ(outcome_of("$1048576\r\n", false, 256u << 10, true), redis::error::reply_too_large);
}

TEST(redis_fake_server, a_huge_array_count_is_refused_without_allocating_it) {
  EXPECT_EQ(outcome_of("*20000000\r\n", false), redis::error::reply_too_large);
  EXPECT_EQ(outcome_of("*1\r\n*20000000\r\n", false), redis::error::reply_too_large);
  EXPECT_TRUE(refused(outcome_of("*2147483647\r\n", false)));
  EXPECT_TRUE(refused(outcome_of("*-5\r\n", false)));
}

TEST(redis_fake_server, a_header_line_without_end_is_refused) {
  EXPECT_EQ(outcome_of("$" + std::string(100, '9'), false), redis::error::reply_too_large);
}

TEST(redis_fake_server, a_reply_nobody_asked_for_drops_the_connection) {
  run([&]() -> task<void> {
    fake_server f;
    f.extra_after = "+EXTRA\r\n";
    CO_ASSERT_OK(start(f, "+OK\r\n"));
    auto c = co_await redis::client::connect(options_for(f));
    CO_ASSERT_OK(c);
    auto ok = co_await c->command("GET", "k");
    CO_ASSERT_OK(ok);
    EXPECT_EQ(ok->str(), "OK");
    for (int i = 0; i < 200 && c->connected(); ++i) co_await sleep_for(5ms);
    EXPECT_FALSE(c->connected());
    auto next = co_await c->command("PING");
    EXPECT_EQ(next.error(), redis::error::not_connected);
    f.listener.close();
  }());
}

}  // namespace
}  // namespace cogwheel::redis_test
