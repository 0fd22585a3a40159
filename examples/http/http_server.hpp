// The HTTP/1.1 server of examples/http/http_server.cpp as a library its tests link: one connection's
// whole life is serve_connection(), so a test drives it over a loopback socket, on the paused
// clock, and sees exactly when and how it answers and closes.
//
// Routes: GET (or HEAD) / answers body_bytes of fixed text; POST /echo answers the request's
// body (Content-Length or chunked); anything else is 404. Keep-alive and pipelining: requests
// already received are answered in order, their responses written together.
//
// The four timeouts of nginx, each enforced by the runtime's timers, never by polling:
//   header:    the whole request head, counted from the accept (first request) or from its first
//              byte (a later request), or from the end of the previous response when that byte
//              was already there (pipelined). Cut with 408 when part of the head had come
//              (the issue asks for it; nginx 1.22 closes without a response).
//   body:      between two reads of a request body.
//   keepalive: idle between requests (after a response, before the next request's first byte).
//   send:      between two writes that make progress.
// The four share the connection's one expiry, a time point that each read or write races with
// its awaiter's own timer (one operation waits at a time; http_server_session.cpp says why).
//
// And one budget per request (docs/deadlines.md), when request_timeout is set: from the start
// of a request's head (as the header timeout counts) to the end of its response. The
// connection runs in a scope on a movable deadline reset at each request and pushed out while
// the connection is idle, so its reads and writes, and anything a handler awaits, run under it
// (co_await current_deadline()). A request that overruns it is cut without a response.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <cogwheel/cogwheel.hpp>

namespace http_example {

using cogwheel::clock;

struct server_config {
  std::size_t body_bytes = 13;
  std::size_t max_header_bytes = 8 * 1024;
  std::size_t max_body_bytes = 1024 * 1024;
  clock::duration header_timeout = std::chrono::seconds(60);
  clock::duration body_timeout = std::chrono::seconds(60);
  clock::duration keepalive_timeout = std::chrono::seconds(75);
  clock::duration send_timeout = std::chrono::seconds(60);
  clock::duration request_timeout{};  // one request's whole budget; zero: none
  // Bytes of the read buffer a TLS connection keeps between requests (it grows for a large head
  // or a body and shrinks back when the connection is idle again). A plain connection reads
  // from the core's buffer pool and keeps none.
  std::size_t idle_buffer_bytes = 1024;
  // SO_SNDBUF of each connection; 0 keeps the kernel's autotuning (which lets a loopback
  // connection buffer more than a megabyte, so that a slow reader stalls no write).
  std::size_t send_buffer_bytes = 0;
  // How long a plain connection idle between requests waits in its coroutine frame before it
  // parks (cogwheel::park(): a small record instead of the frame; it comes back in a new
  // frame when bytes arrive). Zero parks at once, negative never. TLS connections never park.
  // 10 ms. A longer wait spares a busy keep-alive client whose gap between requests is longer
  // a park per request (a new frame and a spawn), but a burst of connections going idle together
  // then holds that many frames at once, and the frame pool keeps its peak, so memory per idle
  // connection grows (docs/http.md and bench/http/README.md have the sizes).
  clock::duration park_after = std::chrono::milliseconds(10);
};

// The body GET / answers: body_bytes of "Hello, World!\n" repeated ("Hello, World!" at 13).
std::string fixed_body(std::size_t bytes);

// Counters of one core (a connection touches only its own core's). Merge with operator+=.
struct server_stats {
  std::uint64_t connections = 0;
  std::uint64_t requests = 0;
  std::uint64_t header_timeouts = 0;
  std::uint64_t body_timeouts = 0;
  std::uint64_t keepalive_timeouts = 0;
  std::uint64_t send_timeouts = 0;
  std::uint64_t request_timeouts = 0;  // requests cut by request_timeout
  std::uint64_t status_400 = 0, status_404 = 0, status_413 = 0, status_431 = 0, status_501 = 0;
  std::uint64_t open_connections = 0;
  // Microseconds from a timeout's expiry to the moment its connection was cut (read cancelled
  // and completed), for the header, body and keepalive timeouts; the send timeout's too.
  std::vector<std::uint32_t> kick_lateness_us;

  server_stats& operator+=(const server_stats& o);
  // Requests refused as malformed or over a limit (404 is an answer, not counted here).
  std::uint64_t bad_requests() const noexcept { return status_400 + status_413 + status_431 + status_501; }
};

// Serves one accepted connection until it closes, times out or sends something the server
// refuses; the stream is closed on return. cfg and stats must outlive the task. Precondition:
// runs on a cogwheel loop thread; stats belongs to that core.
cogwheel::task<void> serve_connection(cogwheel::tcp_stream s, const server_config& cfg, server_stats& stats);

// The same over any stream with tcp_stream's read/write (tls::stream: http_server_tls.hpp),
// the first request's head due by `head_by`. Instantiated in http_server_session.cpp.
template <class Stream>
cogwheel::task<void> serve_stream(Stream s, const server_config& cfg, server_stats& stats, clock::time_point head_by);

}  // namespace http_example
