// delay_queue_bench: delayed jobs on a real redis-server (started here on a free port) with
// `--pending` far-future jobs sitting in the same sorted set. Measures, in one run:
//   schedule   jobs/s of delay_queue::schedule (EVALSHA), pipelined by 256 producer coroutines
//   wheel      2 workers (2 cores) on delay_queue::run with lookahead = 0 and ack_delay = 0
//              (the defaults before): each sleeps on its wheel until the next due time and is
//              woken by Pub/Sub, and acknowledges each job as it ends
//   lookahead  the same with worker_options::lookahead = 200 ms: one claim takes the jobs due
//              within 200 ms and holds them on the wheel until their due time
//   poll 100ms 2 workers that run a claim script (ZRANGEBYSCORE + ZREM) every 100 ms
//   poll 1s    the same every second
//   defaults   2 workers on delay_queue::run with worker_options' defaults (only the address
//              and --concurrency set): what a user gets without tuning
// For each worker kind, --rounds rounds of --jobs jobs due evenly over --seconds: firing
// lateness (handler start - due time) p50/p99/max, and Redis CPU per fired job (ns on the CPU
// of the redis-server process's threads, /proc/<pid>/task/*/schedstat, over the round, which
// includes idle polls).
// Medians over the rounds are printed as a Markdown table, with each kind's Redis CPU per job over
// the 100 ms poller's: the ratio of the medians, and the median and range of the ratios paired by
// round. Each round starts with the next kind in turn (no kind is always first).
//
// Then, unless --throughput=0: end-to-end throughput (jobs scheduled due at once by 256
// producers on a third thread, fired and acknowledged by the 2 lookahead workers), with the
// share of one core Redis used meanwhile.
//
// Usage: delay_queue_bench [--pending=1000000] [--jobs=10000] [--seconds=5] [--rounds=5]
//        [--throughput=200000] [--ack-delay=100: ms, the lookahead workers' ack_delay]
//        [--lookahead=200: ms, the lookahead kind's lookahead (not the throughput run's)]
//        [--concurrency=1000: the firing workers' worker_options::concurrency]
//        [--throughput-concurrency=2000: the throughput run's] [--backlog: the throughput run's
//        jobs are all scheduled before its workers start, which then fire a standing backlog]
//        [--tick-us=1000: the firing workers' runtime_options::tick, in us]
//        [--kinds=01234: which worker kinds run, by their index above]
//        [--verbose: INFO commandstats of each round on stderr]
//        [--redis-cpu=N: redis-server alone on CPU N, this process on the other CPUs (a Redis
//        host of its own, as in production: otherwise the workers' wake-ups share Redis's cores
//        and caches, which costs the kinds that wake more often; default: no pinning)]
// Needs redis-server on PATH.
#include <cogwheel/redis/delay_queue.hpp>

#include <cogwheel/cogwheel.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.hpp"

namespace {

using namespace cogwheel;
using namespace std::chrono_literals;
using redis::wall_clock;

struct config {
  int pending = 1'000'000;
  int jobs = 10'000;
  int seconds = 5;
  int rounds = 5;
  int throughput = 200'000;
  unsigned workers = 2;
  bool verbose = false;
  int ack_delay_ms = 100;      // the lookahead kind's worker_options::ack_delay
  int lookahead_ms = 200;      // the lookahead kind's worker_options::lookahead
  unsigned concurrency = 1000; // the firing workers' worker_options::concurrency
  unsigned throughput_concurrency = 2000;  // the throughput run's worker_options::concurrency
  bool backlog = false;        // the throughput run's jobs all scheduled before the workers start
  int tick_us = 1000;          // the workers' runtime_options::tick
  std::string kinds = "01234";  // which worker kinds run (digits: indexes into kind_names)
  int redis_cpu = -1;          // --redis-cpu: pin redis-server there and this process elsewhere
};

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(wall_clock::now().time_since_epoch()).count();
}

// CPU time of a process (all its threads), in seconds: the first field of each thread's
// /proc/<pid>/task/<tid>/schedstat, ns on the CPU (utime + stime from /proc/<pid>/stat count
// 10 ms ticks: +-1 tick is +-1 us per job over a round of 10,000 jobs).
double cpu_seconds(pid_t pid) {
  double ns = 0;
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream f(t.path() / "schedstat");
    double on_cpu = 0;
    if (f >> on_cpu) ns += on_cpu;
  }
  return ns / 1e9;
}

// --redis-cpu: every thread of redis-server on `cpu`, this process (whose threads, runtimes'
// included, inherit it) on the other CPUs it may use. False when that leaves either side none.
bool split_cpus(pid_t redis_pid, int cpu) {
  cpu_set_t mine;
  if (::sched_getaffinity(0, sizeof mine, &mine) != 0 || cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mine)) return false;
  CPU_CLR(cpu, &mine);
  if (CPU_COUNT(&mine) == 0) return false;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(redis_pid) + "/task", ec))
    if (::sched_setaffinity(static_cast<pid_t>(std::stoi(t.path().filename().string())), sizeof one, &one) != 0) return false;
  return ::sched_setaffinity(0, sizeof mine, &mine) == 0;
}

redis::client_options options(std::uint16_t port) {
  redis::client_options o;
  o.address = socket_address::ipv4_loopback(port);
  return o;
}

// Schedules ids [from, from + n) due evenly over [start, start + spread), 256 at a time in
// flight; returns jobs/s.
double schedule_all(std::uint16_t port, const std::string& prefix, int n, wall_clock::time_point start,
                    std::chrono::milliseconds spread) {
  const auto t0 = clock::now();
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options(port));
    if (!c) throw std::runtime_error("connect: " + c.error().message());
    redis::delay_queue q(*c, "bench");
    auto producer = [&](int first) -> task<void> {
      for (int i = first; i < n; i += 256) {
        auto r = co_await q.schedule(prefix + std::to_string(i), "payload", start + spread * i / n);
        if (!r || !*r) std::fprintf(stderr, "schedule %d failed\n", i);
      }
    };
    std::vector<task<void>> all;
    for (int p = 0; p < 256; ++p) all.push_back(producer(p));
    co_await when_all(std::move(all));
  }());
  return n / std::chrono::duration<double>(clock::now() - t0).count();
}

// The plain polling worker: every 100 ms, claim what is due (atomically, so two workers never
// take the same job) and run it. It keeps no in-flight set: at-most-once, less work per job.
constexpr const char* poll_claim_lua = R"(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, ARGV[1])
local out = {}
for i = 1, #due, 2 do
  redis.call('ZREM', KEYS[1], due[i])
  out[#out + 1] = due[i]
  out[#out + 1] = due[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], due[i]) or ''
  redis.call('HDEL', KEYS[2], due[i])
end
return out
)";

// With `print`, INFO commandstats (calls and usec per command since the last reset) on stderr;
// then resets the stats.
void print_commandstats(std::uint16_t port, bool print = true) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options(port));
    if (!c) co_return;
    auto info = co_await c->command("INFO", "commandstats");
    if (info && print) std::fprintf(stderr, "%.*s", static_cast<int>(info->str().size()), info->str().data());
    // How long one script held the server (Redis runs one command at a time): percentiles.
    auto latency = co_await c->command("INFO", "latencystats");
    if (latency && print) {
      const std::string_view text = latency->str();
      const auto at = text.find("latency_percentiles_usec_evalsha:");
      if (at != std::string_view::npos) {
        const std::string_view line = text.substr(at, text.find('\r', at) - at);
        std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
      }
    }
    auto slow = co_await c->command("SLOWLOG", "GET", 3);  // the longest commands (> 10 ms)
    if (slow && print && slow->is_array())
      for (std::size_t i = 0; i < slow->size(); ++i)
        if ((*slow)[i].is_array() && (*slow)[i].size() > 2 && (*slow)[i][2].is_integer())
          std::fprintf(stderr, "slowlog: a command of %lld us\n", static_cast<long long>((*slow)[i][2].integer()));
    (void)co_await c->command("SLOWLOG", "RESET");
    (void)co_await c->command("CONFIG", "RESETSTAT");
  }());
}

struct round_result {
  double p50_us, p99_us, max_us, redis_cpu_us_per_job;
};

constexpr int kinds = 5;
const char* kind_names[kinds] = {"wheel + Pub/Sub (delay_queue), lookahead = 0, ack_delay = 0", "the same, lookahead = 200 ms",
                                 "polling every 100 ms", "polling every 1 s", "delay_queue, worker_options defaults"};

// Runs `workers` cores until `jobs` jobs have fired; `kind` picks the worker kind.
round_result fire(const config& cfg, pid_t redis_pid, std::uint16_t port, int kind, int round) {
  const bool polling = kind == 2 || kind == 3;
  std::string prefix(1, "wlpqd"[kind]);
  prefix.append(std::to_string(round)).push_back(':');
  const auto start = wall_clock::now() + 1500ms;
  schedule_all(port, prefix, cfg.jobs, start, std::chrono::seconds(cfg.seconds));
  if (cfg.verbose) print_commandstats(port, false);  // the round's stats count its firing only
  std::vector<std::vector<std::int64_t>> late(cfg.workers);
  std::atomic<int> fired{0};
  std::atomic<bool> done{false};
  const double cpu0 = cpu_seconds(redis_pid);
  const auto fire0 = clock::now();
  runtime rt(runtime_options{.cores = cfg.workers, .tick = std::chrono::microseconds(cfg.tick_us)});
  rt.run([&](unsigned core) -> task<void> {
    auto c = co_await redis::client::connect(options(port));
    if (!c) co_return;
    auto record = [&, core](std::int64_t due_ms) {
      late[core].push_back(wall_us() - due_ms * 1000);
      if (fired.fetch_add(1) + 1 >= cfg.jobs) done = true;
    };
    if (polling) {
      redis::script claim(poll_claim_lua);
      interval every(kind == 2 ? 100ms : 1000ms);
      // The jobs delay_queue::schedule wrote: the due set and the entries (stamp and payload).
      const redis::command_arg keys[] = {"{bench}:due", "{bench}:job"};
      const redis::command_arg args[] = {1000};
      while (!done) {
        co_await every.next();
        auto r = co_await claim.run(*c, keys, args);
        if (!r || !r->is_array()) continue;
        for (std::size_t i = 0; i + 2 < r->size(); i += 3) record(*(*r)[i + 1].to_integer());
      }
    } else {
      redis::delay_queue q(*c, "bench");
      redis::worker_options w;
      w.address = socket_address::ipv4_loopback(port);
      w.concurrency = cfg.concurrency;
      if (kind == 0) {  // the defaults before: a claim at each due instant, an ack per job
        w.lookahead = 0ms;
        w.ack_delay = 0ms;
      }
      if (kind == 1) {
        w.lookahead = std::chrono::milliseconds(cfg.lookahead_ms);
        w.ack_delay = std::chrono::milliseconds(cfg.ack_delay_ms);
      }
      auto handler = [&](const redis::job& j) -> task<result<void>> {
        record(j.attempt_due_ms);
        co_return result<void>();
      };
      auto watch = [&]() -> task<void> {
        while (!done) co_await sleep_for(10ms);
        q.stop();
      };
      co_await when_all(q.run(handler, w), watch());
      if (cfg.verbose) {
        const auto& s = q.stats();
        std::fprintf(stderr, "core %u: claims %llu fired %llu ack batches %llu, lateness by the server's clock p50 <= %llu us p99 <= %llu us\n",
                     core, static_cast<unsigned long long>(s.claims), static_cast<unsigned long long>(s.fired),
                     static_cast<unsigned long long>(s.ack_batches), static_cast<unsigned long long>(s.attempt_lateness.quantile_us(0.5)),
                     static_cast<unsigned long long>(s.attempt_lateness.quantile_us(0.99)));
      }
    }
  });
  const double cpu1 = cpu_seconds(redis_pid);
  if (cfg.verbose) {
    // CLOCK_MONOTONIC seconds: `perf record -k CLOCK_MONOTONIC` + `perf report --time` profile
    // the firing alone.
    std::fprintf(stderr, "firing window %.6f,%.6f\n", std::chrono::duration<double>(fire0.time_since_epoch()).count(),
                 std::chrono::duration<double>(clock::now().time_since_epoch()).count());
    print_commandstats(port);
  }
  std::vector<std::int64_t> all;
  for (auto& v : late) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  auto at = [&](double q) { return static_cast<double>(all[std::min(all.size() - 1, static_cast<std::size_t>(q * all.size()))]); };
  return {at(0.5), at(0.99), static_cast<double>(all.back()), (cpu1 - cpu0) * 1e6 / static_cast<double>(all.size())};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct throughput_result {
  double jobs_per_s, redis_core_share, p50_us, p99_us;
};

// `n` jobs due at once (schedule_after 0) from 256 producer coroutines on a thread of their own,
// fired and acknowledged by 2 lookahead workers: jobs/s from the first schedule to the last ack.
throughput_result throughput(const config& cfg, pid_t redis_pid, std::uint16_t port, int round) {
  const int n = cfg.throughput;
  std::string prefix(1, 't');  // built by append: GCC 12 warns (-Wrestrict) on "t" + s + ":"
  prefix.append(std::to_string(round)).push_back(':');
  std::vector<std::atomic<std::uint64_t>> acked(cfg.workers);
  std::vector<std::vector<std::int64_t>> late(cfg.workers);
  std::atomic<bool> done{false};
  if (cfg.verbose) print_commandstats(port, false);
  double cpu0 = cpu_seconds(redis_pid);
  auto t0 = clock::now();
  std::thread producer([&] {
    run([&]() -> task<void> {
      auto c = co_await redis::client::connect(options(port));
      if (!c) co_return;
      redis::delay_queue q(*c, "bench");
      auto one = [&](int first) -> task<void> {
        for (int i = first; i < n; i += 256) (void)co_await q.schedule_after(prefix + std::to_string(i), "payload", 0ms);
      };
      std::vector<task<void>> all;
      for (int p = 0; p < 256; ++p) all.push_back(one(p));
      co_await when_all(std::move(all));
    }());
  });
  if (cfg.backlog) {  // the workers start on a standing backlog: time and CPU count from then
    producer.join();
    if (cfg.verbose) print_commandstats(port, false);
    cpu0 = cpu_seconds(redis_pid);
    t0 = clock::now();
  }
  runtime rt(runtime_options{.cores = cfg.workers});
  rt.run([&](unsigned core) -> task<void> {
    auto c = co_await redis::client::connect(options(port));
    if (!c) co_return;
    redis::delay_queue q(*c, "bench");
    redis::worker_options w;
    w.address = socket_address::ipv4_loopback(port);
    w.concurrency = cfg.throughput_concurrency;
    w.lookahead = 200ms;
    w.ack_delay = 20ms;
    auto handler = [&, core](const redis::job& j) -> task<result<void>> {
      late[core].push_back(wall_us() - j.attempt_due_ms * 1000);
      co_return result<void>();
    };
    auto watch = [&]() -> task<void> {
      while (!done) {
        co_await sleep_for(5ms);
        acked[core] = q.stats().acked;
        std::uint64_t total = 0;
        for (auto& a : acked) total += a;
        if (total >= static_cast<std::uint64_t>(n)) done = true;
      }
      q.stop();
    };
    co_await when_all(q.run(handler, w), watch());
  });
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
  if (producer.joinable()) producer.join();
  const double cpu1 = cpu_seconds(redis_pid);
  if (cfg.verbose) print_commandstats(port);
  std::vector<std::int64_t> all;
  for (auto& v : late) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  auto at = [&](double q) { return static_cast<double>(all[std::min(all.size() - 1, static_cast<std::size_t>(q * all.size()))]); };
  return {n / seconds, (cpu1 - cpu0) / seconds, at(0.5), at(0.99)};
}

}  // namespace

int main(int argc, char** argv) {
  config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) { return std::atoi(a.substr(std::string(name).size()).c_str()); };
    if (a.rfind("--pending=", 0) == 0) cfg.pending = value("--pending=");
    else if (a.rfind("--jobs=", 0) == 0) cfg.jobs = value("--jobs=");
    else if (a.rfind("--seconds=", 0) == 0) cfg.seconds = value("--seconds=");
    else if (a.rfind("--rounds=", 0) == 0) cfg.rounds = value("--rounds=");
    else if (a.rfind("--throughput=", 0) == 0) cfg.throughput = value("--throughput=");
    else if (a.rfind("--ack-delay=", 0) == 0) cfg.ack_delay_ms = value("--ack-delay=");
    else if (a.rfind("--concurrency=", 0) == 0) cfg.concurrency = value("--concurrency=");
    else if (a.rfind("--throughput-concurrency=", 0) == 0) cfg.throughput_concurrency = value("--throughput-concurrency=");
    else if (a == "--backlog") cfg.backlog = true;
    else if (a.rfind("--lookahead=", 0) == 0) cfg.lookahead_ms = value("--lookahead=");
    else if (a.rfind("--tick-us=", 0) == 0) cfg.tick_us = value("--tick-us=");
    else if (a.rfind("--kinds=", 0) == 0) cfg.kinds = a.substr(8);
    else if (a == "--verbose") cfg.verbose = true;
    else if (a.rfind("--redis-cpu=", 0) == 0) cfg.redis_cpu = value("--redis-cpu=");
    else {
      std::fprintf(stderr, "usage: %s [--pending=N] [--jobs=N] [--seconds=S] [--rounds=R] [--throughput=N] [--ack-delay=MS] [--lookahead=MS] [--concurrency=N] [--throughput-concurrency=N] [--backlog] [--tick-us=US] [--kinds=01234] [--verbose] [--redis-cpu=N]\n", argv[0]);
      return 2;
    }
  }
  static std::string lookahead_name = "the same, lookahead = " + std::to_string(cfg.lookahead_ms) + " ms";
  kind_names[1] = lookahead_name.c_str();
  if (!cogwheel::redis_test::redis_server_available()) {
    std::fprintf(stderr, "redis-server is not installed\n");
    return 77;
  }
  cogwheel::redis_test::redis_server server;
  if (cfg.redis_cpu >= 0) {
    if (!split_cpus(server.pid(), cfg.redis_cpu)) {
      std::fprintf(stderr, "--redis-cpu=%d: cannot give redis-server that CPU and this process the others\n", cfg.redis_cpu);
      return 2;
    }
    std::printf("redis-server pinned to CPU %d, the workers to the other CPUs\n", cfg.redis_cpu);
  }
  const double rate = schedule_all(server.port(), "pending:", cfg.pending, wall_clock::now() + 24h, 1h);
  std::printf("scheduled %d pending jobs: %.0f jobs/s (EVALSHA, 256 in flight, one connection)\n", cfg.pending, rate);
  std::printf("%d rounds of %d jobs due over %d s, %u workers, %d jobs pending\n\n", cfg.rounds, cfg.jobs,
              cfg.seconds, cfg.workers, cfg.pending);
  std::vector<double> v[kinds][4];
  std::vector<int> chosen;
  for (int kind = 0; kind < kinds; ++kind)
    if (cfg.kinds.find(static_cast<char>('0' + kind)) != std::string::npos) chosen.push_back(kind);
  for (int r = 0; r < cfg.rounds; ++r) {
    // Interleaved, so drift hits every kind alike, and each round starts with the next kind, so
    // that no kind is always the first after the pending jobs were scheduled.
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      const int kind = chosen[(i + static_cast<std::size_t>(r)) % chosen.size()];
      const round_result x = fire(cfg, server.pid(), server.port(), kind, r);
      std::fprintf(stderr, "round %d %s: p50 %.0f us p99 %.0f us max %.0f us, redis %.2f us/job\n", r,
                   kind_names[kind], x.p50_us, x.p99_us, x.max_us, x.redis_cpu_us_per_job);
      v[kind][0].push_back(x.p50_us);
      v[kind][1].push_back(x.p99_us);
      v[kind][2].push_back(x.max_us);
      v[kind][3].push_back(x.redis_cpu_us_per_job);
    }
  }
  std::printf("| worker | lateness p50 | p99 | max | Redis CPU per fired job |\n|---|---|---|---|---|\n");
  for (int kind = 0; kind < kinds; ++kind)
    if (!v[kind][0].empty())
      std::printf("| %s | %.2f ms | %.2f ms | %.2f ms | %.2f us |\n", kind_names[kind], median(v[kind][0]) / 1e3,
                median(v[kind][1]) / 1e3, median(v[kind][2]) / 1e3, median(v[kind][3]));
  for (int kind : {0, 1, 3, 4})
    if (!v[kind][0].empty() && !v[2][0].empty()) {
      std::printf("\n%s / polling every 100 ms: Redis CPU per job x%.2f, p99 lateness x%.3f", kind_names[kind],
                  median(v[kind][3]) / median(v[2][3]), median(v[kind][1]) / median(v[2][1]));
      // Paired by round (the same minute of the machine's load): median and range of the ratios.
      std::vector<double> paired;
      for (std::size_t r = 0; r < v[kind][3].size(); ++r) paired.push_back(v[kind][3][r] / v[2][3][r]);
      std::printf("; per round x%.2f median, x%.2f-x%.2f", median(paired), *std::min_element(paired.begin(), paired.end()),
                  *std::max_element(paired.begin(), paired.end()));
    }
  std::printf("\n");
  if (cfg.throughput > 0 && cfg.rounds > 0) {  // --kinds=- --rounds=1: the throughput run alone
    std::vector<double> t[4];
    for (int r = 0; r < cfg.rounds; ++r) {
      const throughput_result x = throughput(cfg, server.pid(), server.port(), r);
      std::fprintf(stderr, "throughput round %d: %.0f jobs/s, redis %.0f%% of a core, p50 %.0f us p99 %.0f us\n", r,
                   x.jobs_per_s, x.redis_core_share * 100, x.p50_us, x.p99_us);
      t[0].push_back(x.jobs_per_s);
      t[1].push_back(x.redis_core_share);
      t[2].push_back(x.p50_us);
      t[3].push_back(x.p99_us);
    }
    std::printf("\nthroughput, %d jobs due at once (scheduled, fired, acknowledged), lookahead workers: %.0f jobs/s, "
                "Redis at %.0f%% of a core, lateness p50 %.2f ms p99 %.2f ms (medians of %d)\n",
                cfg.throughput, median(t[0]), median(t[1]) * 100, median(t[2]) / 1e3, median(t[3]) / 1e3, cfg.rounds);
  }
  return 0;
}
