// serve_connection: the I/O and the timing of one connection around its exchange.
//
// Two deadlines per connection, each waited on by one operation at a time: `reading` (the
// header, body and keepalive timeouts; only the read waits on it) and `sending` (the send
// timeout; only the write waits on it). Resetting a deadline later is O(1) and lazy on the
// wheel, so a keep-alive request costs one reset of each and no timer surgery.
#include <sys/socket.h>

#include <algorithm>

#include "http_server.hpp"
#include "http_server_exchange.hpp"
#ifdef COGWHEEL_HTTP_TLS
#include <cogwheel/tls/stream.hpp>
#endif

namespace http_example {

using namespace cogwheel;

namespace {

// How long a refused request's connection keeps reading (and discarding) after the error
// response, so that closing with unread input does not reset the connection before the client
// has read the response (nginx's lingering close).
constexpr auto linger_time = std::chrono::seconds(2);
constexpr std::size_t max_lateness_samples = std::size_t{1} << 20;

void record_kick(server_stats& stats, const deadline& d) {
  if (stats.kick_lateness_us.size() >= max_lateness_samples) return;
  const auto late = std::chrono::duration_cast<std::chrono::microseconds>(now() - d.expiry()).count();
  stats.kick_lateness_us.push_back(static_cast<std::uint32_t>(std::clamp<long long>(late, 0, UINT32_MAX)));
}

// The socket under a connection's stream (plain, or under TLS).
tcp_stream& socket_of(tcp_stream& s) { return s; }
#ifdef COGWHEEL_HTTP_TLS
tcp_stream& socket_of(tls::stream& s) { return s.lower(); }
#endif

// Stops writing, then reads and drops what the client still sends until it closes its side or
// linger_time passes. The shutdown is the plain syscall: it never blocks, whereas io_uring runs
// IORING_OP_SHUTDOWN on a worker thread, a round trip for nothing.
template <class Stream>
task<void> linger(Stream& s, deadline& reading) {
  ::shutdown(socket_of(s).native_handle(), SHUT_WR);
  reading.reset(linger_time);
  std::byte sink[1024];
  for (;;) {
    auto n = co_await with_deadline(s.read(sink), reading);
    if (!n || *n == 0) co_return;
  }
}

}  // namespace

server_stats& server_stats::operator+=(const server_stats& o) {
  connections += o.connections;
  requests += o.requests;
  header_timeouts += o.header_timeouts;
  body_timeouts += o.body_timeouts;
  keepalive_timeouts += o.keepalive_timeouts;
  send_timeouts += o.send_timeouts;
  request_timeouts += o.request_timeouts;
  status_400 += o.status_400;
  status_404 += o.status_404;
  status_413 += o.status_413;
  status_431 += o.status_431;
  status_501 += o.status_501;
  open_connections += o.open_connections;
  kick_lateness_us.insert(kick_lateness_us.end(), o.kick_lateness_us.begin(), o.kick_lateness_us.end());
  return *this;
}

namespace {

// The connection's life; `request` (null without a request budget) is the deadline of the
// scope it runs in, reset where each request's head starts and pushed out while idle.
template <class Stream>
task<void> serve(Stream& s, const server_config& cfg, server_stats& stats, deadline* request,
                 clock::time_point head_by) {
  exchange ex(cfg, stats);
  deadline reading(head_by - now());  // the first request's head counts from the accept
  deadline sending(cfg.send_timeout);
  bool head_armed = true;  // `reading` holds the current head's header deadline
  bool idle_armed = false;  // `reading` holds the keepalive deadline

  exchange::then next = exchange::then::read;
  for (;;) {
    if (next == exchange::then::read) next = ex.process();
    if (auto out = ex.output(); !out.empty()) {
      // Inline rather than a helper task: a task per response would allocate a frame.
      while (!out.empty()) {
        sending.reset(cfg.send_timeout);  // later than before: O(1), applied lazily
        auto n = co_await with_deadline(s.write(out), sending);
        if (!n) {
          if (n.error() == errc::timed_out) {
            ++stats.send_timeouts;
            record_kick(stats, sending);
          }
          co_return;
        }
        out = out.subspan(*n);
      }
      ex.output_sent();
      if (ex.answered_any()) {  // the next head (pipelined or not) counts from here on
        head_armed = false;
        idle_armed = false;
      }
    }
    if (next == exchange::then::more) {
      next = exchange::then::read;
      continue;
    }
    if (next == exchange::then::close) co_return;
    if (next == exchange::then::linger) {
      co_await linger(s, reading);
      co_return;
    }

    enum class waiting { head, body, idle } w;
    if (ex.in_body()) {
      w = waiting::body;
      reading.reset(cfg.body_timeout);
    } else if (ex.in_head() || !ex.answered_any()) {
      w = waiting::head;
      if (!head_armed) {
        reading.reset(cfg.header_timeout);
        if (request != nullptr) request->reset(cfg.request_timeout);  // a request starts
      }
      head_armed = true;
    } else {
      w = waiting::idle;
      if (!idle_armed) {
        reading.reset(cfg.keepalive_timeout);
        if (request != nullptr) request->reset(clock::duration::max());  // between requests
      }
      idle_armed = true;
    }

    auto n = co_await with_deadline(s.read(ex.read_space()), reading);
    if (!n) {
      if (n.error() != errc::timed_out) co_return;
      record_kick(stats, reading);
      if (w == waiting::body) ++stats.body_timeouts;
      else if (w == waiting::idle) ++stats.keepalive_timeouts;
      else {
        ++stats.header_timeouts;
        if (ex.in_head()) {  // part of the head came: say why the connection ends (nginx 1.22
                             // logs a 408 but closes without sending one)
          ex.refuse(408);
          next = exchange::then::close;
          continue;
        }
      }
      co_return;
    }
    if (*n == 0) co_return;  // the client closed
    ex.received(*n);
    if (w == waiting::idle) idle_armed = false;  // the next request's head counts from its first byte
  }
}

}  // namespace

task<void> serve_connection(tcp_stream s, const server_config& cfg, server_stats& stats) {
  return serve_stream(std::move(s), cfg, stats, now() + cfg.header_timeout);
}

template <class Stream>
task<void> serve_stream(Stream s, const server_config& cfg, server_stats& stats, clock::time_point head_by) {
  ++stats.connections;
  ++stats.open_connections;
  struct open_count {
    server_stats& stats;
    ~open_count() { --stats.open_connections; }
  } counted{stats};
  (void)socket_of(s).set_nodelay(true);
  if (cfg.send_buffer_bytes > 0) (void)socket_of(s).set_send_buffer_size(static_cast<int>(cfg.send_buffer_bytes));
  if (cfg.request_timeout <= clock::duration::zero()) {
    co_await serve(s, cfg, stats, nullptr, head_by);
    co_return;
  }
  // The first request's head counts from the accept, as the header timeout does.
  deadline request(cfg.request_timeout);
  auto r = co_await with_deadline(serve(s, cfg, stats, &request, head_by), request);
  if (!r && r.error() == errc::timed_out) ++stats.request_timeouts;
}

template task<void> serve_stream(tcp_stream, const server_config&, server_stats&, clock::time_point);
#ifdef COGWHEEL_HTTP_TLS
template task<void> serve_stream(tls::stream, const server_config&, server_stats&, clock::time_point);
#endif

}  // namespace http_example
