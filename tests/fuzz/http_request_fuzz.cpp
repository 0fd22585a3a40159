// libFuzzer target: the HTTP example's request parser (examples/http/http_server_parser.hpp)
// on any bytes a client can send. The same stream is parsed four ways: whole, one byte at a
// time, in random reads (sizes drawn from the input), and one byte at a time with the
// simple-head shortcut off (every head through http_parser). All four must see the same
// requests, in order: each head's method, path, keep-alive, Expect: 100-continue and whether a
// body follows; each request's body; and the same status at the same request when the stream is
// refused (400, 413, 431, 501). What a server answers must not depend on how TCP cut the bytes,
// nor on which of the two head parsers read them: a difference is a request smuggled past one
// of them.
//
// Build (clang only, with libhttp-parser-dev): cmake -DCMAKE_CXX_COMPILER=clang++-16
// -DCOGWHEEL_FUZZ=ON, target http_request_fuzz.
// Run: build/tests/fuzz/http_request_fuzz -max_total_time=60 -malloc_limit_mb=64 corpus/
#include "http_server_parser.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using http_example::parser_limits;
using http_example::request_parser;

// Small limits, so inputs of a few KiB reach them (heads, bodies, trailers).
parser_limits limits(bool simple_heads) {
  parser_limits l;
  l.max_header_bytes = 512;
  l.max_body_bytes = 1024;
  l.simple_heads = simple_heads;
  return l;
}

// Feeds `bytes` in pieces of the sizes `piece` gives (>= 1) and writes down every event with
// the values it makes valid, ending at the first refusal.
template <class Piece>
std::string parse(std::string_view bytes, bool simple_heads, Piece piece) {
  request_parser p(limits(simple_heads));
  std::string out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    std::size_t n = piece();
    if (n > bytes.size() - at) n = bytes.size() - at;
    std::string_view rest = bytes.substr(at, n);
    at += n;
    while (!rest.empty()) {
      const request_parser::step s = p.feed(rest);
      if (s.consumed > rest.size()) {
        std::fprintf(stderr, "http_request_fuzz: a step consumed more than it was given\n");
        std::abort();
      }
      rest.remove_prefix(s.consumed);
      switch (s.what) {
        case request_parser::event::need_more:
          if (!rest.empty()) {
            std::fprintf(stderr, "http_request_fuzz: need_more with %zu bytes left unread\n", rest.size());
            std::abort();
          }
          break;
        case request_parser::event::head_done:
          out += "head " + std::to_string(static_cast<int>(p.method())) + " " + std::string(p.path()) +
                 (p.keep_alive() ? " keep-alive" : " close") + (p.keep_alive_needs_saying() ? " (said)" : "") +
                 (p.expects_continue() ? " expect-100" : "") + (p.has_body() ? " body" : "") + "\n";
          p.keep_body(true);
          break;
        case request_parser::event::message_done:
          out += "done " + std::to_string(p.body().size()) + ":" + p.body() + "\n";
          break;
        case request_parser::event::failed:
          return out + "failed " + std::to_string(p.status()) + "\n";
      }
    }
  }
  return out + (p.in_message() ? "incomplete\n" : "");
}

[[noreturn]] void differ(const char* what, const std::string& a, const std::string& b) {
  std::fprintf(stderr, "http_request_fuzz: %s\n--- one byte at a time:\n%s--- the other:\n%s", what, a.c_str(),
               b.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  std::uint32_t seed = data[0] | (std::uint32_t{data[1]} << 8);
  const std::string_view bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  const auto one = [] { return std::size_t{1}; };
  const std::string by_byte = parse(bytes, true, one);
  const std::string whole = parse(bytes, true, [&bytes] { return bytes.size(); });
  if (whole != by_byte) differ("the stream in one read parsed differently", by_byte, whole);
  const std::string chunked = parse(bytes, true, [&seed] {
    seed = seed * 1103515245 + 12345;
    return std::size_t{1} + (seed >> 16) % 61;
  });
  if (chunked != by_byte) differ("random reads parsed differently", by_byte, chunked);
  const std::string without_shortcut = parse(bytes, false, one);
  if (without_shortcut != by_byte) differ("http_parser alone parsed differently", by_byte, without_shortcut);
  return 0;
}
