// serve_connection: the I/O and the timing of one connection around its exchange.
//
// One expiry per connection, a time point: the header, body and keepalive timeouts while it
// reads, the send timeout while it writes (one operation waits at a time). Each read and write
// races it with the timer inside its own awaiter (with_deadline(op, time point)): scheduled when
// the wait starts, cancelled in O(1) when the operation completes. A `deadline` object would be
// reset lazily instead, but it is 128 B more in every idle connection's frame.
#include <sys/socket.h>

#include <algorithm>
#include <memory>
#include <new>
#include <optional>

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

void record_kick(server_stats& stats, clock::time_point expiry) {
  if (stats.kick_lateness_us.size() >= max_lateness_samples) return;
  const auto late = std::chrono::duration_cast<std::chrono::microseconds>(now() - expiry).count();
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
task<void> linger(Stream& s) {
  ::shutdown(socket_of(s).native_handle(), SHUT_WR);
  const clock::time_point until = now() + linger_time;
  std::byte sink[1024];
  for (;;) {
    auto n = co_await with_deadline(s.read(sink), until);
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

// A sleep in a frame of its own, allocated only while it runs (a dry buffer pool): the
// connection's frame stays small.
task<void> pause(clock::duration d) { co_await sleep_for(d); }

// Whether a stream reads from the core's buffer pool (tcp_stream; TLS reads into the exchange).
template <class Stream>
constexpr bool pooled_reads = requires(Stream& s) { s.read_pooled(); };

// The awaiter of a read under the connection's deadline, pooled or into the exchange's buffer.
template <class Stream, bool Pooled>
struct read_awaiter_of {
  using type = decltype(with_deadline(std::declval<Stream&>().read(std::span<std::byte>()), clock::time_point()));
};
template <class Stream>
struct read_awaiter_of<Stream, true> {
  using type = decltype(with_deadline(std::declval<Stream&>().read_pooled(), clock::time_point()));
};

// The one frame slot of serve()'s read and write awaiters (see serve()): one is held at a time,
// made in place from the prvalue with_deadline returns. A std::variant's emplace would move it
// in: one more awaiter and operation built, moved and destroyed per read and per write.
template <class Read, class Write>
class awaiter_slot {
 public:
  awaiter_slot() noexcept = default;
  awaiter_slot(const awaiter_slot&) = delete;
  awaiter_slot& operator=(const awaiter_slot&) = delete;
  // An awaiter still held (the frame destroyed while it waits) cancels and waits for its
  // operation in its destructor, as it would in a variant.
  ~awaiter_slot() { clear(); }

  // Precondition: the slot is empty (clear() after each co_await).
  template <class Make>
  Read& read(Make&& make) {
    Read* r = ::new (static_cast<void*>(bytes_)) Read(make());
    held_ = held::read;
    return *r;
  }
  template <class Make>
  Write& write(Make&& make) {
    Write* w = ::new (static_cast<void*>(bytes_)) Write(make());
    held_ = held::write;
    return *w;
  }
  void clear() noexcept {
    if (held_ == held::read) std::launder(reinterpret_cast<Read*>(bytes_))->~Read();
    else if (held_ == held::write) std::launder(reinterpret_cast<Write*>(bytes_))->~Write();
    held_ = held::none;
  }

 private:
  enum class held : unsigned char { none, read, write };
  alignas(Read) alignas(Write) unsigned char bytes_[std::max(sizeof(Read), sizeof(Write))];
  held held_ = held::none;
};

// A parked connection's wait, as it ended (park()): what the read got, and the keepalive expiry
// it waited under.
struct unparked {
  result<pooled_buffer> got;
  clock::time_point expiry;
};

void park_connection(tcp_stream s, const server_config& cfg, server_stats& stats, clock::time_point expiry);

// The connection's life, in one frame that is all an idle connection holds (with the stream's
// socket): its expiry and one awaiter at a time. `request` (null without a request budget) is
// the deadline of the scope it runs in, reset where each request's head starts and pushed out
// while idle.
//
// Parked (docs/http.md has the sizes): a plain connection idle between requests for
// cfg.park_after leaves its frame: park() keeps the stream, a pooled read and a timer at the
// keepalive expiry in a record of its own, and when the read ends (bytes, the client closing,
// the keepalive timeout) serve() starts again in a new frame from `woke`, where it left off.
// Not with a request budget (its scope lives in the frame around this one).
//
// What keeps the frame small while it waits (docs/http.md has the sizes):
// - One expiry for the header, body, keepalive and send timeouts: only one operation waits at a
//   time (the read or the write), so the write borrows it and gives the read's expiry back. A
//   time point, not a `deadline`: the awaiter's own timer races it (see the top of the file).
// - The read and the write awaiters share one slot (`op`): a compiler gives every awaiter of a
//   coroutine a frame slot of its own for the whole life of the frame, so two would be held
//   while idle; an awaiter_slot holds whichever is in flight.
// - On a tcp_stream the read takes its buffer from the core's pool when data arrives, and the
//   exchange (parser, leftover bytes, output) is taken from the core's cache when data arrives
//   and given back once the connection is between requests: an idle connection holds neither.
template <class Stream>
task<void> serve(Stream s, const server_config& cfg, server_stats& stats, deadline* request,
                 clock::time_point head_by, std::optional<unparked> woke = std::nullopt) {
  struct open_count {
    server_stats& stats;
    bool parked = false;  // the connection lives on in a park record, still open
    ~open_count() {
      if (!parked) --stats.open_connections;
    }
  } counted{stats};
  if (!woke) {
    ++stats.connections;
    ++stats.open_connections;
    (void)socket_of(s).set_nodelay(true);
    if (cfg.send_buffer_bytes > 0) (void)socket_of(s).set_send_buffer_size(static_cast<int>(cfg.send_buffer_bytes));
  }

  constexpr bool pooled = pooled_reads<Stream>;
  using read_awaiter = typename read_awaiter_of<Stream, pooled>::type;
  using read_result = decltype(std::declval<read_awaiter&>().await_resume());
  using write_awaiter = decltype(with_deadline(s.write(std::span<const std::byte>()), clock::time_point()));

  // The first request's head counts from the accept; a connection back from its park is idle
  // under the keepalive expiry it parked with.
  clock::time_point expiry = woke ? woke->expiry : head_by;
  awaiter_slot<read_awaiter, write_awaiter> op;  // by role: TLS reads and writes are one type
  std::unique_ptr<exchange, exchange::recycle> ex;  // pooled: null while between requests
  if constexpr (!pooled) ex = exchange::acquire(cfg, stats);
  bool answered = woke.has_value();    // a request has been answered on this connection
  bool head_armed = !woke.has_value();  // `expiry` is the current head's header deadline
  bool idle_armed = woke.has_value();   // `expiry` is the keepalive deadline
  // Whether the connection parks once idle for cfg.park_after (0: at once, with no frame to
  // keep anything in; not before the keepalive timeout ends it: then it would idle in its frame).
  const bool parks = pooled && request == nullptr && cfg.park_after > clock::duration::zero() &&
                     cfg.park_after < cfg.keepalive_timeout;

  exchange::then next = exchange::then::read;
  for (;;) {
    if (ex) {
      if (auto out = ex->output(); !out.empty()) {
        const clock::time_point read_expiry = expiry;
        while (!out.empty()) {
          expiry = now() + cfg.send_timeout;
          auto& w = op.write([&] { return with_deadline(s.write(out), expiry); });
          auto n = co_await w;
          op.clear();
          if (!n) {
            if (n.error() == errc::timed_out) {
              ++stats.send_timeouts;
              record_kick(stats, expiry);
            }
            co_return;
          }
          out = out.subspan(*n);
        }
        ex->output_sent();
        if (ex->answered_any()) {  // the next head (pipelined or not) counts from here on
          answered = true;
          head_armed = false;
          idle_armed = false;
        }
        if (head_armed || idle_armed) expiry = read_expiry;
      }
    }
    if (next == exchange::then::more) {  // the rest of a long pipeline, now that its output is out
      next = ex->process();
      continue;
    }
    if (next == exchange::then::close) co_return;
    if (next == exchange::then::linger) {
      co_await linger(s);
      co_return;
    }
    if constexpr (pooled) {
      // Between requests the exchange goes back to the core's cache, unless the connection
      // parks once idle: parking ends this frame, which gives it back then, and a busy
      // connection keeps it (no cache round trip and parser set-up per request).
      if (ex && !parks && ex->at_rest()) ex.reset();
    }

    enum class waiting { head, body, idle } wait;
    if (ex && ex->in_body()) {
      wait = waiting::body;
      expiry = now() + cfg.body_timeout;
    } else if ((ex && ex->in_head()) || !answered) {
      wait = waiting::head;
      if (!head_armed) {
        expiry = now() + cfg.header_timeout;
        if (request != nullptr) request->reset(cfg.request_timeout);  // a request starts
      }
      head_armed = true;
    } else {
      wait = waiting::idle;
      if (!idle_armed) {
        expiry = now() + cfg.keepalive_timeout;
        if (request != nullptr) request->reset(clock::duration::max());  // between requests
      }
      idle_armed = true;
    }

    // The read's own end: the expiry, or earlier, when the connection parks if nothing comes
    // (park_after into the idle wait, counted from where the keepalive expiry was armed: no
    // clock read).
    clock::time_point read_by = expiry;
    const bool may_park = pooled && wait == waiting::idle && request == nullptr && (!ex || ex->at_rest()) &&
                          cfg.park_after >= clock::duration::zero();
    if constexpr (pooled) {
      if (may_park && !woke) {
        if (cfg.park_after == clock::duration::zero()) {
          counted.parked = true;
          park_connection(std::move(s), cfg, stats, expiry);
          co_return;
        }
        if (cfg.park_after < cfg.keepalive_timeout) read_by = expiry - cfg.keepalive_timeout + cfg.park_after;
      }
    }
    auto emplace_read = [&]() -> read_awaiter& {
      if constexpr (pooled)
        return op.read([&] { return with_deadline(s.read_pooled(), read_by); });
      else
        return op.read([&] { return with_deadline(s.read(ex->read_space()), read_by); });
    };
    auto take_woken = [&]() -> read_result {
      if constexpr (pooled)
        if (woke) return std::move(woke->got);
      return read_result(errc::operation_canceled);  // not woken (only a tcp_stream's connection parks)
    };
    // (Not `woke ? ... : co_await ...`: g++ 12 miscompiles a co_await inside ?:.)
    read_result n = take_woken();
    if (woke) {
      woke.reset();
    } else {
      auto& r = emplace_read();
      n = co_await r;
      op.clear();
    }
    if (!n) {
      if constexpr (pooled) {
        if (may_park && n.error() == errc::timed_out && read_by < expiry) {  // idle for park_after
          counted.parked = true;
          park_connection(std::move(s), cfg, stats, expiry);
          co_return;
        }
      }
      if constexpr (pooled) {
        if (n.error() == errc::no_buffer_space) {  // every buffer of the pool is in use: soon back
          co_await pause(std::chrono::milliseconds(1));
          continue;
        }
      }
      if (n.error() != errc::timed_out) co_return;
      record_kick(stats, expiry);
      if (wait == waiting::body) ++stats.body_timeouts;
      else if (wait == waiting::idle) ++stats.keepalive_timeouts;
      else {
        ++stats.header_timeouts;
        if (ex && ex->in_head()) {  // part of the head came: say why the connection ends (nginx
                                    // 1.22 logs a 408 but closes without sending one)
          ex->refuse(408);
          next = exchange::then::close;
          continue;
        }
      }
      co_return;
    }
    if (wait == waiting::idle) idle_armed = false;  // the next request's head counts from its first byte
    if constexpr (pooled) {
      if (n->empty()) co_return;  // the client closed
      if (!ex) ex = exchange::acquire(cfg, stats);
      next = ex->process(n->bytes());
      n->reset();  // the buffer goes back to the pool before the answer is written
    } else {
      if (*n == 0) co_return;  // the client closed
      ex->received(*n);
      next = ex->process();
    }
  }
}

// Parks an idle plain connection (see serve()): serve() starts again from where it was when the
// read ends.
void park_connection(tcp_stream s, const server_config& cfg, server_stats& stats, clock::time_point expiry) {
  park(std::move(s), expiry, [&cfg, &stats, expiry](tcp_stream s, result<pooled_buffer> got) {
    spawn(serve(std::move(s), cfg, stats, nullptr, clock::time_point(), unparked{std::move(got), expiry}));
  });
}

// With a request budget: the connection runs in its scope (see http_server.hpp).
template <class Stream>
task<void> serve_in_budget(Stream s, const server_config& cfg, server_stats& stats, clock::time_point head_by) {
  // The first request's head counts from the accept, as the header timeout does.
  deadline request(cfg.request_timeout);
  auto r = co_await with_deadline(serve(std::move(s), cfg, stats, &request, head_by), request);
  if (!r && r.error() == errc::timed_out) ++stats.request_timeouts;
}

}  // namespace

task<void> serve_connection(tcp_stream s, const server_config& cfg, server_stats& stats) {
  return serve_stream(std::move(s), cfg, stats, now() + cfg.header_timeout);
}

// Not a coroutine: without a request budget the connection is one frame, serve()'s.
template <class Stream>
task<void> serve_stream(Stream s, const server_config& cfg, server_stats& stats, clock::time_point head_by) {
  if (cfg.request_timeout <= clock::duration::zero()) return serve(std::move(s), cfg, stats, nullptr, head_by);
  return serve_in_budget(std::move(s), cfg, stats, head_by);
}

template task<void> serve_stream(tcp_stream, const server_config&, server_stats&, clock::time_point);
#ifdef COGWHEEL_HTTP_TLS
template task<void> serve_stream(tls::stream, const server_config&, server_stats&, clock::time_point);
#endif

}  // namespace http_example
