// resolve_bench: names and connections, measured.
//
//   resolve/cogwheel          resolve() from one core (one loop, this thread), 32 lookups in
//                             flight, cache off: every lookup is an AAAA and an A query to a
//                             local dnsmasq.
//   resolve/getaddrinfo/T     the same lookups by glibc's getaddrinfo on T threads (T = 1: one
//                             blocking thread, as a runtime without a resolver does; T = 32: as
//                             many threads as lookups in flight), pointed at the same dnsmasq.
//   Counters: items_per_second (lookups), cpu_us (this process's CPU, user + system, per lookup).
//
//   connect/black_holed_ipv6/D tcp_stream::connect(name, port) where the name's IPv6 address
//                             drops SYNs and its IPv4 one accepts, attempt_delay D ms: the time
//                             to connect against D. connect/ipv4 is a plain connect for scale.
//   connect/name_one_address   connect(name, port) to a hosts-file name with one address that
//                             accepts: the common path of Happy Eyeballs (one attempt, wins).
//   connect/name_refused_first the same with two addresses, the first refusing: a failure
//                             starts the next attempt at once.
//
// Usage: resolve_bench [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
// Needs: dnsmasq (Debian's dnsmasq-base) on PATH or in /usr/sbin; run as any user. Without it
// the resolve benchmarks report an error and the connect ones still run.
#include <arpa/inet.h>
#include <netdb.h>
#include <pwd.h>
#include <resolv.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include <cogwheel/cogwheel.hpp>

extern char** environ;

namespace {

using namespace cogwheel;
using namespace std::chrono_literals;

constexpr int in_flight = 32;

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// dnsmasq on 127.0.0.1 (a free port), answering every name under bench.test with 127.0.0.1
// and ::1 (TTL 0), nothing else.
class dnsmasq {
 public:
  dnsmasq() {
    const int probe = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof at;
    ::bind(probe, reinterpret_cast<sockaddr*>(&at), sizeof at);
    ::getsockname(probe, reinterpret_cast<sockaddr*>(&at), &len);
    port_ = ntohs(at.sin_port);
    ::close(probe);
    const std::string port = "--port=" + std::to_string(port_);
    const passwd* me = ::getpwuid(::getuid());  // run as whoever runs this (root: stays root)
    const std::string user = std::string("--user=") + (me != nullptr ? me->pw_name : "nobody");
    for (const char* exe : {"/usr/sbin/dnsmasq", "dnsmasq"}) {
      std::vector<const char*> argv = {exe, "--keep-in-foreground", port.c_str(), "--listen-address=127.0.0.1",
                                       "--bind-interfaces", "--no-resolv", "--no-hosts", user.c_str(),
                                       "--pid-file=", "--cache-size=0", "--address=/bench.test/127.0.0.1",
                                       "--address=/bench.test/::1", "--dns-forward-max=1000", nullptr};
      if (::posix_spawnp(&pid_, exe, nullptr, nullptr, const_cast<char* const*>(argv.data()), environ) == 0) break;
      pid_ = -1;
    }
    if (pid_ > 0) ::usleep(300000);  // it binds its port
  }
  ~dnsmasq() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool running() const noexcept { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  std::uint16_t port() const noexcept { return port_; }

 private:
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

dnsmasq* server = nullptr;

std::string name_of(std::uint64_t i) {
  std::string name = std::to_string(i);
  name.insert(0, 1, 'n');
  name.append(".bench.test");
  return name;
}

void BM_resolve_cogwheel(benchmark::State& state) {
  if (server == nullptr || !server->running()) {
    state.SkipWithError("dnsmasq is not running");
    return;
  }
  runtime_options o;
  o.cores = 1;
  o.resolver.servers = {"127.0.0.1:" + std::to_string(server->port())};
  o.resolver.search = std::vector<std::string>{};
  o.resolver.attempts = 2;
  o.resolver.timeout = 2000ms;
  o.resolver.cache_entries = 0;  // every lookup asks the server
  o.resolver.hosts_file = "/dev/null";
  std::uint64_t lookups = 0, failures = 0;
  const double cpu0 = cpu_seconds();
  run([](benchmark::State& state, std::uint64_t& lookups, std::uint64_t& failures) -> task<> {
    for (auto _ : state) {
      std::vector<task<result<std::vector<socket_address>>>> batch;
      for (int i = 0; i < in_flight; ++i) batch.push_back(resolve(name_of(lookups++), 80));
      for (auto& r : co_await when_all(std::move(batch)))
        if (!r || r->size() != 2) ++failures;
    }
  }(state, lookups, failures), o);
  state.SetItemsProcessed(static_cast<std::int64_t>(lookups));
  state.counters["cpu_us"] = (cpu_seconds() - cpu0) * 1e6 / static_cast<double>(lookups);
  state.counters["failures"] = static_cast<double>(failures);
}

// Workers that each call getaddrinfo in turn, their glibc resolver pointed at dnsmasq.
class getaddrinfo_pool {
 public:
  explicit getaddrinfo_pool(int threads) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
  }
  ~getaddrinfo_pool() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  // Looks up names first .. first + count - 1; returns the failures.
  int batch(std::uint64_t first, int count) {
    std::unique_lock lock(mutex_);
    next_ = first;
    end_ = first + static_cast<std::uint64_t>(count);
    remaining_ = count;
    failures_ = 0;
    wake_.notify_all();
    done_.wait(lock, [this] { return remaining_ == 0; });
    return failures_;
  }

 private:
  void work() {
    res_init();
    _res.nscount = 1;  // glibc uses the thread's _res as changed here (not resolv.conf's)
    _res.nsaddr_list[0].sin_family = AF_INET;
    _res.nsaddr_list[0].sin_port = htons(server->port());
    _res.nsaddr_list[0].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return quit_ || next_ < end_; });
      if (quit_) return;
      const std::string name = name_of(next_++);
      lock.unlock();
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* res = nullptr;
      const int r = ::getaddrinfo(name.c_str(), "80", &hints, &res);
      int found = 0;
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) ++found;
      if (res != nullptr) ::freeaddrinfo(res);
      lock.lock();
      if (r != 0 || found != 2) ++failures_;
      if (--remaining_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::uint64_t next_ = 0, end_ = 0;
  int remaining_ = 0, failures_ = 0;
  bool quit_ = false;
  std::vector<std::thread> workers_;
};

void BM_resolve_getaddrinfo(benchmark::State& state) {
  if (server == nullptr || !server->running()) {
    state.SkipWithError("dnsmasq is not running");
    return;
  }
  getaddrinfo_pool pool(static_cast<int>(state.range(0)));
  std::uint64_t lookups = std::uint64_t{1} << 40;  // names of their own, apart from the cogwheel run's
  std::uint64_t failures = 0;
  const double cpu0 = cpu_seconds();
  for (auto _ : state) {
    failures += static_cast<std::uint64_t>(pool.batch(lookups, in_flight));
    lookups += in_flight;
  }
  const double n = static_cast<double>(state.iterations()) * in_flight;
  state.SetItemsProcessed(static_cast<std::int64_t>(n));
  state.counters["cpu_us"] = (cpu_seconds() - cpu0) * 1e6 / n;
  state.counters["failures"] = static_cast<double>(failures);
}

// --- connect against a black-holed first family ---

std::string hosts_file() {
  static const std::string path = [] {
    std::string p = "/tmp/cogwheel_resolve_bench_hosts_" + std::to_string(::getpid());
    std::ofstream(p) << "::1 dual.bench\n127.0.0.1 dual.bench\n127.0.0.1 v4.bench\n127.0.0.2 refused_first.bench\n"
                     << "127.0.0.1 refused_first.bench\n";
    return p;
  }();
  return path;
}

// ::1 listening with a full accept queue (SYNs dropped), 127.0.0.1 on the same port accepting.
struct black_holed_ipv6 {
  int v6 = -1, v4 = -1;
  std::vector<int> fillers;
  std::uint16_t port = 0;
  black_holed_ipv6() {
    v6 = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(v6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    socket_address at = socket_address::ipv6_loopback(0);
    ::bind(v6, at.data(), at.size());
    ::listen(v6, 0);
    port = socket_address::local_of(v6)->port();
    for (int i = 0; i < 2; ++i) {
      const int c = ::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      at.set_port(port);
      (void)::connect(c, at.data(), at.size());
      fillers.push_back(c);
      ::usleep(20000);
    }
    v4 = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socket_address v4_at = socket_address::ipv4_loopback(port);
    ::bind(v4, v4_at.data(), v4_at.size());
    ::listen(v4, 4096);
  }
  ~black_holed_ipv6() {
    for (int c : fillers) ::close(c);
    ::close(v6);
    ::close(v4);
  }
};

void connect_loop(benchmark::State& state, std::string host, connect_options co) {
  black_holed_ipv6 target;
  runtime_options o;
  o.resolver.hosts_file = hosts_file();
  std::uint64_t failures = 0;
  run([](benchmark::State& state, std::string host, std::uint16_t port, connect_options co,
         std::uint64_t& failures) -> task<> {
    for (auto _ : state) {
      auto s = co_await with_timeout(tcp_stream::connect(host, port, co), 5s);
      if (!s) ++failures;
    }
  }(state, std::move(host), target.port, co, failures), o);
  state.counters["failures"] = static_cast<double>(failures);
}

void BM_connect_black_holed_ipv6(benchmark::State& state) {
  connect_loop(state, "dual.bench", {.attempt_delay = std::chrono::milliseconds(state.range(0))});
}

void BM_connect_ipv4(benchmark::State& state) { connect_loop(state, "127.0.0.1", {}); }

// Happy Eyeballs' common paths, by name from the hosts file: one address that accepts; and two,
// the first refusing (127.0.0.2: the listener is on 127.0.0.1 only), so the second starts at once.
void BM_connect_name_one_address(benchmark::State& state) { connect_loop(state, "v4.bench", {}); }
void BM_connect_name_refused_first(benchmark::State& state) { connect_loop(state, "refused_first.bench", {}); }

}  // namespace

BENCHMARK(BM_resolve_cogwheel)->Name("resolve/cogwheel")->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_resolve_getaddrinfo)->Name("resolve/getaddrinfo")->Arg(1)->Arg(32)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_connect_black_holed_ipv6)
    ->Name("connect/black_holed_ipv6")
    ->Arg(250)
    ->Arg(50)
    ->Iterations(5)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_connect_ipv4)->Name("connect/ipv4")->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);
// At most 2,000 connections a run: the listener never accepts, and its queue holds 4,096.
BENCHMARK(BM_connect_name_one_address)->Name("connect/name_one_address")->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_connect_name_refused_first)->Name("connect/name_refused_first")->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  dnsmasq d;
  server = &d;
  if (!d.running()) std::fprintf(stderr, "resolve_bench: dnsmasq did not start; the resolve benchmarks are skipped\n");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::remove(hosts_file().c_str());
  return 0;
}
