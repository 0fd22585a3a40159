// The Redis client against a fake server (a tcp_listener in the test) that answers with bytes
// a real server never sends: truncated replies, bytes that are not RESP, bulk strings and
// arrays announced larger than the client's bounds. Each gives a clear error, no crash and no
// unbounded buffer, and the client carries on (reconnecting).
#include <cogwheel/redis/client.hpp>

#include <cogwheel/cogwheel.hpp>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "../io/support.hpp"

// The largest single allocation of the process, for the tests of what a reply header can make
// the client allocate.
namespace {
std::atomic<std::size_t> largest_allocation{0};
}  // namespace

void* operator new(std::size_t n) {
  std::size_t seen = largest_allocation.load(std::memory_order_relaxed);
  while (n > seen && !largest_allocation.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
  }
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
// Out of line: inlined, GCC would see a free() of what operator new returned.
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

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
  std::string greeting;     // sent on accept, before reading anything; then the connection closes
  std::vector<std::string> answers;  // if set: answers[i] to the i-th read of a connection
  int accepted = 0;

  task<void> serve_one(tcp_stream s) {
    std::byte buf[4096];
    if (!greeting.empty()) {
      (void)co_await s.write_all(std::as_bytes(std::span(greeting.data(), greeting.size())));
      co_return;
    }
    if (!answers.empty()) {
      for (const std::string& a : answers) {
        auto n = co_await s.read(buf);
        if (!n || *n == 0) co_return;
        if (!co_await s.write_all(std::as_bytes(std::span(a.data(), a.size())))) co_return;
      }
      while (true) {
        auto more = co_await s.read(buf);
        if (!more || *more == 0) co_return;
      }
    }
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
      ++accepted;
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

// Answers `answers` to successive commands on one connection; returns each command's outcome.
std::vector<result<redis::reply>> outcomes_of(std::vector<std::string> answers, redis::client_options base = {}) {
  return run([&]() -> task<std::vector<result<redis::reply>>> {
    std::vector<result<redis::reply>> out;
    fake_server f;
    const std::size_t n = answers.size();
    f.answers = std::move(answers);
    auto started = start(f, "");
    if (!started) co_return out;
    auto o = options_for(f, base.max_reply_bytes);
    o.max_reply_depth = base.max_reply_depth;
    auto c = co_await redis::client::connect(o);
    if (!c) co_return out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(co_await with_timeout(c->command("GET", "k"), 5s));
    EXPECT_TRUE(c->connected());
    f.listener.close();
    co_return out;
  }());
}

std::string nested(std::size_t depth, std::string_view leaf) {
  std::string s;
  for (std::size_t i = 0; i < depth; ++i) s += "*1\r\n";
  return s.append(leaf);
}

TEST(redis_fake_server, an_array_header_allocates_nothing_for_elements_that_have_not_arrived) {
  for (const char* header : {"*16777216\r\n", "*1\r\n*16777216\r\n", "*2\r\n:1\r\n*16000000\r\n:1\r\n"}) {
    largest_allocation = 0;
    const std::error_code ec = run([&]() -> task<std::error_code> {
      fake_server f;
      auto started = start(f, header);
      if (!started) co_return started.error();
      auto c = co_await redis::client::connect(options_for(f));
      if (!c) co_return c.error();
      // The rest never comes: the command waits, holding only what arrived.
      auto r = co_await with_timeout(c->command("GET", "k"), 100ms);
      f.listener.close();
      co_return r.error();
    }());
    EXPECT_EQ(ec, errc::timed_out) << header;
    EXPECT_LT(largest_allocation.load(), 1u << 20) << header;
  }
}

TEST(redis_fake_server, a_reply_whose_elements_outgrow_max_reply_bytes_is_refused_as_they_arrive) {
  // 200,000 small elements: 800 KB on the wire, ~15 MB once parsed; the bound is 1 MiB.
  std::string answer = "*200000\r\n";
  for (int i = 0; i < 200000; ++i) answer += ":1\r\n";
  EXPECT_EQ(outcome_of(answer, false, 1u << 20), redis::error::reply_too_large);
  // Within the bound it is returned whole.
  auto ok = outcomes_of({"*3\r\n:1\r\n$2\r\nab\r\n*-1\r\n"});
  ASSERT_EQ(ok.size(), 1u);
  ASSERT_TRUE(ok[0].has_value());
  EXPECT_EQ(ok[0]->size(), 3u);
  EXPECT_EQ((*ok[0])[1].str(), "ab");
  EXPECT_TRUE((*ok[0])[2].is_nil());
}

TEST(redis_fake_server, a_reply_nested_deeper_than_hiredis_allows_is_returned) {
  auto out = outcomes_of({nested(40, ":7\r\n"), "+PONG\r\n"});
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].has_value()) << out[0].error().message();
  const redis::reply* r = &*out[0];
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(r->is_array() && r->size() == 1u) << "level " << i;
    r = &(*r)[0];
  }
  EXPECT_EQ(r->integer(), 7);
  ASSERT_TRUE(out[1].has_value());
  EXPECT_EQ(out[1]->str(), "PONG");
}

TEST(redis_fake_server, a_reply_deeper_than_max_reply_depth_fails_only_its_command) {
  redis::client_options o;
  o.max_reply_depth = 16;
  auto out = outcomes_of({nested(17, "$3\r\nabc\r\n"), nested(16, ":1\r\n"), "+PONG\r\n"}, o);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].error(), redis::error::reply_too_deep);
  EXPECT_TRUE(out[1].has_value());
  ASSERT_TRUE(out[2].has_value());
  EXPECT_EQ(out[2]->str(), "PONG");
}

// An empty array is a level of nesting like any other (found by tests/fuzz/resp_fuzz.cpp: the
// reader counted only arrays that still had elements to come, so 16 arrays around an empty one
// came back whole at a depth limit of 16).
TEST(redis_fake_server, an_empty_array_past_max_reply_depth_is_too_deep_too) {
  redis::client_options o;
  o.max_reply_depth = 16;
  auto out = outcomes_of({nested(16, "*0\r\n"), nested(15, "*0\r\n"), "+PONG\r\n"}, o);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].error(), redis::error::reply_too_deep);
  ASSERT_TRUE(out[1].has_value());
  const redis::reply* r = &*out[1];
  for (int i = 0; i < 15; ++i) {
    ASSERT_TRUE(r->is_array() && r->size() == 1u) << "level " << i;
    r = &(*r)[0];
  }
  EXPECT_TRUE(r->is_array() && r->size() == 0u);
  ASSERT_TRUE(out[2].has_value());
  EXPECT_EQ(out[2]->str(), "PONG");
}

TEST(redis_fake_server, an_error_reply_on_accept_does_not_reset_the_reconnection_back_off) {
  run([&]() -> task<void> {
    fake_server f;
    f.greeting = "-ERR max number of clients reached\r\n";
    CO_ASSERT_OK(start(f, ""));
    redis::client_options o;
    o.address = f.listener.local_address();
    o.reconnect_initial = 10ms;
    o.reconnect_max = 2000ms;
    auto c = co_await redis::client::connect(o);
    CO_ASSERT_OK(c);
    co_await sleep_for(1500ms);
    // Back-off 10, 20, 40 ... ms: about 8 connections in 1.5 s (reset each time: ~100).
    EXPECT_LE(f.accepted, 12) << c->stats().connects << " connections";
    EXPECT_GE(f.accepted, 4);
    f.listener.close();
  }());
}

TEST(redis_fake_server, a_command_without_arguments_is_refused_unsent) {
  run([&]() -> task<void> {
    fake_server f;
    f.answers = {"+PONG\r\n"};
    CO_ASSERT_OK(start(f, ""));
    auto c = co_await redis::client::connect(options_for(f));
    CO_ASSERT_OK(c);
    auto none = co_await c->command(std::span<const redis::command_arg>());
    EXPECT_EQ(none.error(), std::make_error_code(errc::invalid_argument));
    auto ping = co_await with_timeout(c->command("PING"), 5s);  // the first answer is its own
    CO_ASSERT_OK(ping);
    EXPECT_EQ(ping->str(), "PONG");
    f.listener.close();
  }());
}

}  // namespace
}  // namespace cogwheel::redis_test
