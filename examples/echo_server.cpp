// echo_server: a TCP echo server on every core. Each core has its own SO_REUSEPORT listener on
// the same port (the kernel spreads connections), and every connection an idle deadline that
// each message pushes forward; a connection silent for --idle-timeout-ms is closed.
//
// Usage: echo_server [--port=7000] [--cores=0 (all)] [--idle-timeout-ms=30000]
//                    [--mode=deadline|timeout|plain] [--read-timeout-ms=30000] [--timers=wheel|heap]
//                    [--measure-timers] [--no-pin] [--pooled [--pool-buffers=1024] [--park-after-ms=10]]
//   deadline: with_deadline(read, idle) with idle.reset() per message (the idle-kick pattern)
//   timeout:  with_timeout(read, --read-timeout-ms) on every read
//   plain:    no timeout at all (for comparison)
//   --measure-timers: also report the time the loops spent inside the timer queue's advance()
//   --pooled: read with tcp_stream::read_pooled() from each core's shared pool of 4 KiB buffers
//             (io_uring provided buffers, Linux 5.19+): a connection waiting for data holds no
//             buffer; without it each connection keeps a 4 KiB buffer in its frame
//   --park-after-ms: pooled only: a connection idle this long leaves its coroutine frame for a
//             small record (cogwheel::park, docs/http.md); 0 at once, -1 never
// Stop with Ctrl-C (SIGINT) or SIGTERM; it prints what it served and how late its timers
// fired (p50/p99/max, from the runtime's metrics). Try it with
//   load_client --to=127.0.0.1:7000 --connections=100 --duration-ms=3000
// Needs: Linux with io_uring (5.19+), or epoll where it is blocked (COGWHEEL_BACKEND=epoll);
// one descriptor per connection.
#include <array>
#include <atomic>
#include <cstdio>
#include <optional>
#include <type_traits>
#include <variant>

#include <cogwheel/cogwheel.hpp>

#include "metrics_summary.hpp"
#include "support.hpp"

using namespace cogwheel;
using namespace std::chrono_literals;

namespace {

enum class mode { deadline, timeout, plain };

struct settings {
  std::uint16_t port = 7000;
  clock::duration idle_timeout = 30s;
  clock::duration read_timeout = 30s;
  mode how = mode::deadline;
  bool pooled = false;
  std::uint32_t pool_buffers = 1024;
  clock::duration park_after = 10ms;  // pooled: idle this long, a session parks (negative: never)
};

// A parked session's wait, as it ended (park()): the read's outcome and the idle expiry.
struct unparked {
  result<pooled_buffer> got;
  clock::time_point expiry;
};

std::atomic<long> connections{0};
std::atomic<long> kicked{0};
std::atomic<long> messages{0};
std::atomic<std::uint64_t> timer_ns[64];  // per core, refreshed by each core's reporter

// Copies this core's loop counters where main() can read them after the runtime stops.
// A sleep in a frame of its own, allocated only while it runs: the sessions' frames stay small.
task<void> pause(clock::duration d) { co_await sleep_for(d); }

task<void> report_timer_work(unsigned core) {
  for (;;) {
    timer_ns[core % 64].store(this_core_metrics().timer_work_ns, std::memory_order_relaxed);
    co_await sleep_for(20ms);
  }
}

// Every session spends a connection's memory on nothing but itself: hence a template per
// buffer kind and mode, so that a frame holds only the awaiters of its own mode (a switch over
// modes in one coroutine keeps all of them in every frame). Pooled: the message buffer comes
// from the core's pool when data arrives and goes back once the echo is written; otherwise it
// is a 4 KiB array in the frame, idle or not.
template <bool Pooled, mode How>
task<void> session(tcp_stream conn, const settings& cfg, std::optional<unparked> woke = std::nullopt);

// Parks a pooled session's idle connection (cogwheel::park: no frame while it waits); the
// session starts again in a new frame when the read ends. Its idle expiry goes with it.
template <mode How>
void park_session(tcp_stream conn, const settings& cfg, clock::time_point until) {
  park(std::move(conn), until, [&cfg, until](tcp_stream s, result<pooled_buffer> got) {
    spawn(session<true, How>(std::move(s), cfg, unparked{std::move(got), until}));
  });
}

// Pooled sessions park (park_session) once idle for cfg.park_after: an idle connection then
// holds a record of ~376 B instead of its frame. The read in the frame meanwhile races the
// earlier of its own end and the park time, a time point.
template <bool Pooled, mode How>
task<void> session(tcp_stream conn, const settings& cfg, std::optional<unparked> woke) {
  if (!woke) {
    (void)conn.set_nodelay(true);
    connections.fetch_add(1, std::memory_order_relaxed);
  }
  struct none {};
  std::conditional_t<Pooled, none, std::array<std::byte, 4096>> buf;
  auto read = [&] {
    if constexpr (Pooled)
      return conn.read_pooled();
    else
      return conn.read(std::span(buf));
  };
  deadline idle(woke ? woke->expiry - now() : cfg.idle_timeout);
  const bool parks = Pooled && cfg.park_after >= clock::duration::zero();
  // Returns the awaiter itself: the read operation it wraps is built inside it, not kept in
  // the frame as a temporary as well (g++ 12 gives each such temporary a frame slot).
  auto next = [&] {
    if constexpr (How == mode::deadline)
      return with_deadline(read(), idle);
    else if constexpr (How == mode::timeout)
      return with_timeout(read(), cfg.read_timeout);
    else
      return read();
  };
  // The read and the write take turns in one slot: a compiler gives every awaiter of a
  // coroutine a frame slot of its own for the frame's whole life, so an idle session would
  // also hold the write's (232 B) while it waits to read.
  using parking_read = decltype(with_deadline(read(), clock::time_point()));
  std::variant<std::monostate, decltype(next()), decltype(conn.write_all(std::span<const std::byte>())), parking_read> op;
  long served = 0;
  for (;;) {
    decltype(with_deadline(read(), clock::time_point()).await_resume()) n{errc::operation_canceled};
    clock::time_point until = clock::time_point::max();  // the read's own end, when it parks
    clock::time_point read_by = until;
    if constexpr (Pooled) {
      if (parks) {
        if constexpr (How == mode::deadline)
          until = idle.expiry();
        else if constexpr (How == mode::timeout)
          until = now() + cfg.read_timeout;
        read_by = std::min(until, now() + cfg.park_after);
      }
    }
    if (woke) {
      if constexpr (Pooled) n = std::move(woke->got);
      woke.reset();
    } else if (parks && cfg.park_after == clock::duration::zero()) {
      if constexpr (Pooled) park_session<How>(std::move(conn), cfg, until);
      break;
    } else if (parks) {
      auto& reading = op.template emplace<3>(with_deadline(read(), read_by));
      n = co_await reading;
      op.template emplace<0>();
      if constexpr (Pooled) {
        if (!n && n.error() == errc::timed_out && read_by < until) {  // idle for park_after
          park_session<How>(std::move(conn), cfg, until);
          break;
        }
      }
    } else {
      auto& reading = op.template emplace<1>(next());
      n = co_await reading;
      op.template emplace<0>();
    }
    if (!n) {
      if (n.error() == errc::no_buffer_space) {  // every buffer of the pool is in use: soon back
        co_await pause(1ms);
        continue;
      }
      if (n.error() == errc::timed_out) kicked.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    std::span<const std::byte> message;
    if constexpr (Pooled)
      message = n->bytes();
    else
      message = std::span(buf).first(*n);
    if (message.empty()) break;
    if constexpr (How == mode::deadline) idle.reset(cfg.idle_timeout);
    ++served;
    auto& writing = op.template emplace<2>(conn.write_all(message));
    const bool written = static_cast<bool>(co_await writing);
    op.template emplace<0>();
    if (!written) break;
  }
  messages.fetch_add(served, std::memory_order_relaxed);
}

template <bool Pooled>
void spawn_session(tcp_stream conn, const settings& cfg) {
  switch (cfg.how) {
    case mode::deadline:
      return spawn(session<Pooled, mode::deadline>(std::move(conn), cfg));
    case mode::timeout:
      return spawn(session<Pooled, mode::timeout>(std::move(conn), cfg));
    case mode::plain:
      return spawn(session<Pooled, mode::plain>(std::move(conn), cfg));
  }
}

}  // namespace

int main(int argc, char** argv) {
  settings cfg;
  cfg.port = static_cast<std::uint16_t>(examples::flag_int(argc, argv, "port", 7000));
  cfg.idle_timeout = std::chrono::milliseconds(examples::flag_int(argc, argv, "idle-timeout-ms", 30000));
  cfg.read_timeout = std::chrono::milliseconds(examples::flag_int(argc, argv, "read-timeout-ms", 30000));
  const std::string how = examples::flag(argc, argv, "mode", "deadline");
  cfg.how = how == "plain" ? mode::plain : how == "timeout" ? mode::timeout : mode::deadline;
  const unsigned cores = static_cast<unsigned>(examples::flag_int(argc, argv, "cores", 0));
  const bool heap = examples::flag(argc, argv, "timers", "wheel") == "heap";
  const long fds = examples::raise_fd_limit();
  const bool measure = examples::has_flag(argc, argv, "measure-timers");
  cfg.pooled = examples::has_flag(argc, argv, "pooled");
  cfg.pool_buffers = static_cast<std::uint32_t>(examples::flag_int(argc, argv, "pool-buffers", 1024));
  cfg.park_after = std::chrono::milliseconds(examples::flag_int(argc, argv, "park-after-ms", 10));

  runtime rt(runtime_options{.cores = cores, .timers = heap ? timer_kind::heap : timer_kind::wheel,
                             .sq_entries = 4096, .measure_timer_work = measure,
                             .pin_threads = !examples::has_flag(argc, argv, "no-pin"), .stop_on_signals = true});
  std::printf("echo_server: port %u, %u cores, mode %s%s, descriptor limit %ld; Ctrl-C stops\n", cfg.port,
              rt.cores(), how.c_str(), cfg.pooled ? ", pooled reads" : "", fds);
  std::fflush(stdout);
  examples::metrics_keeper metrics;
  rt.run([&](unsigned core) -> task<void> {
    if (measure) spawn(report_timer_work(core));
    spawn(metrics.keep(core));
    if (cfg.pooled) {
      auto pool = buffer_pool::of_this_core({.buffers = cfg.pool_buffers, .buffer_size = 4096});
      if (!pool) {
        std::fprintf(stderr, "--pooled: %s (provided buffer rings need Linux 5.19+)\n",
                     pool.error().message().c_str());
        rt.stop();
        co_return;
      }
    }
    auto listener = tcp_listener::bind(socket_address::ipv4_any(cfg.port), {.reuse_port = true});
    if (!listener) {
      std::fprintf(stderr, "bind port %u: %s\n", cfg.port, listener.error().message().c_str());
      co_return;
    }
    for (;;) {
      auto conn = co_await listener->accept();
      if (!conn) {
        if (conn.error() == errc::operation_canceled) co_return;
        std::fprintf(stderr, "accept: %s (backing off)\n", conn.error().message().c_str());
        continue;
      }
      if (cfg.pooled)
        spawn_session<true>(std::move(*conn), cfg);
      else
        spawn_session<false>(std::move(*conn), cfg);
    }
  });
  std::printf("served %ld connections, %ld messages; %ld kicked for idleness; CPU %.3f s (%.2f us per message)\n",
              connections.load(), messages.load(), kicked.load(), examples::process_cpu_seconds(),
              messages.load() > 0 ? examples::process_cpu_seconds() * 1e6 / static_cast<double>(messages.load()) : 0.0);
  metrics.print_summary(stdout);
  if (measure) {
    std::uint64_t total = 0;
    for (auto& t : timer_ns) total += t.load();
    std::printf("timer work (inside advance): %.3f s, %.2f%% of CPU\n", static_cast<double>(total) * 1e-9,
                100.0 * static_cast<double>(total) * 1e-9 / examples::process_cpu_seconds());
  }
}
