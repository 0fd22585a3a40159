#include "http_server_parser.hpp"

#include <algorithm>
#include <cctype>

#include "http_server_simple_head.hpp"

namespace http_example {

namespace {

// Header names and the values the server acts on are short; anything longer than this is
// neither a watched name nor an acceptable value, so it is not kept.
constexpr std::size_t kept_bytes = 32;

void append_lower(std::string& to, const char* at, std::size_t n) {
  const std::size_t room = kept_bytes + 1 - std::min(to.size(), kept_bytes + 1);
  for (std::size_t i = 0; i < n && i < room; ++i)
    to.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(at[i]))));
}

// RFC 9110 §5.1: a field name is a token. http_parser lets spaces through ("Content-Length :"),
// and honours the header so named.
bool is_token_char(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) != 0 || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// RFC 9112 §3.2.2: a server MUST accept a target in absolute form ("http://host:80/path"); it is
// routed by its path ("http://host" alone means "/"). Any other target is left as it is.
void strip_absolute_form(std::string& path) {
  const std::string_view target(path);
  const std::size_t scheme_end = target.find("://");
  if (scheme_end == std::string_view::npos) return;
  const auto is = [&](std::string_view scheme) {
    return scheme_end == scheme.size() &&
           std::equal(scheme.begin(), scheme.end(), target.begin(),
                      [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
  };
  if (!is("http") && !is("https")) return;
  const std::string_view rest = target.substr(scheme_end + 3);
  const std::size_t slash = rest.find('/');
  std::string routed(slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash));
  path.swap(routed);
}

std::string_view trimmed(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

request_parser::request_parser(parser_limits limits) noexcept : limits_(limits) {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
}

// Heads longer than this go to http_parser, whatever the limit: it stops at 80 KiB itself.
constexpr std::size_t simple_head_max_bytes = 16 * 1024;

bool request_parser::feed_simple(std::string_view data, step& out) noexcept {
  // (The LF after a simple head is feed()'s.)
  if (in_message_ || !limits_.simple_heads) return false;
  const simple_request_head h = simple_head(data, std::min(limits_.max_header_bytes, simple_head_max_bytes));
  if (h.length == 0) return false;
  begin_message();
  // No strip_absolute_form(): a simple head's target starts with '/', never with a scheme.
  path_.assign(h.target);
  path_view_ = path_;
  method_ = h.method;
  http_1_0_ = false;
  keep_alive_ = true;
  head_done_ = true;
  simple_end_ = true;
  out = {event::head_done, h.length - 1};
  return true;
}

std::size_t request_parser::take_simple_request(std::string_view data) noexcept {
  if (in_message_ || simple_end_ || !limits_.simple_heads) return 0;
  const simple_request_head h = simple_head(data, std::min(limits_.max_header_bytes, simple_head_max_bytes));
  if (h.length == 0) return 0;
  // What feed_simple() and the message's end leave behind, as far as it can be read between
  // requests (the accessors above); the rest of begin_message() is for http_parser's callbacks,
  // and the next request that goes through http_parser begins with it (on_message_begin).
  path_view_ = h.target;
  method_ = h.method;
  http_1_0_ = false;
  keep_alive_ = true;
  expect_continue_ = false;
  has_body_ = false;
  body_.clear();
  return h.length;
}

request_parser::step request_parser::feed_parser(std::string_view data) noexcept {
  std::size_t used = 0;
  for (;;) {
    // CR and LF before a request: http_parser skips them (RFC 9112 §2.2), but in the run that
    // then begins the head they would count toward its limit, and a byte at a time they would
    // not (the message has not begun). Skipped here, they never count.
    if (!in_message_) {
      while (used < data.size() && (data[used] == '\r' || data[used] == '\n')) ++used;
      if (used == data.size()) return {event::need_more, used};
    }
    http_parser_pause(&parser_, 0);
    const bool in_head = !in_body();  // then this run ends at the end of the head at the latest
    const bool trailing = in_trailers_;
    // A head (and a trailer section) is given to http_parser no further than one byte past
    // max_header_bytes: past it the request is refused with 431 at that byte, so whatever
    // follows (a byte http_parser would refuse, a callback's late verdict on a long field) can
    // never turn it into a 400 in one read and leave it a 431 in another.
    // The same for a chunked body's framing: a run may end mid-data (the framing after it is
    // then counted from its last body byte), never past the framing's limit.
    const bool framing = !in_head && !trailing && (parser_.flags & F_CHUNKED) != 0;
    std::size_t len = data.size() - used;
    if (in_head || trailing) {
      const std::size_t so_far = trailing ? trailer_bytes_ : in_message_ ? head_bytes_ : 0;
      len = std::min(len, limits_.max_header_bytes + 1 - so_far);
    } else if (framing) {
      len = std::min(len, limits_.max_header_bytes + 1 - framing_bytes_);
    }
    body_end_ = nullptr;
    const char* const start = data.data() + used;
    const std::size_t n = http_parser_execute(&parser_, &settings(), start, len);
    used += n;
    const http_errno err = HTTP_PARSER_ERRNO(&parser_);
    const bool going = err == HPE_OK || err == HPE_PAUSED;
    if (framing && going) {
      framing_bytes_ = body_end_ != nullptr ? static_cast<std::size_t>(start + n - body_end_) : framing_bytes_ + n;
      if (framing_bytes_ > limits_.max_header_bytes) {
        status_ = 400;
        return {event::failed, used};
      }
    }
    if (in_head && in_message_ && going) {
      // Paused at the end of the head, the parser has not consumed the head's final LF yet.
      head_bytes_ += n + (err == HPE_PAUSED ? 1 : 0);
      if (head_bytes_ > limits_.max_header_bytes) {
        status_ = 431;
        return {event::failed, used};
      }
    }
    if (trailing && going) {  // http_parser alone would take 80 KiB of trailers
      trailer_bytes_ += n;
      if (trailer_bytes_ > limits_.max_header_bytes) {
        status_ = 431;
        return {event::failed, used};
      }
    }
    if (err == HPE_PAUSED && trailers_begin_) {  // the last chunk ended: count from here on
      trailers_begin_ = false;
      in_trailers_ = true;
      if (used == data.size()) return {event::need_more, used};  // a length of 0 would mean EOF
      continue;
    }
    if (err == HPE_OK) {
      if (used < data.size()) continue;  // stopped at the cut above, short of the limit
      return {event::need_more, used};
    }
    // Paused by on_headers_complete (the request goes on) or by on_message_complete.
    if (err == HPE_PAUSED) return {in_message_ ? event::head_done : event::message_done, used};
    if (status_ == 0) {
      if (err == HPE_HEADER_OVERFLOW) status_ = 431;
      // An unsupported Transfer-Encoding is 501 only in a head that parsed (on_headers_complete
      // answers it): bad_transfer_encoding_ is judged when http_parser hands over the next
      // header's first bytes, which it does before a malformed line only when the read ends
      // there, so honouring it here made a malformed head 501 or 400 by how it was cut.
      else if (err == HPE_INVALID_TRANSFER_ENCODING) status_ = 501;
      else status_ = 400;
    }
    return {event::failed, used};
  }
}

int request_parser::on_message_begin(http_parser* p) noexcept {
  self(p).begin_message();
  return 0;
}

void request_parser::begin_message() noexcept {
  in_message_ = true;
  head_done_ = false;
  head_bytes_ = 0;
  body_bytes_ = 0;
  path_.clear();
  body_.clear();
  field_.clear();
  value_.clear();
  field_done_ = false;
  watching_ = watched::none;
  expect_continue_ = false;
  has_body_ = false;
  keep_body_ = false;
  bad_transfer_encoding_ = false;
  in_query_ = false;
  trailer_bytes_ = 0;
  framing_bytes_ = 0;
  trailers_begin_ = false;
  in_trailers_ = false;
}

int request_parser::on_url(http_parser* p, const char* at, std::size_t n) noexcept {
  request_parser& r = self(p);
  if (r.in_query_) return 0;
  const std::string_view piece(at, n);
  const std::size_t q = piece.find('?');
  r.path_.append(piece.substr(0, q));  // bounded: the head limit stops an endless target
  if (q != std::string_view::npos) r.in_query_ = true;
  return 0;
}

int request_parser::on_header_field(http_parser* p, const char* at, std::size_t n) noexcept {
  request_parser& r = self(p);
  if (r.field_done_) {  // a new header begins: the previous value is complete
    if (r.watching_ == watched::transfer_encoding && trimmed(r.value_) != "chunked")
      r.bad_transfer_encoding_ = true;
    if (r.watching_ == watched::expect && trimmed(r.value_) == "100-continue") r.expect_continue_ = true;
    r.field_.clear();
    r.value_.clear();
    r.field_done_ = false;
    r.watching_ = watched::none;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_token_char(at[i])) {
      r.status_ = 400;
      return -1;
    }
  }
  append_lower(r.field_, at, n);
  return 0;
}

int request_parser::on_header_value(http_parser* p, const char* at, std::size_t n) noexcept {
  request_parser& r = self(p);
  if (!r.field_done_) {
    r.field_done_ = true;
    r.watching_ = r.field_ == "transfer-encoding" ? watched::transfer_encoding
                  : r.field_ == "expect"          ? watched::expect
                                                  : watched::none;
  }
  if (r.watching_ != watched::none) append_lower(r.value_, at, n);
  return 0;
}

int request_parser::on_headers_complete(http_parser* p) noexcept {
  request_parser& r = self(p);
  if (r.field_done_) on_header_field(p, nullptr, 0);  // closes the last header's value
  r.head_done_ = true;
  strip_absolute_form(r.path_);
  r.path_view_ = r.path_;
  r.method_ = static_cast<http_method>(p->method);
  r.http_1_0_ = p->http_major == 1 && p->http_minor == 0;
  r.keep_alive_ = http_should_keep_alive(p) != 0;
  if (r.bad_transfer_encoding_) {
    r.status_ = 501;
    return -1;
  }
  const bool chunked = (p->flags & F_CHUNKED) != 0;
  const bool sized = (p->flags & F_CONTENTLENGTH) != 0;
  if (sized && p->content_length > r.limits_.max_body_bytes) {
    r.status_ = 413;
    return -1;
  }
  r.has_body_ = chunked || (sized && p->content_length > 0);
  http_parser_pause(p, 1);
  return 0;
}

int request_parser::on_body(http_parser* p, const char* at, std::size_t n) noexcept {
  request_parser& r = self(p);
  r.body_bytes_ += n;
  if (r.body_bytes_ > r.limits_.max_body_bytes) {
    r.status_ = 413;
    return -1;
  }
  if (r.keep_body_) r.body_.append(at, n);
  r.body_end_ = at + n;
  return 0;
}

int request_parser::on_chunk_header(http_parser* p) noexcept {
  // The last chunk (size 0): what follows up to the end of the request is the trailer section.
  // Pausing here lets feed() count its bytes from the first one.
  if (p->content_length == 0) {
    self(p).trailers_begin_ = true;
    http_parser_pause(p, 1);
  }
  return 0;
}

int request_parser::on_message_complete(http_parser* p) noexcept {
  request_parser& r = self(p);
  r.in_message_ = false;
  r.in_trailers_ = false;
  http_parser_pause(p, 1);
  return 0;
}

const http_parser_settings& request_parser::settings() noexcept {
  static const http_parser_settings s = [] {
    http_parser_settings x;
    http_parser_settings_init(&x);
    x.on_message_begin = &request_parser::on_message_begin;
    x.on_url = &request_parser::on_url;
    x.on_header_field = &request_parser::on_header_field;
    x.on_header_value = &request_parser::on_header_value;
    x.on_headers_complete = &request_parser::on_headers_complete;
    x.on_body = &request_parser::on_body;
    x.on_chunk_header = &request_parser::on_chunk_header;
    x.on_message_complete = &request_parser::on_message_complete;
    return x;
  }();
  return s;
}

}  // namespace http_example
