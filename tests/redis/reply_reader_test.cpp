// The RESP parser (redis/src/reply_reader.hpp) fed the same bytes whole and one byte at a time:
// what it refuses, and why, must not depend on how the socket cut the stream. The cases are
// the ones tests/fuzz/resp_fuzz.cpp found; the fuzz target checks the property on any input.
#include "reply_reader.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <cogwheel/redis/error.hpp>

namespace cogwheel::redis {
namespace {

// Feeds `bytes` in pieces of `piece` bytes, taking replies after each; returns each reply's
// outcome ("ok", "skipped" or the error's message), ending at the first error.
std::vector<std::string> outcomes(const std::string& bytes, std::size_t piece) {
  detail::reply_reader reader(1 << 20, 1 << 16, 4);
  std::vector<std::string> out;
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    EXPECT_FALSE(reader.feed({bytes.data() + at, std::min(piece, bytes.size() - at)}));
    for (;;) {
      auto r = reader.next();
      if (!r) {
        out.push_back(r.error().message());
        return out;
      }
      if (!r->has_value()) break;
      out.push_back((*r)->skipped ? "skipped" : "ok");
    }
  }
  return out;
}

const std::string too_large = make_error_code(error::reply_too_large).message();
const std::string not_resp = make_error_code(error::protocol_error).message();

TEST(reply_reader, a_numeric_line_longer_than_any_number_is_refused_however_it_arrives) {
  // 40 digits that parse (zero-padded): refused whole as well as byte by byte, where the 33rd
  // byte without a CR refuses it (before: accepted when the CR came in the same read).
  const std::string padded = "$" + std::string(39, '0') + "3\r\nabc\r\n";
  EXPECT_EQ(outcomes(padded, padded.size()), std::vector<std::string>{too_large});
  EXPECT_EQ(outcomes(padded, 1), std::vector<std::string>{too_large});
  // 40 bytes of a length, then a CR without its LF: too large either way (before: "not RESP"
  // when the CR came in the same read).
  const std::string long_line = "*" + std::string(40, '9') + "\rX";
  EXPECT_EQ(outcomes(long_line, long_line.size()), std::vector<std::string>{too_large});
  EXPECT_EQ(outcomes(long_line, 1), std::vector<std::string>{too_large});
}

TEST(reply_reader, numbers_up_to_the_limit_and_a_bad_line_end_keep_their_meaning) {
  const std::string ok = ":-9223372036854775808\r\n$-1\r\n*0\r\n";
  EXPECT_EQ(outcomes(ok, ok.size()), (std::vector<std::string>{"ok", "ok", "ok"}));
  EXPECT_EQ(outcomes(ok, 1), (std::vector<std::string>{"ok", "ok", "ok"}));
  const std::string bad_end = ":12\rX";
  EXPECT_EQ(outcomes(bad_end, bad_end.size()), std::vector<std::string>{not_resp});
  EXPECT_EQ(outcomes(bad_end, 1), std::vector<std::string>{not_resp});
}

TEST(reply_reader, an_empty_array_one_level_too_deep_skips_its_reply) {
  // max_depth 4: four arrays around an empty one is five levels.
  const std::string deep = "*1\r\n*1\r\n*1\r\n*1\r\n*0\r\n+PONG\r\n";
  EXPECT_EQ(outcomes(deep, deep.size()), (std::vector<std::string>{"skipped", "ok"}));
  const std::string fits = "*1\r\n*1\r\n*1\r\n*0\r\n";
  EXPECT_EQ(outcomes(fits, 1), std::vector<std::string>{"ok"});
}

}  // namespace
}  // namespace cogwheel::redis
