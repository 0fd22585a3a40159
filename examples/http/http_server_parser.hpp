// request_parser: Node's http_parser 2.9 (Debian's libhttp-parser-dev) behind a small interface
// that stops at the two points a server must act on: the end of a request's head (limits,
// routing, "Expect: 100-continue", the switch from the header to the body timeout) and the end
// of a request (answer it, then parse the next, pipelined one). Everything else is a status.
//
// Limits are checked as bytes arrive, not after: a head over max_header_bytes fails as soon as
// its byte max_header_bytes + 1 is fed (431), a Content-Length over max_body_bytes at the end of
// the head (413), a chunked body as soon as its decoded size passes the limit (413), a chunked
// body's trailer section as soon as it passes max_header_bytes (431), a chunk's framing (its
// size line with extensions and leading zeros, and the CRLFs, from the end of one chunk's data to
// the start of the next's) as soon as it passes max_header_bytes (400: http_parser counts a size
// line up to 80 KiB only, and none of it is body, so a body of one-byte chunks could otherwise
// be read for 80 GiB within the body limit). A Transfer-Encoding other
// than "chunked" is 501 (nginx does the same); every other malformed input is 400, among them a
// header name with whitespace before its colon (RFC 9112 §5.1: a server MUST reject it, since
// another server on the path may read "Content-Length : 5" differently, the start of request
// smuggling). A target in absolute form ("GET http://host/path", RFC 9112 §3.2.2) is routed by
// its path.
//
// The common simple head (a GET or HEAD of a plain path with no header that matters, see
// http_server_simple_head.hpp) is recognised without http_parser; it yields the same events
// and values, and every other head goes through http_parser as before.
#pragma once

#include <http_parser.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace http_example {

struct parser_limits {
  std::size_t max_header_bytes = 8 * 1024;
  std::size_t max_body_bytes = 1024 * 1024;
  // Whether a simple head may skip http_parser (http_server_simple_head.hpp). Always on in the
  // server; tests/http/simple_head_test turns it off to compare the two paths byte for byte.
  bool simple_heads = true;
};

class request_parser {
 public:
  enum class event {
    need_more,     // every byte given was used; the request (if any) is not complete
    head_done,     // the head just ended; method(), path(), ... are valid
    message_done,  // a whole request ended; body() holds it if keep_body was asked for
    failed,        // malformed or over a limit: answer status() and close
  };
  struct step {
    event what;
    std::size_t consumed;  // bytes of the input used; feed the rest again
  };

  explicit request_parser(parser_limits limits) noexcept;
  request_parser(const request_parser&) = delete;
  request_parser& operator=(const request_parser&) = delete;

  // Parses from the start of data until one of the events above. Precondition: the last step
  // was not `failed`. Inline up to the simple-head path: most requests take it, and feed_parser()
  // (http_parser's loop) is a large frame to set up for them (two calls per request).
  step feed(std::string_view data) noexcept {
    if (simple_end_) {  // the LF after a simple head: the message (without a body) ends
      assert(!data.empty() && data[0] == '\n');
      simple_end_ = false;
      in_message_ = false;
      return {event::message_done, 1};
    }
    if (step s{}; feed_simple(data, s)) return s;
    return feed_parser(data);
  }

  // A whole simple request at the start of data (a head simple_head() accepts; such a request
  // has no body), taken in one step: what feed() would give as head_done and then message_done,
  // without the second call and without copying the target. Returns the bytes taken, or 0 when
  // it declines (a request already begun, simple heads off, or not a simple head): then feed()
  // from the same byte, exactly as before. After it the parser is between requests, and
  // method(), path() and keep_alive() (true) describe the request taken until the next feed()
  // or take_simple_request(); path() is then a view into data, valid as long as data is.
  std::size_t take_simple_request(std::string_view data) noexcept;

  // Whether a request has begun (at least one of its bytes parsed) and not yet ended.
  bool in_message() const noexcept { return in_message_; }
  // Whether the head has ended and the body has not.
  bool in_body() const noexcept { return in_message_ && head_done_; }

  // Valid from head_done until the next request begins.
  http_method method() const noexcept { return method_; }
  std::string_view path() const noexcept { return path_view_; }
  bool keep_alive() const noexcept { return keep_alive_; }
  // Whether the response must say "Connection: keep-alive": an HTTP/1.0 request that asked to be
  // kept alive (1.0 closes unless told otherwise; ApacheBench -k waits for it).
  bool keep_alive_needs_saying() const noexcept {
    return keep_alive_ && http_1_0_;
  }
  bool expects_continue() const noexcept { return expect_continue_; }
  // Whether the head announced a body (Content-Length > 0 or chunked).
  bool has_body() const noexcept { return has_body_; }
  // The body of the request, kept only after keep_body(true) at head_done.
  const std::string& body() const noexcept { return body_; }
  void keep_body(bool keep) noexcept { keep_body_ = keep; }
  // The status to answer after `failed` (400, 413, 431 or 501).
  int status() const noexcept { return status_; }

 private:
  static const http_parser_settings& settings() noexcept;
  static int on_message_begin(http_parser* p) noexcept;
  static int on_url(http_parser* p, const char* at, std::size_t n) noexcept;
  static int on_header_field(http_parser* p, const char* at, std::size_t n) noexcept;
  static int on_header_value(http_parser* p, const char* at, std::size_t n) noexcept;
  static int on_headers_complete(http_parser* p) noexcept;
  static int on_body(http_parser* p, const char* at, std::size_t n) noexcept;
  static int on_chunk_header(http_parser* p) noexcept;
  static int on_message_complete(http_parser* p) noexcept;
  static request_parser& self(http_parser* p) noexcept { return *static_cast<request_parser*>(p->data); }
  void begin_message() noexcept;  // what on_message_begin resets
  bool feed_simple(std::string_view data, step& out) noexcept;
  step feed_parser(std::string_view data) noexcept;  // feed() through http_parser

  // Which header's value is being received (only the ones the server acts on).
  enum class watched : std::uint8_t { none, transfer_encoding, expect };

  http_parser parser_;
  parser_limits limits_;
  std::size_t head_bytes_ = 0;   // bytes of the current head parsed so far
  std::uint64_t body_bytes_ = 0;
  std::size_t trailer_bytes_ = 0;  // bytes of the current chunked body's trailer section so far
  std::size_t framing_bytes_ = 0;  // bytes of chunk framing since the last body byte
  const char* body_end_ = nullptr;  // end of the last body piece of the current execute
  std::string path_;             // the request target up to '?', bounded by max_header_bytes
  std::string_view path_view_;   // path(): path_, or a simple request's target in its input
  std::string body_;
  std::string field_;            // the current header name, lower case, at most 32 bytes kept
  std::string value_;            // the current watched header's value, at most 32 bytes kept
  bool field_done_ = false;
  watched watching_ = watched::none;
  bool in_message_ = false;
  bool head_done_ = false;
  bool keep_alive_ = true;
  bool expect_continue_ = false;
  bool has_body_ = false;
  bool keep_body_ = false;
  bool bad_transfer_encoding_ = false;
  bool in_query_ = false;
  bool trailers_begin_ = false;  // on_chunk_header saw the last chunk and paused the parser
  bool in_trailers_ = false;     // between the last chunk and the end of the request
  // A simple head was taken without http_parser (which stays at the start of a message): its
  // final LF is left in the input, as http_parser's pause leaves it, and ends the message.
  bool simple_end_ = false;
  http_method method_ = HTTP_GET;  // of the current request, from head_done on
  bool http_1_0_ = false;          // the current request is HTTP/1.0
  int status_ = 0;  // set by a callback that fails the request, else derived from the parser
};

}  // namespace http_example
