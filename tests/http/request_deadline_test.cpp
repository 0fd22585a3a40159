// The HTTP example's request budget (server_config::request_timeout, docs/deadlines.md): one
// request's reads and writes run in a scope on a deadline reset where its head starts, so a
// request that keeps each phase inside its own timeout is still cut when the whole overruns the
// budget; the connection idle between requests is not counted. On the paused clock.
#include <gtest/gtest.h>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace http_test;

constexpr auto tick = std::chrono::milliseconds(1);

server_config with_budget() {
  server_config cfg;
  cfg.header_timeout = 1000ms;
  cfg.body_timeout = 1000ms;
  cfg.keepalive_timeout = 3000ms;
  cfg.request_timeout = 300ms;
  return cfg;
}

TEST(http_request_deadline, a_body_trickled_inside_the_body_timeout_is_cut_at_the_request_budget) {
  const server_config cfg = with_budget();
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        const auto start = loop_now();
        CO_ASSERT_OK(co_await client->write_all(bytes_of("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\n")));
        spawn(dribble(*client, std::string(20, 'x'), 50ms));  // 1 s in all, 50 ms per byte
        const closed_at c = co_await read_until_closed(*client);
        EXPECT_TRUE(c.closed);
        EXPECT_GE(c.when - start, cfg.request_timeout);
        EXPECT_LE(c.when - start, cfg.request_timeout + tick);
        EXPECT_TRUE(c.received.empty());  // cut without a response
      }(),
      paused());
  EXPECT_EQ(stats.request_timeouts, 1u);
  EXPECT_EQ(stats.body_timeouts, 0u);
  EXPECT_EQ(stats.requests, 0u);
}

TEST(http_request_deadline, idle_time_between_requests_is_not_charged_to_the_next_one) {
  const server_config cfg = with_budget();
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        std::string got;
        char buf[4096];
        for (int i = 0; i < 2; ++i) {
          CO_ASSERT_OK(co_await client->write_all(bytes_of(get_root)));
          while (parse_responses(got).size() < static_cast<std::size_t>(i + 1)) {
            auto n = co_await with_timeout(client->read(std::as_writable_bytes(std::span(buf))), 5s);
            CO_ASSERT_OK(n);
            CO_ASSERT_TRUE(*n > 0);
            got.append(buf, *n);
          }
          co_await sleep_for(2s);  // idle: well past the 300 ms budget, inside the keep-alive
        }
        const auto responses = parse_responses(got);
        CO_ASSERT_TRUE(responses.size() == 2u);
        EXPECT_EQ(responses[1].status, 200);
        client->close();
      }(),
      paused());
  EXPECT_EQ(stats.requests, 2u);
  EXPECT_EQ(stats.request_timeouts, 0u);
}

}  // namespace
}  // namespace cogwheel
