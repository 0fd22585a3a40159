// What request_parser answers must not depend on how TCP cut the bytes: the same stream fed
// whole and one byte at a time gives the same events and the same refusal status. The cases are
// what tests/fuzz/http_request_fuzz.cpp found (it checks the property on any input, and against
// http_parser without the simple-head shortcut).
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "http_server_parser.hpp"

namespace {

using namespace http_example;

// Every event of `bytes` fed in pieces of `piece` bytes, up to the first refusal ("failed
// <status>").
std::string events(std::string_view bytes, std::size_t piece) {
  request_parser p(parser_limits{});
  std::string out;
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    std::string_view rest = bytes.substr(at, piece);
    while (!rest.empty()) {
      const auto s = p.feed(rest);
      rest.remove_prefix(s.consumed);
      if (s.what == request_parser::event::head_done) out += "head ";
      if (s.what == request_parser::event::message_done) out += "done ";
      if (s.what == request_parser::event::failed) return out + "failed " + std::to_string(p.status());
    }
  }
  return out;
}

TEST(http_parser_cuts, a_malformed_head_is_400_whatever_its_transfer_encoding_and_however_it_arrives) {
  // An unsupported Transfer-Encoding, then a line that is no header: the head is malformed, so
  // 400. Fed a byte at a time it was 501 (the unsupported value was judged when http_parser
  // handed over the first byte of the next "name", which in one read it never does).
  const std::string_view bad = "POST /c HTTP/1.1\r\nTransfer-Encoding: gzip\r\n0\r\n\r\n";
  EXPECT_EQ(events(bad, bad.size()), "failed 400");
  EXPECT_EQ(events(bad, 1), "failed 400");
  // A well-formed head with an unsupported Transfer-Encoding is 501 (as nginx), either way.
  const std::string_view unsupported = "POST /c HTTP/1.1\r\nTransfer-Encoding: gzip\r\nHost: a\r\n\r\n";
  EXPECT_EQ(events(unsupported, unsupported.size()), "failed 501");
  EXPECT_EQ(events(unsupported, 1), "failed 501");
}

TEST(http_parser_cuts, a_head_past_the_limit_is_431_even_when_a_bad_byte_follows_in_the_same_read) {
  // The limit is passed before the bad byte comes: 431, fed whole or a byte at a time (whole, it
  // was 400: http_parser read on to the bad byte before the limit was checked).
  const std::string target(parser_limits{}.max_header_bytes + 100, 'a');
  const std::string bad = "GET /" + target + "\x01 HTTP/1.1\r\n\r\n";
  EXPECT_EQ(events(bad, bad.size()), "failed 431");
  EXPECT_EQ(events(bad, 1), "failed 431");
  // The same bad byte before the limit: 400 either way.
  const std::string early = "GET /a\x01" + target + " HTTP/1.1\r\n\r\n";
  EXPECT_EQ(events(early, early.size()), "failed 400");
  EXPECT_EQ(events(early, 1), "failed 400");
  // Pipelined heads within the limit, each after leading blank lines, are all read.
  const std::string ok = "\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n\r\nGET /y HTTP/1.1\r\n\r\n";
  EXPECT_EQ(events(ok, ok.size()), "head done head done ");
  EXPECT_EQ(events(ok, 1), "head done head done ");
}

TEST(http_parser_cuts, blank_lines_before_a_head_are_not_counted_into_it) {
  // A head 10 bytes under the limit after 100 blank lines, at the start and after a request:
  // read, whole or a byte at a time (whole, the blank lines went into the same http_parser run
  // as the head and counted toward its limit: 431; a byte at a time they did not).
  const std::size_t limit = parser_limits{}.max_header_bytes;
  const std::string start = "POST /a HTTP/1.1\r\nContent-Length: 0\r\nX-Pad: ";
  const std::string head = start + std::string(limit - 10 - start.size() - 4, 'p') + "\r\n\r\n";
  const std::string blank(100, '\n');
  for (const std::string& stream : {blank + head, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n" + blank + head}) {
    const std::string want = stream.front() == '\n' ? "head done " : "head done head done ";
    EXPECT_EQ(events(stream, stream.size()), want);
    EXPECT_EQ(events(stream, 1), want);
    EXPECT_EQ(events(stream, 7), want);
  }
}

}  // namespace
