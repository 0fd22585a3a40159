// Responses of the HTTP example: the fixed GET / answer, kept pre-built per thread (only its
// Date changes, once a second), echo answers and error statuses appended to an output buffer.
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include "http_server.hpp"

namespace http_example {

// How the connection goes on after a response: HTTP/1.1 keep-alive needs no header, HTTP/1.0
// keep-alive says "Connection: keep-alive", a last response says "Connection: close".
enum class connection_header { none, keep_alive, close };

// One thread's pre-built response, shared by the connections writing it. A write may be in
// flight for as long as the send timeout, across a change of second that replaces the cache's
// copy, so each writer holds a reference (a plain count: a thread's blocks never leave it).
// Inline: every GET / takes a reference, reads the bytes and drops it.
struct response_block {
  unsigned refs = 0;
  std::string bytes;
};
class shared_response {
 public:
  shared_response() noexcept = default;
  explicit shared_response(response_block* b) noexcept : block_(b) {  // adds a reference
    if (block_ != nullptr) ++block_->refs;
  }
  shared_response(const shared_response& o) noexcept : shared_response(o.block_) {}
  shared_response& operator=(const shared_response&) = delete;
  shared_response(shared_response&& o) noexcept : block_(o.block_) { o.block_ = nullptr; }
  shared_response& operator=(shared_response&& o) noexcept {
    if (this != &o) {
      release();
      block_ = o.block_;
      o.block_ = nullptr;
    }
    return *this;
  }
  ~shared_response() { release(); }

  explicit operator bool() const noexcept { return block_ != nullptr; }
  std::string_view bytes() const noexcept { return block_->bytes; }
  void release() noexcept {
    if (block_ == nullptr) return;
    if (--block_->refs == 0) delete block_;
    block_ = nullptr;
  }

 private:
  response_block* block_ = nullptr;
};

// The thread's pre-built GET / responses, by connection_header, for one config and one second.
struct fixed_response_cache {
  const server_config* cfg = nullptr;
  std::size_t body_bytes = 0;
  std::time_t second = -1;
  std::string body;
  shared_response response[3];  // the cache's own references
};

// Builds c's responses for cfg and the current second and returns one (fixed_response's slow
// path).
shared_response rebuild_fixed_response(fixed_response_cache& c, const server_config& cfg, connection_header how);

// The complete GET / response for cfg (head and body), as of the current second. Allocates
// only when the second or the config changes. Inline up to the cache's check: every GET /
// takes this path, and a call each way would be a large share of its work.
inline shared_response fixed_response(const server_config& cfg, connection_header how) {
  thread_local fixed_response_cache c;
  if (c.cfg == &cfg && c.body_bytes == cfg.body_bytes && c.second == std::time(nullptr)) [[likely]]
    return c.response[static_cast<int>(how)];
  return rebuild_fixed_response(c, cfg, how);
}

// Appends a response with this status and body.
void append_response(std::string& out, int status, std::string_view body, connection_header how);

// "HTTP/1.1 100 Continue" before a body the client waits to be asked for.
void append_continue(std::string& out);

}  // namespace http_example
