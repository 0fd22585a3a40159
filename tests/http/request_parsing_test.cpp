// How the HTTP server reads what RFC 9112 leaves no room on: a header name with whitespace before
// its colon is refused (so nothing smuggled behind it is answered), an HTTP/1.0 client that asks
// for keep-alive is told so, a chunked body's trailers and each chunk's framing are held to the
// head's limit, and a target in absolute form is routed by its path.
#include <gtest/gtest.h>

#include <string>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace http_test;

struct spaced_name {
  const char* name;
  std::string request;
};

void PrintTo(const spaced_name& p, std::ostream* os) { *os << p.name; }

class http_header_names : public testing::TestWithParam<spaced_name> {};

TEST_P(http_header_names, with_whitespace_before_the_colon_are_refused_with_400_and_nothing_else) {
  server_config cfg;
  server_stats stats;
  const closed_at c = exchange_once(cfg, stats, GetParam().request);
  EXPECT_TRUE(c.closed);
  const auto got = parse_responses(c.received);
  ASSERT_EQ(got.size(), 1u) << c.received;
  EXPECT_EQ(got[0].status, 400);
  EXPECT_NE(got[0].head.find("Connection: close"), std::string::npos);
  EXPECT_EQ(stats.requests, 0u);
  EXPECT_EQ(stats.status_400, 1u);
}

INSTANTIATE_TEST_SUITE_P(
    rfc9112_5_1, http_header_names,
    testing::Values(
        spaced_name{"space_in_content_length", "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length : 5\r\n\r\nhello"},
        spaced_name{"tab_in_an_ordinary_name", "GET / HTTP/1.1\r\nHost: t\r\nX-Thing\t: 1\r\n\r\n"},
        // A server that ignores the spaced name reads one request; honouring it answers two.
        spaced_name{"smuggling_through_transfer_encoding",
                    "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n"
                    "GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"},
        spaced_name{"in_a_trailer",
                    "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "2\r\nhi\r\n0\r\nX-Trailer : 1\r\n\r\n"}),
    [](const testing::TestParamInfo<spaced_name>& p) { return std::string(p.param.name); });

TEST(http_request_parsing, http_1_0_asking_for_keep_alive_is_told_keep_alive_and_kept_open) {
  server_config cfg;
  server_stats stats;
  // ApacheBench -k spells it "Keep-Alive"; the last request asks for nothing, so it is closed.
  const closed_at c = exchange_once(cfg, stats,
                                    "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"
                                    "HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                                    "GET /missing HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                                    "GET / HTTP/1.0\r\n\r\n");
  EXPECT_TRUE(c.closed);
  std::string all = c.received;
  const std::size_t head_end = all.find("\r\n\r\n", all.find("HTTP/1.1 200", 1)) + 4;
  all.insert(head_end, "Hello, World!");  // the HEAD answer announces a body it does not carry
  const auto got = parse_responses(all);
  ASSERT_EQ(got.size(), 4u) << c.received;
  for (int i = 0; i < 3; ++i) EXPECT_NE(got[i].head.find("\r\nConnection: keep-alive\r\n"), std::string::npos) << i;
  EXPECT_EQ(got[2].status, 404);
  EXPECT_NE(got[3].head.find("\r\nConnection: close\r\n"), std::string::npos);
  EXPECT_EQ(stats.requests, 4u);
}

TEST(http_request_parsing, http_1_1_answers_do_not_say_keep_alive) {
  server_config cfg;
  server_stats stats;
  const closed_at c = exchange_once(cfg, stats,
                                    "GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n"
                                    "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
  const auto got = parse_responses(c.received);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].head.find("Connection:"), std::string::npos);
}

std::string chunked_with_trailer(const std::string& trailer) {
  return "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
         "4\r\nWiki\r\n5\r\npedia\r\n0\r\n" +
         trailer + "\r\n";
}

TEST(http_request_parsing, chunked_trailers_within_max_header_bytes_are_accepted) {
  server_config cfg;
  cfg.max_header_bytes = 1024;
  server_stats stats;
  const std::string trailer = "X-Sum: 1\r\nX-Pad: " + std::string(900, 'p') + "\r\n";
  const closed_at c = exchange_once(cfg, stats, chunked_with_trailer(trailer));
  const auto got = parse_responses(c.received);
  ASSERT_EQ(got.size(), 1u) << c.received;
  EXPECT_EQ(got[0].status, 200);
  EXPECT_EQ(got[0].body, "Wikipedia");
}

TEST(http_request_parsing, chunked_trailers_past_max_header_bytes_are_refused_with_431) {
  server_config cfg;
  cfg.max_header_bytes = 1024;
  server_stats stats;
  // One long trailer, then many short ones: each is over the limit by a few bytes only.
  for (const std::string& trailer : {"X-Pad: " + std::string(1100, 'p') + "\r\n", [] {
         std::string many;
         while (many.size() <= 1030) many += "X-A: 1\r\n";
         return many;
       }()}) {
    const closed_at c = exchange_once(cfg, stats, chunked_with_trailer(trailer));
    EXPECT_TRUE(c.closed);
    const auto got = parse_responses(c.received);
    ASSERT_EQ(got.size(), 1u) << c.received;
    EXPECT_EQ(got[0].status, 431);
  }
  EXPECT_EQ(stats.status_431, 2u);
  EXPECT_EQ(stats.requests, 0u);
}

// The trailer section is the bytes after the last chunk's line, its final empty line included.
TEST(http_request_parsing, the_trailer_limit_is_exact_and_holds_however_the_bytes_are_split) {
  server_config cfg;
  cfg.max_header_bytes = 1024;
  for (const std::size_t section : {std::size_t{1024}, std::size_t{1025}}) {
    const std::string trailer = "X-Pad: " + std::string(section - 11, 'p') + "\r\n";  // + the final CRLF
    const std::string request = chunked_with_trailer(trailer);
    for (std::size_t cut = request.size() - section - 6; cut < request.size(); cut += 7) {
      server_stats stats;
      const closed_at c = exchange_split(cfg, stats, request, cut, 5s);
      const auto got = parse_responses(c.received);
      ASSERT_EQ(got.size(), 1u) << "section " << section << ", split at " << cut;
      EXPECT_EQ(got[0].status, section <= 1024 ? 200 : 431) << "section " << section << ", split at " << cut;
    }
  }
}

TEST(http_request_parsing, chunked_trailers_are_refused_as_soon_as_they_pass_the_limit) {
  server_config cfg;
  cfg.max_header_bytes = 1024;
  server_stats stats;
  closed_at c;
  run(
      [&]() -> task<void> {
        auto client = co_await serve_one(cfg, stats);
        CO_ASSERT_OK(client);
        // The trailer section never ends: the refusal must not wait for its end.
        const std::string start = "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  "1\r\na\r\n0\r\nX-Endless: " + std::string(2000, 'e');
        CO_ASSERT_OK(co_await client->write_all(bytes_of(start)));
        c = co_await read_until_closed(*client, 5s);
      }(),
      paused());
  EXPECT_TRUE(c.closed);
  const auto got = parse_responses(c.received);
  ASSERT_EQ(got.size(), 1u) << c.received;
  EXPECT_EQ(got[0].status, 431);
}

// A chunk's framing is the bytes from the end of one chunk's data to the start of the next's:
// the CRLF, the size line with its extensions, its CRLF. Without a limit a body of one-byte
// chunks could carry up to 80 KiB of it per chunk (http_parser's own limit on a size line).
TEST(http_request_parsing, the_chunk_framing_limit_is_exact_and_holds_however_the_bytes_are_split) {
  server_config cfg;
  cfg.max_header_bytes = 1024;
  for (const std::size_t framing : {std::size_t{1024}, std::size_t{1025}}) {
    const std::string head = "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    const std::string request = head + "4\r\nWiki\r\n5;" + std::string(framing - 6, 'x') + "\r\npedia\r\n0\r\n\r\n";
    const std::size_t from = head.size() + 7;  // the end of "Wiki"
    for (std::size_t cut = from - 3; cut < from + framing + 3; cut += 7) {
      server_stats stats;
      const closed_at c = exchange_split(cfg, stats, request, cut, 5s);
      const auto got = parse_responses(c.received);
      ASSERT_EQ(got.size(), 1u) << "framing " << framing << ", split at " << cut;
      EXPECT_EQ(got[0].status, framing <= 1024 ? 200 : 400) << "framing " << framing << ", split at " << cut;
      if (framing <= 1024) {
        EXPECT_EQ(got[0].body, "Wikipedia");
      }
    }
  }
}

struct absolute_target {
  const char* name;
  std::string request;
  int status;
  std::string body;
};

void PrintTo(const absolute_target& p, std::ostream* os) { *os << p.name; }

class http_absolute_form : public testing::TestWithParam<absolute_target> {};

TEST_P(http_absolute_form, is_routed_by_its_path) {
  server_config cfg;
  server_stats stats;
  const closed_at c = exchange_once(cfg, stats, GetParam().request);
  const auto got = parse_responses(c.received);
  ASSERT_EQ(got.size(), 1u) << c.received;
  EXPECT_EQ(got[0].status, GetParam().status);
  EXPECT_EQ(got[0].body.substr(0, GetParam().body.size()), GetParam().body);
}

INSTANTIATE_TEST_SUITE_P(
    rfc9112_3_2_2, http_absolute_form,
    testing::Values(
        absolute_target{"root", "GET http://t/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 200, "Hello"},
        absolute_target{"no_path_means_root", "GET http://t HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                        200, "Hello"},
        absolute_target{"scheme_in_capitals_with_port_and_query",
                        "POST HTTP://t:8080/echo?x=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n"
                        "Connection: close\r\n\r\nok",
                        200, "ok"},
        absolute_target{"https", "GET https://t/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 200, "Hello"},
        absolute_target{"unknown_path", "GET http://t/nothing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                        404, ""}),
    [](const testing::TestParamInfo<absolute_target>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace cogwheel
