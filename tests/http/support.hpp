// Shared by the HTTP server tests: a client connected to a serve_connection() of its own on the
// test's loop, a client that dribbles bytes, reading until the server closes, and splitting what
// came back into responses.
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "../io/support.hpp"
#include "http_server.hpp"

namespace cogwheel::http_test {

using namespace io_test;
using namespace http_example;

// A client whose connection is served by serve_connection(cfg, stats) on this loop. cfg and stats
// must outlive the loop.
inline task<result<tcp_stream>> serve_one(const server_config& cfg, server_stats& stats) {
  auto pair = co_await connect_pair();
  if (!pair) co_return pair.error();
  spawn(serve_connection(std::move(pair->server), cfg, stats));
  co_return std::move(pair->client);
}

// Writes text one byte at a time, `gap` before each byte; stops quietly when the server has
// closed.
inline task<void> dribble(tcp_stream& s, std::string text, clock::duration gap) {
  for (char c : text) {
    co_await sleep_for(gap);
    if (!co_await s.write_all(bytes_of(std::string_view(&c, 1)))) co_return;
  }
}

struct closed_at {
  std::string received;
  clock::time_point when;  // the loop's time when the server's close was seen
  bool closed = false;     // false: `limit` passed first
};

// Everything the server sends until it closes the connection (end of stream or reset), or until
// `limit` passes.
inline task<closed_at> read_until_closed(tcp_stream& s, clock::duration limit = std::chrono::seconds(600)) {
  closed_at out;
  deadline until(limit);
  char buf[16384];
  for (;;) {
    auto n = co_await with_deadline(s.read(std::as_writable_bytes(std::span(buf))), until);
    if (!n && n.error() == errc::timed_out) break;
    if (!n || *n == 0) {
      out.closed = true;
      break;
    }
    out.received.append(buf, *n);
  }
  out.when = loop_now();
  co_return out;
}

struct response {
  int status = 0;
  std::string head;
  std::string body;
};

// Splits a stream of responses (each with a Content-Length) into responses; a trailing partial
// one is dropped.
inline std::vector<response> parse_responses(std::string_view all) {
  std::vector<response> out;
  while (all.size() >= 12) {
    const std::size_t end = all.find("\r\n\r\n");
    if (end == std::string_view::npos) break;
    response r;
    r.head = std::string(all.substr(0, end + 4));
    std::from_chars(all.data() + 9, all.data() + 12, r.status);
    std::size_t length = 0;
    if (const std::size_t at = r.head.find("Content-Length: "); at != std::string::npos)
      std::from_chars(r.head.data() + at + 16, r.head.data() + r.head.size(), length);
    if (r.status == 100) length = 0;
    if (all.size() < end + 4 + length) break;
    r.body = std::string(all.substr(end + 4, length));
    all.remove_prefix(end + 4 + length);
    out.push_back(std::move(r));
  }
  return out;
}

// Sends `request` in one write to a connection served on a loop of its own, and reads until the
// server closes (or 30 s pass).
inline closed_at exchange_once(const server_config& cfg, server_stats& stats, std::string request) {
  closed_at out;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        CO_ASSERT_OK(co_await client->write_all(bytes_of(request)));
        out = co_await read_until_closed(*client, std::chrono::seconds(30));
      }(),
      paused());
  return out;
}

// Sends `request` in two writes, split at byte `cut`, 5 ms apart (so that the server reads the
// first part on its own), and reads until the server closes (or `limit` passes).
inline closed_at exchange_split(const server_config& cfg, server_stats& stats, std::string_view request,
                                std::size_t cut, clock::duration limit) {
  closed_at out;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        CO_ASSERT_OK(co_await client->write_all(bytes_of(request.substr(0, cut))));
        co_await sleep_for(std::chrono::milliseconds(5));
        // A refusal may close before the second part is written: that write's result is no test.
        (void)co_await client->write_all(bytes_of(request.substr(cut)));
        out = co_await read_until_closed(*client, limit);
      }(),
      paused());
  return out;
}

inline std::string_view get_root = "GET / HTTP/1.1\r\nHost: test\r\n\r\n";

}  // namespace cogwheel::http_test
