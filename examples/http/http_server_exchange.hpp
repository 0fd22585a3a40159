// exchange: the synchronous half of a connection, with no I/O in it: the read buffer, the
// parser, and the responses waiting to be written. serve_connection() (http_server_session.cpp)
// does the reading, writing and timing around it.
//
// A connection that reads from the core's buffer pool holds its exchange only while a request is
// in flight: between requests it is back in a per-core cache (exchange::acquire / the deleter of
// exchange_ptr), so an idle connection holds none and the next request allocates nothing.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "http_server.hpp"
#include "http_server_parser.hpp"
#include "http_server_response.hpp"

namespace http_example {

class exchange {
 public:
  // What the connection does once the pending output is written.
  enum class then {
    read,    // read more of the current or the next request
    more,    // enough output for now: write it, then process() the requests still buffered
    close,   // the last response ("Connection: close" asked, or HTTP/1.0 without keep-alive)
    linger,  // a refused request: stop writing, drain what the client still sends, close
  };

  exchange(const server_config& cfg, server_stats& stats);
  exchange(const exchange&) = delete;
  exchange& operator=(const exchange&) = delete;

  // Hands the exchange back to its core's cache (destroyed, its memory kept for the next
  // acquire, up to a bound). Precondition: on the core that acquired it.
  struct recycle {
    void operator()(exchange* e) const noexcept;
  };
  // A fresh exchange, its memory from this core's cache when there is some.
  static std::unique_ptr<exchange, recycle> acquire(const server_config& cfg, server_stats& stats);

  // Parses `fresh` (a read that did not go into read_space(), e.g. a pooled buffer) after any
  // bytes still buffered, as process() does; whatever is left unparsed is copied into the
  // exchange's own buffer, so the caller may drop `fresh` at once.
  then process(std::span<const std::byte> fresh);

  // Parses every buffered byte, appending the responses of the requests that ended. Requests
  // pipelined in one read are all answered, in order, in one output.
  then process();

  // Appends a refusal (408 on a header timeout) that closes the connection.
  void refuse(int status) { append(status, {}, connection_header::close); }

  // Where the next read goes. Shrinks the buffer back to cfg.idle_buffer_bytes between
  // requests, grows it when the last read filled it.
  std::span<std::byte> read_space();
  void received(std::size_t n) noexcept {
    end_ += n;
    filled_ = end_ == cap_;
  }

  // The responses waiting to be written; output_sent() once they all are.
  std::span<const std::byte> output() const noexcept;
  void output_sent() noexcept;

  // Whether part of a request's head has arrived (its first byte, or more, but not the end).
  bool in_head() const noexcept { return parser_.in_message() && !parser_.in_body(); }
  bool in_body() const noexcept { return parser_.in_body(); }
  // Whether any request has been answered on this connection.
  bool answered_any() const noexcept { return answered_ > 0; }
  // Between requests: nothing buffered, nothing to write, no request begun. An exchange at rest
  // holds nothing a fresh one would not (answered_any() aside).
  bool at_rest() const noexcept { return !parser_.in_message() && begin_ == end_ && !solo_ && out_.empty(); }

 private:
  enum class route : unsigned char { fixed, fixed_head, echo, metrics, not_found };

  static route route_for(http_method m, std::string_view path) noexcept;
  then parse(const std::byte* data, std::size_t& begin, std::size_t end);
  void respond();
  void append(int status, std::string_view body, connection_header how);
  void append_raw(std::string_view bytes);
  void unshare();  // moves a solo_ response into out_, before more joins it

  const server_config& cfg_;
  server_stats& stats_;
  request_parser parser_;
  std::unique_ptr<std::byte[]> buf_;
  std::size_t cap_ = 0, begin_ = 0, end_ = 0;
  bool filled_ = false;  // the last read filled the buffer: more is probably waiting
  route route_ = route::not_found;
  std::uint64_t answered_ = 0;
  // The output is either one shared fixed response (the common case: no copy) or out_.
  shared_response solo_;
  std::string out_;
};

}  // namespace http_example
