#include "http_server_simple_head.hpp"

#include <array>

namespace http_example {

namespace {

// RFC 9110 §5.6.2 tchar: http_parser's `tokens` table (strict) and request_parser's
// is_token_char are this very set.
constexpr std::array<bool, 256> token_chars = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

constexpr bool is_token(char c) noexcept { return token_chars[static_cast<unsigned char>(c)]; }
// What http_parser keeps in s_req_path (strict normal_url_char: 0x21..0x7E but '#' and '?').
constexpr bool is_path_char(char c) noexcept { return c > 0x20 && c < 0x7f && c != '#' && c != '?'; }
// A header value's bytes both http_parser modes accept, without the CR and LF that end it.
constexpr bool is_value_char(char c) noexcept { return (c >= 0x20 && c < 0x7f) || c == '\t'; }

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
  simple_request_head h;
  std::size_t i;
  if (data.starts_with("GET /")) {
    h.method = HTTP_GET;
    i = 4;
  } else if (data.starts_with("HEAD /")) {
    h.method = HTTP_HEAD;
    i = 5;
  } else {
    return {};
  }
  const std::size_t target_begin = i;
  while (i < data.size() && is_path_char(data[i])) ++i;
  h.target = data.substr(target_begin, i - target_begin);
  if (data.substr(i).substr(0, 11) != " HTTP/1.1\r\n") return {};
  i += 11;
  for (;;) {  // header lines, each "name:value CRLF", until the empty line
    if (data.substr(i).starts_with("\r\n")) {
      h.length = i + 2;
      return h;
    }
    const std::size_t name_begin = i;
    while (i < data.size() && is_token(data[i])) ++i;
    if (i == name_begin || i == data.size() || data[i] != ':') return {};
    if (acted_on(data.substr(name_begin, i - name_begin))) return {};
    ++i;
    while (i < data.size() && is_value_char(data[i])) ++i;
    if (!data.substr(i).starts_with("\r\n")) return {};
    i += 2;
  }
}

}  // namespace http_example
