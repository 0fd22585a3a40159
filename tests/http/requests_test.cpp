// What the HTTP server answers: pipelined requests in order, chunked and sized bodies echoed,
// each refusal's status followed by a close, and the same answers however the bytes are split.
#include <gtest/gtest.h>

#include <string>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace http_test;

// Pipelined: every kind of request, in one write; the last asks to close.
const std::string pipeline =
    "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
    "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n"
    "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"
    "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n"
    "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n"
    "GET /?query=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

void expect_pipeline_answers(const closed_at& c) {
  EXPECT_TRUE(c.closed);
  const auto got = parse_responses(c.received);
  ASSERT_EQ(got.size(), 6u) << c.received;
  EXPECT_EQ(got[0].status, 200);
  EXPECT_EQ(got[0].body, "Hello, World!");
  EXPECT_EQ(got[1].status, 404);
  EXPECT_EQ(got[2].status, 200);
  EXPECT_EQ(got[2].body, "hello");
  EXPECT_EQ(got[3].status, 200);
  EXPECT_EQ(got[3].body, "Wikipedia");
  EXPECT_EQ(got[4].status, 200);  // HEAD: the head of GET /, no body
  EXPECT_NE(got[4].head.find("Content-Length: 13"), std::string::npos);
  EXPECT_EQ(got[5].status, 200);
  EXPECT_NE(got[5].head.find("Connection: close"), std::string::npos);
}

TEST(http_requests, pipelined_requests_are_answered_in_order) {
  server_config cfg;
  server_stats stats;
  closed_at c = exchange_once(cfg, stats, pipeline);
  // The HEAD response has no body although it announces 13 bytes: cut it out before splitting.
  const std::size_t head_at = c.received.find("HTTP/1.1 200", c.received.find("Wikipedia"));
  ASSERT_NE(head_at, std::string::npos);
  c.received.insert(c.received.find("\r\n\r\n", head_at) + 4, "Hello, World!");
  expect_pipeline_answers(c);
  EXPECT_EQ(stats.requests, 6u);
  EXPECT_EQ(stats.status_404, 1u);
}

TEST(http_requests, a_long_pipeline_is_answered_in_order_in_bounded_batches) {
  server_config cfg;
  cfg.body_bytes = 8192;  // 40 answers: about 330 KiB, written in batches of about 64 KiB
  server_stats stats;
  std::string many;
  for (int i = 0; i < 40; ++i)
    many += i % 2 == 0 ? "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
                       : "POST /echo HTTP/1.1\r\nContent-Length: " + std::to_string(std::to_string(i).size()) +
                             "\r\n\r\n" + std::to_string(i);
  many += "GET /last HTTP/1.1\r\nConnection: close\r\n\r\n";
  const closed_at c = exchange_once(cfg, stats, many);
  const auto got = parse_responses(c.received);
  ASSERT_EQ(got.size(), 41u);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(got[i].body, i % 2 == 0 ? fixed_body(8192) : std::to_string(i)) << i;
  EXPECT_EQ(got[40].status, 404);
}

// The answers with the Date lines removed (they change with the second).
std::string without_dates(std::string s) {
  for (std::size_t at; (at = s.find("Date: ")) != std::string::npos;) s.erase(at, s.find("\r\n", at) + 2 - at);
  return s;
}

TEST(http_requests, a_pipeline_split_at_every_byte_boundary_gets_the_same_answers) {
  server_config cfg;
  server_stats whole_stats;
  const std::string whole = without_dates(exchange_once(cfg, whole_stats, pipeline).received);
  ASSERT_FALSE(whole.empty());
  const std::size_t step = pipeline.size() / static_cast<std::size_t>(scaled(static_cast<int>(pipeline.size())));
  for (std::size_t cut = 1; cut < pipeline.size(); cut += std::max<std::size_t>(step, 1)) {
    server_stats stats;
    const closed_at c = exchange_split(cfg, stats, pipeline, cut, 30s);
    EXPECT_EQ(without_dates(c.received), whole) << "split at byte " << cut;
    EXPECT_EQ(stats.requests, 6u) << "split at byte " << cut;
  }
}

struct refusal {
  const char* name;
  std::string request;
  int status;
};

// 40 chunks of one byte, each size line `head`, 50,000 bytes of `pad`, `tail` (2 MB of framing
// in all), and the last chunk.
std::string chunks(std::string_view head, char pad, std::string_view tail) {
  std::string all;
  for (int i = 0; i < 40; ++i) ((all += head) += std::string(50000, pad)) += std::string(tail) + "\r\nx\r\n";
  return all + "0\r\n\r\n";
}

class http_refusals : public testing::TestWithParam<refusal> {};

TEST_P(http_refusals, answers_its_status_and_closes) {
  server_config cfg;
  cfg.max_body_bytes = 1000;
  server_stats stats;
  const closed_at c = exchange_once(cfg, stats, GetParam().request);
  EXPECT_TRUE(c.closed);
  const auto got = parse_responses(c.received);
  ASSERT_GE(got.size(), 1u) << c.received;
  EXPECT_EQ(got.back().status, GetParam().status);
  EXPECT_NE(got.back().head.find("Connection: close"), std::string::npos);
  if (GetParam().status != 404) {
    EXPECT_EQ(stats.bad_requests(), 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    statuses, http_refusals,
    testing::Values(
        refusal{"malformed_request_line", "GARBAGE\r\n\r\n", 400},
        refusal{"header_line_without_colon", "GET / HTTP/1.1\r\nno-colon-here\r\n\r\n", 400},
        refusal{"bad_chunk_size", "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
        refusal{"head_over_8_KiB", "GET / HTTP/1.1\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n", 431},
        refusal{"content_length_over_the_limit", "POST /echo HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", 413},
        refusal{"chunked_body_over_the_limit",
                "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + std::string(1000, 'b') +
                    "\r\n1\r\nc\r\n0\r\n\r\n",
                413},
        // A chunk's framing (its size line, extensions and CRLFs) is held to max_header_bytes:
        // http_parser counts each size line up to 80 KiB only, and none of it is body, so a
        // request of chunks of one byte each under 80 KiB of extension or leading zeros could
        // go on for 80 GiB within the body limit (each read restarting the body timeout).
        refusal{"long_chunk_extensions", "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks("1;", 'e', ""), 400},
        refusal{"long_zeros_in_chunk_sizes", "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks("", '0', "1"), 400},
        refusal{"unsupported_transfer_coding", "POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nxx", 501},
        refusal{"unknown_path", "GET /nothing HTTP/1.1\r\nConnection: close\r\n\r\n", 404},
        refusal{"wrong_method_on_echo", "GET /echo HTTP/1.1\r\nConnection: close\r\n\r\n", 404}),
    [](const testing::TestParamInfo<refusal>& p) { return std::string(p.param.name); });

TEST(http_requests, expect_100_continue_is_answered_before_the_body_is_read) {
  server_config cfg;
  server_stats stats;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        CO_ASSERT_OK(co_await client->write_all(bytes_of(
            "POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\nConnection: close\r\n\r\n")));
        char buf[256];
        auto n = co_await with_timeout(client->read(std::as_writable_bytes(std::span(buf))), 1s);
        CO_ASSERT_OK(n);
        EXPECT_EQ(std::string_view(buf, *n), "HTTP/1.1 100 Continue\r\n\r\n");
        CO_ASSERT_OK(co_await client->write_all(bytes_of("abc")));
        const closed_at c = co_await read_until_closed(*client, 5s);
        const auto got = parse_responses(c.received);
        CO_ASSERT_TRUE(got.size() == 1u);
        EXPECT_EQ(got[0].body, "abc");
      }(),
      paused());
}

TEST(http_requests, http_1_0_without_keep_alive_gets_one_answer_and_a_close) {
  server_config cfg;
  server_stats stats;
  const closed_at c = exchange_once(cfg, stats, "GET / HTTP/1.0\r\n\r\n");
  EXPECT_TRUE(c.closed);
  const auto got = parse_responses(c.received);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].head.find("Connection: close"), std::string::npos);
}

TEST(http_requests, the_body_size_follows_the_body_bytes_option) {
  server_config cfg;
  cfg.body_bytes = 4096;
  server_stats stats;
  const closed_at c = exchange_once(cfg, stats, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
  const auto got = parse_responses(c.received);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, fixed_body(4096));
  EXPECT_EQ(got[0].body.substr(0, 14), "Hello, World!\n");
}

}  // namespace
}  // namespace cogwheel
