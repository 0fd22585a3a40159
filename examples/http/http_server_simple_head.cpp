#include "http_server_simple_head.hpp"

#include <array>
#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace http_example {

namespace {

// The byte classes the scan tests, one table (a load and a test per byte):
// - token: RFC 9110 §5.6.2 tchar: http_parser's `tokens` table (strict) and request_parser's
//   is_token_char are this very set;
// - path: what http_parser keeps in s_req_path (strict normal_url_char: 0x21..0x7E but '#' and '?');
// - value: a header value's bytes both http_parser modes accept, without the CR and LF that end it.
enum : unsigned char { token_class = 1, path_class = 2, value_class = 4 };
constexpr std::array<unsigned char, 256> byte_classes = [] {
  std::array<unsigned char, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] |= token_class;
  for (int c = 'a'; c <= 'z'; ++c) t[c] |= token_class;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] |= token_class;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] |= token_class;
  for (int c = 0x21; c < 0x7f; ++c)
    if (c != '#' && c != '?') t[c] |= path_class;
  for (int c = 0x20; c < 0x7f; ++c) t[c] |= value_class;
  t['\t'] |= value_class;
  return t;
}();

// The first byte at or after p, before end, not of class `cls` (end if none).
inline const char* skip(const char* p, const char* end, unsigned char cls) noexcept {
  while (p != end && (byte_classes[static_cast<unsigned char>(*p)] & cls) != 0) ++p;
  return p;
}

// skip(p, end, value_class), 16 bytes at a time where SSE2 is (a header value is most of a
// head, so this loop is most of the scan).
inline const char* skip_value(const char* p, const char* end) noexcept {
#ifdef __SSE2__
  const __m128i space = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f), tab = _mm_set1_epi8('\t');
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Not a value byte: below 0x20 or, as a signed byte, 0x80 and up; or 0x7F; a tab is one.
    const __m128i below = _mm_cmplt_epi8(v, space);
    const __m128i bad = _mm_andnot_si128(_mm_cmpeq_epi8(v, tab), _mm_or_si128(below, _mm_cmpeq_epi8(v, del)));
    const auto mask = static_cast<unsigned>(_mm_movemask_epi8(bad));
    if (mask != 0) return p + __builtin_ctz(mask);
    p += 16;
  }
#endif
  return skip(p, end, value_class);
}

constexpr char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c; }

bool starts_with_lower(std::string_view name, std::string_view lower_prefix) noexcept {
  if (name.size() < lower_prefix.size()) return false;
  for (std::size_t i = 0; i < lower_prefix.size(); ++i)
    if (lower(name[i]) != lower_prefix[i]) return false;
  return true;
}

// The headers http_parser gives a meaning (connection, proxy-connection, content-length,
// transfer-encoding, upgrade) and the one request_parser watches (expect). By prefix:
// http_parser notes a Transfer-Encoding as soon as a name starts with it ("Transfer-Encodingx"
// is answered 501), so a longer name is declined too.
bool acted_on(std::string_view name) noexcept {
  using namespace std::string_view_literals;
  switch (lower(name[0])) {
    case 'c': return starts_with_lower(name, "connection"sv) || starts_with_lower(name, "content-length"sv);
    case 'p': return starts_with_lower(name, "proxy-connection"sv);
    case 't': return starts_with_lower(name, "transfer-encoding"sv);
    case 'u': return starts_with_lower(name, "upgrade"sv);
    case 'e': return starts_with_lower(name, "expect"sv);
    default: return false;
  }
}

}  // namespace

simple_request_head simple_head(std::string_view data, std::size_t max_bytes) noexcept {
  if (data.size() > max_bytes) data = data.substr(0, max_bytes);
  // Pointers, not indices into substr()s: each substr() checks its bounds (and may throw), and
  // this scan runs on every request.
  const char* const begin = data.data();
  const char* const end = begin + data.size();
  simple_request_head h;
  const char* p;
  if (data.starts_with("GET /")) {
    h.method = HTTP_GET;
    p = begin + 4;
  } else if (data.starts_with("HEAD /")) {
    h.method = HTTP_HEAD;
    p = begin + 5;
  } else {
    return {};
  }
  const char* const target = p;
  p = skip(p, end, path_class);
  h.target = std::string_view(target, static_cast<std::size_t>(p - target));
  constexpr std::string_view version = " HTTP/1.1\r\n";
  if (static_cast<std::size_t>(end - p) < version.size() || std::memcmp(p, version.data(), version.size()) != 0)
    return {};
  p += version.size();
  for (;;) {  // header lines, each "name:value CRLF", until the empty line
    if (end - p < 2) return {};  // not even the final CRLF: the head is not all here
    if (p[0] == '\r' && p[1] == '\n') {
      h.length = static_cast<std::size_t>(p + 2 - begin);
      return h;
    }
    const char* const name = p;
    p = skip(p, end, token_class);
    if (p == name || p == end || *p != ':') return {};
    if (acted_on(std::string_view(name, static_cast<std::size_t>(p - name)))) return {};
    p = skip_value(p + 1, end);
    if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return {};
    p += 2;
  }
}

}  // namespace http_example
