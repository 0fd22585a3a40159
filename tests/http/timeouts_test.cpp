// The HTTP server's four timeouts on the paused clock: each connection is cut exactly when its
// rule says (never early, at most one tick late), and only by the rule that applies: a client
// trickling each byte just before the deadline keeps a body going but not a head.
#include <gtest/gtest.h>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace http_test;

constexpr auto tick = std::chrono::milliseconds(1);

server_config short_timeouts() {
  server_config cfg;
  cfg.header_timeout = 1000ms;
  cfg.body_timeout = 1000ms;
  cfg.keepalive_timeout = 3000ms;
  cfg.send_timeout = 2000ms;
  return cfg;
}

// The server closed between `from + after` and one tick later.
void expect_cut_at(const closed_at& c, clock::time_point from, clock::duration after) {
  EXPECT_TRUE(c.closed);
  EXPECT_GE(c.when - from, after);
  EXPECT_LE(c.when - from, after + tick);
}

TEST(http_timeouts, a_head_dribbled_one_byte_per_70ms_is_cut_with_408_exactly_at_the_header_deadline) {
  const server_config cfg = short_timeouts();
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        const auto start = loop_now();
        spawn(dribble(*client, std::string(get_root), 70ms));  // 31 bytes: 2.17 s in all
        const closed_at c = co_await read_until_closed(*client);
        expect_cut_at(c, start, cfg.header_timeout);
        const auto got = parse_responses(c.received);
        CO_ASSERT_TRUE(got.size() == 1u);
        EXPECT_EQ(got[0].status, 408);
      }(),
      paused());
  EXPECT_EQ(stats.header_timeouts, 1u);
  EXPECT_EQ(stats.requests, 0u);
  ASSERT_EQ(stats.kick_lateness_us.size(), 1u);
  EXPECT_LE(stats.kick_lateness_us[0], 1000u);  // at most one tick
}

TEST(http_timeouts, a_connection_that_sends_nothing_is_closed_at_the_header_deadline_without_a_response) {
  const server_config cfg = short_timeouts();
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        const auto start = loop_now();
        const closed_at c = co_await read_until_closed(*client);
        expect_cut_at(c, start, cfg.header_timeout);
        EXPECT_EQ(c.received, "");
      }(),
      paused());
  EXPECT_EQ(stats.header_timeouts, 1u);
}

TEST(http_timeouts, a_body_trickled_just_inside_the_body_timeout_is_received_whole) {
  const server_config cfg = short_timeouts();
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        const std::string body = "twenty bytes of body";
        CO_ASSERT_OK(co_await client->write_all(bytes_of(
            "POST /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 20\r\n\r\n")));
        // 20 x 990 ms: nearly 20 s in all, never 1 s between two bytes.
        spawn(dribble(*client, body, 990ms));
        const closed_at c = co_await read_until_closed(*client);
        const auto got = parse_responses(c.received);
        CO_ASSERT_TRUE(got.size() == 1u);
        EXPECT_EQ(got[0].status, 200);
        EXPECT_EQ(got[0].body, body);
      }(),
      paused());
  EXPECT_EQ(stats.body_timeouts, 0u);
  EXPECT_EQ(stats.requests, 1u);
}

TEST(http_timeouts, the_same_trickle_on_a_head_is_cut_at_the_header_deadline) {
  const server_config cfg = short_timeouts();
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        const auto start = loop_now();
        spawn(dribble(*client, std::string(get_root), 990ms));
        const closed_at c = co_await read_until_closed(*client);
        expect_cut_at(c, start, cfg.header_timeout);
        const auto got = parse_responses(c.received);
        CO_ASSERT_TRUE(got.size() == 1u);
        EXPECT_EQ(got[0].status, 408);
      }(),
      paused());
  EXPECT_EQ(stats.header_timeouts, 1u);
}

TEST(http_timeouts, a_pause_in_a_body_longer_than_the_body_timeout_closes_without_a_response) {
  const server_config cfg = short_timeouts();
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        CO_ASSERT_OK(co_await client->write_all(
            bytes_of("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhalf")));
        const auto last_byte = loop_now();
        const closed_at c = co_await read_until_closed(*client);
        expect_cut_at(c, last_byte, cfg.body_timeout);
        EXPECT_EQ(c.received, "");
      }(),
      paused());
  EXPECT_EQ(stats.body_timeouts, 1u);
  EXPECT_EQ(stats.header_timeouts, 0u);
}

// Requests 2.9 s apart keep the connection open (each restarts the keepalive timeout), then
// silence closes it 3 s after the last response. With cfg.park_after short of 2.9 s the
// connection parks between requests (park(): no frame) and comes back for each.
void keepalive_kept_then_cut(const server_config& cfg) {
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        char buf[4096];
        for (int i = 0; i < 3; ++i) {
          CO_ASSERT_OK(co_await client->write_all(bytes_of(get_root)));
          auto n = co_await with_timeout(client->read(std::as_writable_bytes(std::span(buf))), 1s);
          CO_ASSERT_OK(n);
          EXPECT_EQ(parse_responses(std::string_view(buf, *n)).size(), 1u);
          if (i < 2) co_await sleep_for(2900ms);
        }
        const auto answered = loop_now();
        const closed_at c = co_await read_until_closed(*client);
        expect_cut_at(c, answered, cfg.keepalive_timeout);
        EXPECT_EQ(c.received, "");
      }(),
      paused());
  EXPECT_EQ(stats.requests, 3u);
  EXPECT_EQ(stats.keepalive_timeouts, 1u);
  EXPECT_EQ(stats.header_timeouts, 0u);
  EXPECT_EQ(stats.connections, 1u);       // one connection, however often it parked
  EXPECT_EQ(stats.open_connections, 0u);  // and closed once
  ASSERT_EQ(stats.kick_lateness_us.size(), 1u);
  EXPECT_LE(stats.kick_lateness_us[0], 1000u);  // at most one tick
}

TEST(http_timeouts, an_idle_keepalive_connection_is_closed_exactly_at_the_keepalive_deadline) {
  server_config cfg = short_timeouts();
  cfg.park_after = -1ms;  // never parks: waits in its frame
  keepalive_kept_then_cut(cfg);
}

TEST(http_timeouts, a_parked_keepalive_connection_is_served_and_closed_exactly_as_one_in_its_frame) {
  for (const auto after : {0ms, 100ms}) {  // parks at once; after 100 ms of silence
    server_config cfg = short_timeouts();
    cfg.park_after = after;
    keepalive_kept_then_cut(cfg);
  }
}

TEST(http_timeouts, the_header_timeout_of_a_later_request_counts_from_its_first_byte) {
  const server_config cfg = short_timeouts();
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        CO_ASSERT_OK(co_await client->write_all(bytes_of(get_root)));
        char buf[4096];
        CO_ASSERT_OK(co_await with_timeout(client->read(std::as_writable_bytes(std::span(buf))), 1s));
        co_await sleep_for(2500ms);  // idle, within the keepalive timeout
        CO_ASSERT_OK(co_await client->write_all(bytes_of("GET / HT")));
        const auto first_byte = loop_now();
        const closed_at c = co_await read_until_closed(*client);
        expect_cut_at(c, first_byte, cfg.header_timeout);
        const auto got = parse_responses(c.received);
        CO_ASSERT_TRUE(got.size() == 1u);
        EXPECT_EQ(got[0].status, 408);
      }(),
      paused());
  EXPECT_EQ(stats.header_timeouts, 1u);
  EXPECT_EQ(stats.keepalive_timeouts, 0u);
}

TEST(http_timeouts, a_client_that_stops_reading_is_cut_by_the_send_timeout) {
  server_config cfg = short_timeouts();
  cfg.body_bytes = 4 << 20;  // far more than the socket buffers hold:
  // with SO_SNDBUF fixed; autotuned, a send buffer may grow to tcp_wmem's maximum (4 MiB on
  // Debian), and the whole body then fits in the server's buffer and the client's
  cfg.send_buffer_bytes = 64 << 10;
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        CO_ASSERT_OK(co_await client->write_all(bytes_of(get_root)));
        co_await sleep_for(10s);  // never reads
        EXPECT_EQ(stats.send_timeouts, 1u);
        EXPECT_EQ(stats.open_connections, 0u);
      }(),
      paused());
  EXPECT_EQ(stats.send_timeouts, 1u);
  ASSERT_EQ(stats.kick_lateness_us.size(), 1u);
  EXPECT_LE(stats.kick_lateness_us[0], 1000u);
}

}  // namespace
}  // namespace cogwheel
