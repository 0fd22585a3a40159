// libFuzzer target: the Redis client's RESP2 parser (redis/src/reply_reader.hpp) against
// hostile and chopped-up input. Two properties, chosen by the first byte:
//
//   - any bytes: fed one byte at a time and in random chunks (sizes drawn from the input), the
//     parser must give the same replies, the same skipped replies and the same first error,
//     whatever the chunking (a reply the socket delivers in pieces is the reply it delivers
//     whole); after an error it must keep failing until reset;
//   - generated replies: a sequence of reply trees drawn from the input (strings with CR, LF and
//     NUL bytes inside, nils, integers at the limits, arrays nested deeper than the reader's
//     max_depth) is encoded as Redis would send it and fed in random chunks: each must come back
//     equal, and each tree deeper than max_depth as one reply skipped with reply_too_deep, the
//     stream in step after it.
//
// Memory a header announces is never allocated up front: CI runs this with -malloc_limit_mb,
// so a `*16777216\r\n` or `$1000000000\r\n` header that allocated for its announced size fails.
//
// Build (clang only): cmake -DCMAKE_CXX_COMPILER=clang++-16 -DCOGWHEEL_FUZZ=ON, target resp_fuzz.
// Run: build/tests/fuzz/resp_fuzz -max_total_time=60 -malloc_limit_mb=64 corpus/
#include "reply_reader.hpp"

#include <cogwheel/redis/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using cogwheel::redis::reply;
using cogwheel::redis::detail::reply_reader;

// The client's defaults for bytes and elements (client_options), so that a header announcing
// the most they allow is what the fuzzer meets; no input is near 64 MiB, so no feed is refused.
// A small depth, so nesting past it is common.
constexpr std::size_t max_bytes = 64u << 20;
constexpr std::size_t max_elements = 1u << 24;
constexpr std::size_t max_depth = 4;

[[noreturn]] void fail(const char* what, const std::string& a, const std::string& b) {
  std::fprintf(stderr, "resp_fuzz: %s\n  first:  %s\n  second: %s\n", what, a.c_str(), b.c_str());
  std::abort();
}

// A reply as text, every byte and the structure visible, for comparing two parses.
void describe(const reply& r, std::string& out) {
  switch (r.type()) {
    case reply::kind::nil: out += "nil"; return;
    case reply::kind::integer: out += "int(" + std::to_string(r.integer()) + ")"; return;
    case reply::kind::string: out += "str"; break;
    case reply::kind::status: out += "status"; break;
    case reply::kind::error: out += "error"; break;
    case reply::kind::array:
      out += "[";
      for (const reply& e : r.elements()) {
        describe(e, out);
        out += ",";
      }
      out += "]";
      return;
  }
  out += "(" + std::to_string(r.str().size()) + ":";
  out.append(r.str());
  out += ")";
}

// Draws small numbers from the input, then zeros once it is used up.
struct byte_source {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos = 0;
  std::uint8_t next() noexcept { return pos < size ? data[pos++] : 0; }
};

// Feeds `bytes` in pieces of the sizes `chunk` gives (>= 1), taking every complete reply after
// each piece; returns what came out, one line per reply, ending at the first error.
template <class Chunk>
std::string parse_in_pieces(const std::string& bytes, Chunk chunk) {
  reply_reader reader(max_bytes, max_elements, max_depth);
  std::string out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    std::size_t n = chunk();
    if (n > bytes.size() - at) n = bytes.size() - at;
    if (const std::error_code ec = reader.feed({bytes.data() + at, n})) fail("a feed was refused", ec.message(), "");
    at += n;
    for (;;) {
      auto r = reader.next();
      if (!r) {
        // The reader stays failed until reset.
        auto again = reader.next();
        if (again || again.error() != cogwheel::redis::error::protocol_error)
          fail("a failed reader read on", r.error().message(), "");
        return out + "error:" + r.error().message() + "\n";
      }
      if (!r->has_value()) break;
      const auto& parsed = **r;
      if (parsed.skipped) {
        out += "skipped:" + parsed.skipped.message() + "\n";
      } else {
        describe(parsed.value, out);
        out += "\n";
      }
    }
  }
  return out + (reader.buffered() > 0 ? "incomplete\n" : "");
}

// Any bytes: one byte at a time against chunks drawn from the first two bytes' seed.
void chunking_does_not_matter(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return;
  std::uint32_t seed = data[0] | (std::uint32_t{data[1]} << 8);
  const std::string bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  const std::string one_by_one = parse_in_pieces(bytes, [] { return std::size_t{1}; });
  const std::string chunked = parse_in_pieces(bytes, [&seed] {
    seed = seed * 1103515245 + 12345;
    return std::size_t{1} + (seed >> 16) % 97;
  });
  if (one_by_one != chunked) fail("chunking changed what was parsed", one_by_one, chunked);
  const std::string whole = parse_in_pieces(bytes, [&bytes] { return bytes.size(); });
  if (one_by_one != whole) fail("the input in one piece parsed differently", one_by_one, whole);
}

// A reply tree drawn from src, encoded into `wire`, described into `expect` (as the reader must
// return it: a tree deeper than max_depth is skipped). Returns the tree's depth (arrays nested).
std::size_t draw_reply(byte_source& src, std::size_t depth, std::string& wire, std::string& expect) {
  const std::uint8_t k = src.next();
  switch (depth >= 7 ? k % 5 : k % 6) {
    case 0:
      wire += (k & 0x80) != 0 ? "$-1\r\n" : "*-1\r\n";
      expect += "nil";
      return 0;
    case 1: {
      static const long long values[] = {0, -1, 1, 9223372036854775807LL, -9223372036854775807LL - 1, 42};
      const long long v = values[src.next() % 6];
      wire += ":" + std::to_string(v) + "\r\n";
      expect += "int(" + std::to_string(v) + ")";
      return 0;
    }
    case 2:
    case 3: {  // a status or error line: no CR or LF inside
      std::string s;
      for (std::uint8_t n = src.next() % 12; n > 0; --n) {
        const char c = static_cast<char>(src.next());
        s += c == '\r' || c == '\n' ? ' ' : c;
      }
      wire += (k % 6 == 2 ? "+" : "-") + s + "\r\n";
      expect += (k % 6 == 2 ? "status(" : "error(") + std::to_string(s.size()) + ":" + s + ")";
      return 0;
    }
    case 4: {  // a bulk string: any bytes, CR LF and NUL included
      std::string s;
      for (std::uint8_t n = src.next() % 40; n > 0; --n) s += static_cast<char>(src.next());
      wire += "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
      expect += "str(" + std::to_string(s.size()) + ":" + s + ")";
      return 0;
    }
    default: {
      const std::size_t n = src.next() % 5;
      wire += "*" + std::to_string(n) + "\r\n";
      expect += "[";
      std::size_t deepest = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t d = draw_reply(src, depth + 1, wire, expect);
        if (d > deepest) deepest = d;
        expect += ",";
      }
      expect += "]";
      return deepest + 1;
    }
  }
}

void generated_replies_come_back(const std::uint8_t* data, std::size_t size) {
  byte_source src{data, size};
  std::uint32_t seed = src.next();
  std::string wire;
  std::string expect;
  for (int i = 0; i < 16 && src.pos < src.size; ++i) {
    std::string one;
    const std::size_t depth = draw_reply(src, 0, wire, one);
    expect += depth > max_depth ? "skipped:" + make_error_code(cogwheel::redis::error::reply_too_deep).message() : one;
    expect += "\n";
  }
  const std::string got = parse_in_pieces(wire, [&seed] {
    seed = seed * 1103515245 + 12345;
    return std::size_t{1} + (seed >> 16) % 23;
  });
  if (got != expect) fail("a well-formed reply did not come back as sent", expect, got);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  if ((data[0] & 1) == 0)
    chunking_does_not_matter(data + 1, size - 1);
  else
    generated_replies_come_back(data + 1, size - 1);
  return 0;
}
