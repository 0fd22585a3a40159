// The simple-head shortcut (examples/http/http_server_simple_head.hpp) must change nothing but
// speed: unit cases on simple_head() for what it accepts (exact length, method and target) and
// what it must decline, then a deterministic differential run of request_parser with the
// shortcut against request_parser without it (parser_limits::simple_heads = false, every head
// through http_parser) over seeded, mutated, pipelined request streams cut at random points:
// good heads, smuggling-style heads (Content-Length with Transfer-Encoding, duplicate
// Content-Length, names that start with an acted-on name, spaces before the colon), obsolete
// line folding, bare LFs, non-ASCII bytes, heads at and over the limit, bodies. Every step's
// event, bytes consumed, and the values read at each event must be equal.
//
// COGWHEEL_TEST_SCALE (a float, default 1) multiplies the number of streams (120,000 at 1);
// COGWHEEL_TEST_SEED=<n> runs only stream n (to reproduce a reported difference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "../support/co_assert.hpp"
#include "http_server_parser.hpp"
#include "http_server_simple_head.hpp"

namespace {

using namespace http_example;
using namespace std::string_literals;

constexpr std::size_t limit = 8 * 1024;

std::string escaped(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\r') out += "\\r";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\') out += "\\\\";
    else if (u >= 0x20 && u < 0x7f) out += c;
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  return out;
}

// ---- simple_head() on its own ----

TEST(simple_head, accepts_get_and_head_of_a_plain_path_with_exact_length_method_and_target) {
  struct accepted {
    std::string head;
    http_method method;
    std::string_view target;
  };
  const accepted cases[] = {
      {"GET / HTTP/1.1\r\n\r\n", HTTP_GET, "/"},
      {"HEAD / HTTP/1.1\r\n\r\n", HTTP_HEAD, "/"},
      {"GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: wrk/4.2\r\nAccept: */*\r\n\r\n", HTTP_GET,
       "/index.html"},
      {"HEAD /a/b;c=d/%41~!$&'()*+,=:@ HTTP/1.1\r\nHost:t\r\naccept:\r\nX-Tab:\ta\tb\r\n\r\n", HTTP_HEAD,
       "/a/b;c=d/%41~!$&'()*+,=:@"},
      // Names that merely contain an acted-on name, not at their start.
      {"GET / HTTP/1.1\r\nX-Transfer-Encoding: chunked\r\nX-Content-Length: 5\r\nX-Expect: 1\r\n\r\n", HTTP_GET,
       "/"},
  };
  for (const accepted& c : cases) {
    // Followed by a pipelined request: only the first head is taken.
    const std::string data = c.head + "GET /next HTTP/1.1\r\n\r\n";
    const simple_request_head h = simple_head(data, limit);
    EXPECT_EQ(h.length, c.head.size()) << escaped(c.head);
    EXPECT_EQ(h.method, c.method) << escaped(c.head);
    EXPECT_EQ(h.target, c.target) << escaped(c.head);
    EXPECT_EQ(h.target.data(), data.data() + (c.method == HTTP_GET ? 4 : 5)) << "a view into the data";
  }
}

TEST(simple_head, declines_every_head_http_parser_or_the_server_would_treat_differently) {
  const std::string ok_line = "GET / HTTP/1.1\r\n";
  const std::string declined[] = {
      // Other methods, versions, targets.
      "POST / HTTP/1.1\r\n\r\n", "PUT / HTTP/1.1\r\n\r\n", "OPTIONS * HTTP/1.1\r\n\r\n", "get / HTTP/1.1\r\n\r\n",
      "GETS / HTTP/1.1\r\n\r\n", "GET / HTTP/1.0\r\n\r\n", "HEAD / HTTP/1.0\r\n\r\n", "GET / HTTP/2.0\r\n\r\n",
      "GET / HTTP/1.11\r\n\r\n", "GET /  HTTP/1.1\r\n\r\n", "GET /?q=1 HTTP/1.1\r\n\r\n", "GET /a? HTTP/1.1\r\n\r\n",
      "GET /#f HTTP/1.1\r\n\r\n", "GET * HTTP/1.1\r\n\r\n", "GET http://h/p HTTP/1.1\r\n\r\n",
      "GET a/b HTTP/1.1\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n",
      // Line ends and folding.
      "GET / HTTP/1.1\n\r\n", "GET / HTTP/1.1\r\n\n", ok_line + "Host: t\n\r\n", ok_line + "Host: t\r\n\n",
      ok_line + "Host: t\r\n continued\r\n\r\n", ok_line + "Host: t\r\n\tcontinued\r\n\r\n",
      ok_line + "Host: t\rx\r\n\r\n",
      // Names.
      ok_line + "Host : t\r\n\r\n", ok_line + "Host\t: t\r\n\r\n", ok_line + ": t\r\n\r\n", ok_line + "Host\r\n\r\n",
      ok_line + "Bad[name]: t\r\n\r\n", ok_line + " Host: t\r\n\r\n",
      // Bytes outside printable ASCII and tab.
      ok_line + "X-A: caf\xc3\xa9\r\n\r\n", ok_line + "X-\xc3\x9c: 1\r\n\r\n", "GET /caf\xc3\xa9 HTTP/1.1\r\n\r\n",
      ok_line + "X-A: a\x01z\r\n\r\n", ok_line + "X-A: a\x7fz\r\n\r\n", "GET /\x7f HTTP/1.1\r\n\r\n",
      // Each header http_parser or the server acts on, in any case.
      ok_line + "Connection: keep-alive\r\n\r\n", ok_line + "connection: close\r\n\r\n",
      ok_line + "Proxy-Connection: keep-alive\r\n\r\n", ok_line + "Content-Length: 0\r\n\r\n",
      ok_line + "CONTENT-LENGTH: 5\r\n\r\n", ok_line + "Transfer-Encoding: chunked\r\n\r\n",
      ok_line + "transfer-encoding: identity\r\n\r\n", ok_line + "Upgrade: websocket\r\n\r\n",
      ok_line + "Expect: 100-continue\r\n\r\n", ok_line + "expect: nothing\r\n\r\n",
      // Names that start with one (http_parser matches Transfer-Encoding and the others by prefix).
      ok_line + "Transfer-EncodingX: chunked\r\n\r\n", ok_line + "Transfer-Encoding-Y: gzip\r\n\r\n",
      ok_line + "Content-Lengthy: 5\r\n\r\n", ok_line + "Connectionx: close\r\n\r\n",
      ok_line + "Proxy-Connection2: close\r\n\r\n", ok_line + "Upgrade-Insecure-Requests: 1\r\n\r\n",
      ok_line + "Expect-CT: max-age=0\r\n\r\n",
      // One acted-on header after ordinary ones.
      ok_line + "Host: t\r\nAccept: */*\r\nContent-Length: 5\r\n\r\nhello",
  };
  for (const std::string& head : declined)
    EXPECT_EQ(simple_head(head, limit).length, 0u) << escaped(head);
}

TEST(simple_head, declines_a_head_cut_anywhere_before_its_final_lf) {
  const std::string head = "GET /p HTTP/1.1\r\nHost: t\r\nAccept: */*\r\n\r\n";
  for (std::size_t n = 0; n < head.size(); ++n)
    EXPECT_EQ(simple_head(std::string_view(head).substr(0, n), limit).length, 0u) << n;
  EXPECT_EQ(simple_head(head, limit).length, head.size());
}

TEST(simple_head, declines_a_head_longer_than_max_bytes) {
  const std::string head = "GET / HTTP/1.1\r\nX-Pad: " + std::string(500, 'p') + "\r\n\r\n";
  EXPECT_EQ(simple_head(head, head.size()).length, head.size());
  EXPECT_EQ(simple_head(head, head.size() - 1).length, 0u);
  EXPECT_EQ(simple_head(head + "GET / HTTP/1.1\r\n\r\n", head.size()).length, head.size());
}

// ---- request_parser with and without the shortcut ----

// splitmix64: the same streams on every standard library (no std:: distributions).
struct rng {
  std::uint64_t state;
  std::uint64_t next() noexcept {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) noexcept { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
  bool percent(unsigned p) noexcept { return below(100) < p; }
  template <class T, std::size_t N>
  const T& pick(const T (&a)[N]) noexcept {
    return a[below(N)];
  }
};

const char* const methods[] = {"GET", "GET", "GET", "GET", "HEAD", "HEAD", "POST", "POST", "PUT",
                               "DELETE", "OPTIONS", "get", "GETT", "CONNECT", "PATCH"};
const char* const targets[] = {"/", "/", "/", "/echo", "/a/b.html", "/?q=1", "/x?", "/#f", "/a#b?c", "*",
                               "http://h/p", "http://h", "HTTP://h:80/x?y", "/%41", "/a;b=c",
                               "/~u/!$&'()*+,=:@", "", "x/", "/a b", "/caf\xc3\xa9", "/a\x7f"};
const char* const versions[] = {"HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0",
                                "HTTP/1.10", "http/1.1", "HTTP/1.1 ", "HTTP/1.", "HTTP/0.9"};
// Header lines without their line end; "\n" inside one is replaced by the line end in use.
const char* const ordinary_headers[] = {"Host: t", "Host: t", "User-Agent: wrk", "Accept: */*",
                                        "Accept-Encoding: gzip", "X-Empty:", "X-Tab:\tv\t", "Cookie: a=b; c=d",
                                        "Host:t", "X-Sp:   v  ", "X-Transfer-Encoding: chunked", "XContent-Length: 5"};
const char* const other_headers[] = {
    // Acted on.
    "Connection: close", "Connection: keep-alive", "Connection: Upgrade", "connection: CLOSE",
    "Proxy-Connection: close", "Proxy-Connection: keep-alive", "Upgrade: websocket", "Expect: 100-continue",
    "expect: 100-Continue", "Expect: nothing", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked",
    "Transfer-Encoding: gzip, chunked", "Transfer-Encoding: chunked, gzip", "transfer-encoding: CHUNKED",
    "Transfer-Encoding: identity", "Content-Length: 0", "Content-Length: 5", "Content-Length: 5",
    "Content-Length: 05", "Content-Length: -1", "Content-Length: 99999999999999999999", "Content-Length: 5 5",
    "Content-Length: 2000000",
    // Names that start with an acted-on name.
    "Transfer-Encodingx: chunked", "Transfer-Encoding-X: gzip", "Content-Lengthy: 5", "Content-Length2: 3",
    "Connectionx: close", "Connection-Info: close", "Proxy-Connectionz: close", "Upgradex: h2c",
    "Upgrade-Insecure-Requests: 1", "Expectx: 100-continue", "Expect-CT: max-age=0",
    // Malformed or folded.
    "Host : t", "Content-Length : 5", "Transfer-Encoding : chunked", "Host\t: t", "X-A: 1\n continued",
    "X-A: 1\n\tcontinued", "Nocolon", ": novalue", "X-\xc3\x9c: 1", "X-A: caf\xc3\xa9", "X-A: a\x01z",
    "X-A: a\x7fz", "Bad[name]: 1", "X-A: a\rb", " Host: t"};
const char* const chunked_bodies[] = {"5\r\nhello\r\n0\r\n\r\n", "0\r\n\r\n", "2\r\nhi\r\n0\r\nX-T: 1\r\n\r\n",
                                      "5\r\nhel", "g\r\nhello\r\n0\r\n\r\n", "5;ext=1\r\nhello\r\n0\r\n\r\n",
                                      "FFFFFFFFFFFFFFFFFF\r\n", "0\r\nX-T : 1\r\n\r\n"};
const unsigned char interesting[] = {' ', '\t', '\r', '\n', ':', '?', '#', '/', 0x80, 0xff, 0, 'a', 'H', '1', ','};

std::string line_end(rng& r, bool clean) { return r.percent(clean ? 1 : 4) ? "\n" : "\r\n"; }

// One request: a request line, headers, maybe padding to a length around max_header_bytes, a
// body that matches its Content-Length or chunked header more often than not. Half are clean
// (what the shortcut takes, but for a header or a line end now and then), half anything.
std::string request(rng& r, std::size_t max_header_bytes) {
  static const char* const clean_methods[] = {"GET", "GET", "HEAD"};
  static const char* const clean_targets[] = {"/", "/", "/echo", "/a/b.html", "/%41", "/~u/!$&'()*+,=:@"};
  const bool clean = r.percent(50);
  std::string head = std::string(clean ? r.pick(clean_methods) : r.pick(methods)) + " " +
                     (clean ? r.pick(clean_targets) : r.pick(targets)) + " " +
                     (clean ? "HTTP/1.1" : r.pick(versions)) + line_end(r, clean);
  std::size_t content_length = 0;
  bool chunked = false;
  const std::size_t n = r.below(r.percent(70) ? 4 : 8);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string eol = line_end(r, clean);
    std::string h = r.percent(clean ? 95 : 40) ? r.pick(ordinary_headers) : r.pick(other_headers);
    for (std::size_t at = h.find('\n'); at != std::string::npos; at = h.find('\n', at + eol.size()))
      h.replace(at, 1, eol);
    if (h == "Content-Length: 5") content_length = 5;
    if (h == "Transfer-Encoding: chunked") chunked = true;
    head += h + eol;
  }
  if (r.percent(2)) head += "X-Big: " + std::string(15000 + r.below(6000), 'b') + "\r\n";
  if (r.percent(5)) {  // a head of max_header_bytes - 2 .. + 2 bytes, its final CRLF included
    const std::size_t want = max_header_bytes - 2 + r.below(5);
    const std::size_t fixed = head.size() + 9 + 2;  // "X-Pad: " CRLF, and the final CRLF
    if (want > fixed) head += "X-Pad: " + std::string(want - fixed, 'p') + "\r\n";
  }
  head += r.percent(clean ? 99 : 96) ? "\r\n" : "\n";
  if (chunked && r.percent(85)) head += r.pick(chunked_bodies);
  else if (content_length > 0 && r.percent(85)) head += "hello";
  else if (r.percent(5)) head += "stray";
  return head;
}

// 1 to 4 pipelined requests, sometimes with CRLFs between them, sometimes mutated.
std::string stream(rng& r, std::size_t max_header_bytes) {
  std::string s;
  const std::size_t n = 1 + r.below(r.percent(60) ? 2 : 4);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0 && r.percent(5)) s += "\r\n";
    s += request(r, max_header_bytes);
  }
  if (r.percent(30)) {
    for (std::size_t m = 1 + r.below(3); m > 0 && !s.empty(); --m) {
      const std::size_t at = r.below(s.size());
      const char c = static_cast<char>(r.percent(70) ? r.pick(interesting) : r.below(256));
      switch (r.below(4)) {
        case 0: s[at] = c; break;
        case 1: s.insert(at, 1, c); break;
        case 2: s.erase(at, 1); break;
        case 3: s.insert(at, s.substr(at, 1 + r.below(12))); break;
      }
    }
  }
  if (r.percent(8)) s.resize(r.below(s.size() + 1));
  return s;
}

std::string method_name(http_method m) { return http_method_str(m); }

// Feeds `input` to a request_parser in the pieces `cuts` make, as the server does (each piece
// in a buffer of its own, the rest of a piece fed again after an event, nothing after `failed`
// or after a request that does not keep the connection alive), and writes down every step and
// what the parser says at it. With `whole`, a request the parser takes in one step
// (take_simple_request, as the server's exchange does first) is written down as the two steps
// feed() would have made, from what the parser says after it.
std::string trace(const std::string& input, const std::vector<std::size_t>& cuts, parser_limits limits,
                  bool whole = false) {
  request_parser p(limits);
  std::string out;
  std::size_t pos = 0;
  for (std::size_t ci = 0; ci <= cuts.size(); ++ci) {
    const std::size_t end = ci < cuts.size() ? cuts[ci] : input.size();
    const std::string piece = input.substr(pos, end - pos);  // its own buffer: no view outlives it
    pos = end;
    std::string_view data(piece);
    for (int guard = 0; !data.empty(); ++guard) {
      if (guard > 100000) return out + "| no progress";
      if (const std::size_t n = whole ? p.take_simple_request(data) : 0; n != 0) {
        if (n > data.size()) return out + "| took more than given";
        data.remove_prefix(n);
        out += "| " + std::to_string(n - 1) + " in body head_done " + method_name(p.method()) + " " +
               escaped(p.path()) + (p.keep_alive() ? " keep-alive" : " close") +
               (p.keep_alive_needs_saying() ? " say-it" : "") + (p.expects_continue() ? " 100-continue" : "") +
               (p.has_body() ? " has-body" : "");
        out += "| 1" + std::string(p.in_message() ? " in" : " out") + (p.in_body() ? " body " : " ") +
               "message_done [" + escaped(p.body()) + "]" + (p.keep_alive() ? " keep-alive" : " close");
        if (!p.keep_alive()) return out;
        continue;
      }
      const request_parser::step s = p.feed(data);
      if (s.consumed > data.size()) return out + "| consumed more than given";
      data.remove_prefix(s.consumed);
      out += "| " + std::to_string(s.consumed) + (p.in_message() ? " in" : " out") + (p.in_body() ? " body " : " ");
      switch (s.what) {
        case request_parser::event::need_more:
          out += "need_more";
          if (!data.empty()) return out + " with " + std::to_string(data.size()) + " bytes left";
          break;
        case request_parser::event::head_done:
          out += "head_done " + method_name(p.method()) + " " + escaped(p.path()) +
                 (p.keep_alive() ? " keep-alive" : " close") + (p.keep_alive_needs_saying() ? " say-it" : "") +
                 (p.expects_continue() ? " 100-continue" : "") + (p.has_body() ? " has-body" : "");
          p.keep_body(true);
          break;
        case request_parser::event::message_done:
          out += "message_done [" + escaped(p.body()) + "]" + (p.keep_alive() ? " keep-alive" : " close");
          if (!p.keep_alive()) return out;  // the server closes here
          break;
        case request_parser::event::failed:
          return out + "failed " + std::to_string(p.status());
      }
    }
  }
  return out + "| end";
}

parser_limits limits_for(rng& r) {
  const std::size_t head_limits[] = {8 * 1024, 8 * 1024, 8 * 1024, 1024, 200, 16 * 1024, 16 * 1024 + 100, 20000};
  const std::size_t body_limits[] = {1024 * 1024, 1024 * 1024, 4, 5, 0};
  return parser_limits{.max_header_bytes = r.pick(head_limits), .max_body_bytes = r.pick(body_limits)};
}

std::vector<std::size_t> cuts_for(rng& r, std::size_t size, int pattern) {
  std::vector<std::size_t> cuts;
  if (pattern == 0 || size == 0) return cuts;  // whole: where the shortcut takes every head it can
  if (pattern == 2 && size <= 300) {           // byte by byte
    for (std::size_t i = 1; i < size; ++i) cuts.push_back(i);
    return cuts;
  }
  for (std::size_t k = 1 + r.below(4); k > 0; --k) cuts.push_back(r.below(size + 1));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

TEST(simple_head, request_parser_with_the_shortcut_steps_exactly_as_http_parser_alone) {
  const auto streams = cogwheel::test_support::scaled<std::size_t>(120000, 2000);
  std::size_t first = 0, last = streams;
  if (const char* s = std::getenv("COGWHEEL_TEST_SEED")) {
    first = std::strtoull(s, nullptr, 10);
    last = first + 1;
  }
  std::size_t runs = 0, simple_first = 0, differences = 0;
  for (std::size_t i = first; i < last; ++i) {
    rng r{0x5eed0000ULL + i};
    parser_limits with = limits_for(r);
    parser_limits without = with;
    without.simple_heads = false;
    const std::string input = stream(r, with.max_header_bytes);
    if (simple_head(input, with.max_header_bytes).length != 0) ++simple_first;
    const int patterns = r.percent(3) ? 3 : 2;
    for (int pattern = 0; pattern < patterns; ++pattern) {
      const std::vector<std::size_t> cuts = cuts_for(r, input.size(), pattern);
      const std::string a = trace(input, cuts, with);
      const std::string b = trace(input, cuts, without);
      const std::string c = trace(input, cuts, with, true);
      ++runs;
      if (a == b && c == b) continue;
      ++differences;
      if (differences <= 3) {
        std::string cut_list;
        for (std::size_t c : cuts) cut_list += std::to_string(c) + " ";
        ADD_FAILURE() << "stream " << i << " (COGWHEEL_TEST_SEED=" << i << "), max_header_bytes "
                      << with.max_header_bytes << ", max_body_bytes " << with.max_body_bytes << ", cuts [" << cut_list
                      << "]\ninput:    " << escaped(input) << "\nshortcut: " << a << "\nwhole:    " << c
                      << "\nparser:   " << b;
      }
    }
  }
  EXPECT_EQ(differences, 0u) << "of " << runs << " runs";
  std::printf("%zu streams, %zu runs, %zu begin with a head the shortcut takes, %zu differences\n", last - first, runs,
              simple_first, differences);
  // The comparison means something only if the shortcut ran often.
  if (last - first > 1) {
    EXPECT_GT(simple_first * 5, last - first) << "too few simple heads generated";
  }
}

}  // namespace
