// load_client: drives an echo server with many connections, each sending a message and waiting
// for its echo, back to back, and reports round trips per second and latency percentiles.
// Used by the demo and the benchmarks; runs on its own cores, in its own process.
//
// Usage: load_client --to=127.0.0.1:7000 [--connections=1000] [--size=64] [--duration-ms=5000]
//                    [--cores=1] [--idle=0] [--no-pin]
//   --to=host:port also takes a name ("localhost:7000", "echo.internal:7000"): it is resolved
//   once, before the run (resolve(), on the loop, bounded by 5 s), and every connection goes to
//   its first address, so that the measurement never includes a lookup.
//   --idle=N additionally opens N connections that never send (they hold descriptors and the
//   server's idle deadlines; the server should kick them).
//   --spread=K (K <= 64) with a 127.0.0.1 target connects to 127.0.0.1 .. 127.0.0.K in turn (the
//   server must listen on 0.0.0.0). Above ~15,000 connections from one address to one port the
//   kernel's search for a free ephemeral port (__inet_hash_connect) took seconds of system
//   time per run here and stalled this client's loop inside io_uring_enter; with K destination
//   addresses every local port can be used K times.
// Prints one line "round_trips=... seconds=... rt_per_s=... p50_us=... p99_us=... cpu_s=...".
// Needs: Linux with io_uring (5.19+), or epoll where it is blocked (COGWHEEL_BACKEND=epoll);
// one descriptor per connection.
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include <cogwheel/cogwheel.hpp>

#include "support.hpp"

using namespace cogwheel;
using namespace std::chrono_literals;

namespace {

struct totals {
  std::atomic<long> round_trips{0};
  std::atomic<long> failures{0};
  std::atomic<long> idle_kicked{0};
  std::mutex mu;
  std::vector<double> latency_us;  // a sample: every 16th round trip
};

// "host:port" or "[v6]:port" with a name for host: its first address, looked up on a loop of
// this thread (the runtime proper starts after).
result<socket_address> resolve_target(const std::string& target) {
  const auto colon = target.rfind(':');
  if (colon == std::string::npos || colon + 1 == target.size()) return errc::invalid_argument;
  const long port = std::strtol(target.c_str() + colon + 1, nullptr, 10);
  if (port <= 0 || port > 65535) return errc::invalid_argument;
  auto addresses = run([](std::string host, std::uint16_t p) -> task<result<std::vector<socket_address>>> {
    co_return co_await with_timeout(resolve(std::move(host), p), 5s);
  }(target.substr(0, colon), static_cast<std::uint16_t>(port)));
  if (!addresses) return addresses.error();
  std::printf("# %s is %s\n", target.c_str(), addresses->front().to_string().c_str());
  return addresses->front();
}

task<void> talker(socket_address to, std::size_t size, clock::time_point until, totals& t) {
  auto conn = co_await tcp_stream::connect(to);
  if (!conn) {
    t.failures.fetch_add(1);
    co_return;
  }
  (void)conn->set_nodelay(true);
  std::vector<std::byte> out(size, std::byte{'x'}), in(size);
  std::vector<double> samples;
  long count = 0;
  while (clock::now() < until) {
    const auto t0 = clock::now();
    if (!co_await conn->write_all(out)) break;
    std::size_t got = 0;
    while (got < size) {
      auto n = co_await conn->read(std::span(in).subspan(got));
      if (!n || *n == 0) {
        t.failures.fetch_add(1);
        co_return;
      }
      got += *n;
    }
    if ((++count & 15) == 0) samples.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
  }
  t.round_trips.fetch_add(count);
  std::lock_guard lock(t.mu);
  t.latency_us.insert(t.latency_us.end(), samples.begin(), samples.end());
}

task<void> idler(socket_address to, clock::time_point until, totals& t) {
  auto conn = co_await tcp_stream::connect(to);
  if (!conn) {
    t.failures.fetch_add(1);
    co_return;
  }
  std::byte buf[16];
  auto n = co_await with_deadline(conn->read(std::span(buf)), until);
  if (n && *n == 0) t.idle_kicked.fetch_add(1);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string target = examples::flag(argc, argv, "to", "127.0.0.1:7000");
  auto to = socket_address::parse(target);
  if (!to) to = resolve_target(target);
  if (!to) {
    std::fprintf(stderr, "--to=%s: %s (expected host:port)\n", target.c_str(), to.error().message().c_str());
    return 2;
  }
  const long connections = examples::flag_int(argc, argv, "connections", 1000);
  const long idle = examples::flag_int(argc, argv, "idle", 0);
  const auto size = static_cast<std::size_t>(examples::flag_int(argc, argv, "size", 64));
  const auto duration = std::chrono::milliseconds(examples::flag_int(argc, argv, "duration-ms", 5000));
  const unsigned cores = static_cast<unsigned>(examples::flag_int(argc, argv, "cores", 1));
  const long fds = examples::raise_fd_limit();
  if (connections + idle > fds - 32) {
    std::fprintf(stderr, "%ld connections do not fit under the descriptor limit %ld\n", connections + idle, fds);
    return 2;
  }

  const long spread = examples::flag_int(argc, argv, "spread", 1);
  std::vector<socket_address> targets{*to};
  if (spread > 1 && spread <= 64 && to->to_string() == "127.0.0.1:" + std::to_string(to->port())) {
    for (long k = 2; k <= spread; ++k)
      targets.push_back(*socket_address::parse("127.0.0." + std::to_string(k) + ":" + std::to_string(to->port())));
  }

  totals t;
  const double cpu0 = examples::process_cpu_seconds();
  const auto start = clock::now();
  const auto until = start + duration;
  runtime rt(runtime_options{.cores = cores, .sq_entries = 4096, .pin_threads = !examples::has_flag(argc, argv, "no-pin")});
  rt.run([&](unsigned core) -> task<void> {
    for (long i = core; i < connections; i += cores) spawn(talker(targets[i % targets.size()], size, until, t));
    // Idle connections follow in batches, so a burst of thousands of connects does not overflow
    // the server's accept queue while the talkers are still connecting.
    co_await sleep_for(200ms);
    for (long i = core; i < idle; i += cores) {
      spawn(idler(targets[i % targets.size()], until + 1s, t));
      if ((i / cores) % 1000 == 999) co_await sleep_for(20ms);
    }
  });
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  const double rt_seconds = std::chrono::duration<double>(duration).count();
  std::printf("round_trips=%ld seconds=%.3f rt_per_s=%.0f p50_us=%.1f p99_us=%.1f cpu_s=%.3f failures=%ld idle_kicked=%ld\n",
              t.round_trips.load(), seconds, static_cast<double>(t.round_trips.load()) / rt_seconds,
              examples::percentile(t.latency_us, 50), examples::percentile(t.latency_us, 99),
              examples::process_cpu_seconds() - cpu0, t.failures.load(), t.idle_kicked.load());
  return t.failures.load() == 0 ? 0 : 1;
}
