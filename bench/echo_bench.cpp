// echo_bench: echo round trips over loopback, one server core and one client core in one
// process, 1000 connections, 64 B and 1 KiB messages, with and without a timeout on every
// read. The client saturates first on a 2-core machine, so besides round trips per second the
// figure to compare is the server core's CPU time per round trip (its thread's CPU clock,
// kernel time included).
//
// Names: echo/<mode>/<message bytes>/<connections>, mode one of
//   plain     read without any timeout
//   timeout   with_timeout(read, 30 s) on every read (a wheel timer scheduled and cancelled)
//   deadline  with_deadline(read, idle) with idle.reset(30 s) per message (the idle-kick way)
// Counters: rt_per_s, server_cpu_us_per_rt, client_cpu_us_per_rt.
// echo_metrics_off/plain/64/1000 is echo/plain/64/1000 with runtime_options::metrics off: the
// cost of the metrics (run both interleaved: --benchmark_filter='echo(_metrics_off)?/plain/64'
// --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true).
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <vector>

#include <cogwheel/cogwheel.hpp>

using namespace cogwheel;
using namespace std::chrono_literals;

namespace {

enum class mode { plain, timeout, deadline };

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

task<void> session(tcp_stream conn, mode how) {
  (void)conn.set_nodelay(true);
  std::byte buf[2048];
  deadline idle(30s);
  for (;;) {
    result<std::size_t> n = errc::invalid_argument;
    if (how == mode::plain)
      n = co_await conn.read(std::span(buf));
    else if (how == mode::timeout)
      n = co_await with_timeout(conn.read(std::span(buf)), 30s);
    else
      n = co_await with_deadline(conn.read(std::span(buf)), idle);
    if (!n || *n == 0) co_return;
    if (how == mode::deadline) idle.reset(30s);
    if (!co_await conn.write_all(std::span(buf, *n))) co_return;
  }
}

task<void> talker(socket_address to, std::size_t size, const std::atomic<bool>& stop, std::atomic<long>& count,
                  std::atomic<int>& done) {
  auto conn = co_await tcp_stream::connect(to);
  if (conn) {
    (void)conn->set_nodelay(true);
    std::vector<std::byte> out(size, std::byte{'x'}), in(size);
    while (!stop.load(std::memory_order_relaxed)) {
      if (!co_await conn->write_all(out)) break;
      std::size_t got = 0;
      while (got < size) {
        auto r = co_await conn->read(std::span(in).subspan(got));
        if (!r || *r == 0) break;
        got += *r;
      }
      if (got < size) break;
      count.fetch_add(1, std::memory_order_relaxed);  // one thread: uncontended
    }
  }
  done.fetch_add(1);
}

void bm_echo(benchmark::State& state, mode how, bool metrics) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const auto connections = static_cast<int>(state.range(1));
  const auto measure = 2s;
  for (auto _ : state) {
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0), {.backlog = 4096});
    if (!listener) {
      state.SkipWithError("bind failed");
      return;
    }
    const socket_address to = listener->local_address();
    std::atomic<bool> stop{false};
    std::atomic<long> round_trips{0};
    std::atomic<int> finished{0};
    double server_cpu = 0, client_cpu = 0, seconds = 0;
    long measured = 0;
    std::atomic<bool> all_accepted{false};
    std::atomic<int> accept_error{0};
    std::atomic<clockid_t> server_clock{};
    runtime rt(runtime_options{.cores = 2, .sq_entries = 4096, .metrics = metrics});
    rt.run([&](unsigned core) -> task<void> {
      if (core == 0) {  // server: its thread's CPU clock is read by the client core
        clockid_t cid{};
        ::pthread_getcpuclockid(::pthread_self(), &cid);
        server_clock.store(cid);
        for (int i = 0; i < connections; ++i) {
          // Bounded, so a client that could not connect (descriptors) fails the run, not hangs it.
          auto c = co_await with_timeout(listener->accept(), 10s);
          if (!c) {
            accept_error.store(c.error().value());
            co_return;
          }
          spawn(session(std::move(*c), how));
        }
        all_accepted.store(true);
        co_return;  // sessions keep running until the client stops the runtime
      }
      for (int i = 0; i < connections; ++i) spawn(talker(to, size, stop, round_trips, finished));
      while (!all_accepted.load() && accept_error.load() == 0) co_await sleep_for(1ms);
      if (accept_error.load() != 0) {
        stop.store(true);
        rt.stop();
        co_return;
      }
      co_await sleep_for(300ms);  // warm-up
      const clockid_t server = server_clock.load();
      const long before = round_trips.load();
      const double client0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
      const double server0 = cpu_seconds(server);
      const auto t0 = clock::now();
      co_await sleep_for(measure);
      server_cpu = cpu_seconds(server) - server0;
      client_cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - client0;
      seconds = std::chrono::duration<double>(clock::now() - t0).count();
      measured = round_trips.load() - before;
      stop.store(true);
      while (finished.load() < connections) co_await sleep_for(1ms);
      rt.stop();
    });
    if (accept_error.load() != 0) {
      state.SkipWithError(("accepting the connections failed: " +
                           std::make_error_code(static_cast<std::errc>(accept_error.load())).message())
                              .c_str());
      return;
    }
    const auto rts = static_cast<double>(measured);
    state.SetIterationTime(seconds);
    state.counters["rt_per_s"] = rts / seconds;
    state.counters["server_cpu_us_per_rt"] = server_cpu * 1e6 / rts;
    state.counters["client_cpu_us_per_rt"] = client_cpu * 1e6 / rts;
  }
}

void register_all() {
  for (auto [name, how] : {std::pair{"echo/plain", mode::plain}, std::pair{"echo/timeout", mode::timeout},
                           std::pair{"echo/deadline", mode::deadline}}) {
    benchmark::RegisterBenchmark(name, bm_echo, how, true)
        ->Args({64, 1000})
        ->Args({1024, 1000})
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("echo_metrics_off/plain", bm_echo, mode::plain, false)
      ->Args({64, 1000})
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  // Client and server share this process: two descriptors per connection.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
