// runtime_bench: what the runtime adds on top of the timer queues, each on the wheel and the
// heap in one run where the queue matters.
//
//   resume/task                 co_await of a task that completes at once (frame + symmetric
//                               transfer), per await
//   spawn/run_and_free          spawn() of a task that completes at once, run through the
//                               ready queue and freed (frame and spawn record: the frame pool's
//                               allocation and free paths), per spawn
//   resume/yield                yield(): through the ready queue and back, per yield (a loop
//                               iteration per yield: the iteration's fixed cost)
//   resume/yield_metrics_off    the same with runtime_options::metrics off (what the per-
//                               iteration phase timing costs)
//   sleep_round_trip/<kind>     co_await sleep_for(0): one loop iteration incl. io_uring_enter
//   sleepers_expire/<kind>/N    N coroutines asleep at random deadlines over 1 s expire and
//                               resume (paused clock, so only CPU is timed), per sleeper; each
//                               then sleeps again (a day), so frames are freed outside the window;
//                               cpu_ns_per_sleeper: the loop thread's CPU time (immune to a
//                               shared machine's other load)
//   sleepers_expire_metrics_off/wheel/N   the same with runtime_options::metrics off
//   sleep_round_trip_metrics_off/<kind>   sleep_round_trip with runtime_options::metrics off
//   sleep_lateness/<kind>/N     real clock: with N far timers pending and the loop kept busy by
//                               a task doing 20 us of work per yield, how late 1..5 ms sleeps
//                               complete: counters p50_us, p99_us, max_us
//   io_latency/<load>           a byte echoed through a socketpair by a cogwheel task, timed by a
//                               blocking client thread: p50_us, p99_us, max_us; `alone`, or next
//                               to a task that does nothing but yield() (the I/O latency a
//                               yield spinner adds)
//   submit_to_round_trip/idle   submit_to(other core, f) and back, two cores, per round trip, both
//                               loops asleep in the kernel between messages
//   submit_to_round_trip/busy   the same with a yield-spinning task on each core (loops running)
//   submit_to_pipelined         submit_to(other core, f) calls, pipelined (up to 4096 in flight,
//                               each its own task), per call; wakeups_per_call: the target's
//                               wake-ups
//   eventfd_ping_pong           the wake-up floor: two pinned threads ping-ponging through two
//                               eventfds with blocking reads, per round trip
#include <benchmark/benchmark.h>

#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <cogwheel/cogwheel.hpp>

using namespace cogwheel;
using namespace std::chrono_literals;

namespace {

constexpr timer_kind kinds[] = {timer_kind::wheel, timer_kind::heap};
const char* name_of(timer_kind k) { return k == timer_kind::wheel ? "wheel" : "heap"; }

task<int> ready_value(int v) { co_return v; }

void bm_resume_task(benchmark::State& state) {
  run([&]() -> task<void> {
    long sum = 0;
    for (auto _ : state) sum += co_await ready_value(1);
    benchmark::DoNotOptimize(sum);
  }());
}

task<void> nothing() { co_return; }

void bm_spawn(benchmark::State& state) {
  run([&]() -> task<void> {
    for (auto _ : state) {
      spawn(nothing());
      co_await yield();  // the spawned task runs (and its frame is freed) before this resumes
    }
  }());
}

void bm_resume_yield(benchmark::State& state, bool metrics) {
  run([&]() -> task<void> {
    for (auto _ : state) co_await yield();
  }(), runtime_options{.metrics = metrics});
}

void bm_sleep_round_trip(benchmark::State& state, timer_kind kind, bool metrics) {
  run([&]() -> task<void> {
    for (auto _ : state) co_await sleep_for(0ns);
  }(), runtime_options{.timers = kind, .metrics = metrics});
}

// The loop thread's CPU time: on a shared machine wall time also counts other processes.
double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Wakes, counts, and goes back to sleep (as a server's coroutine would), so the measured
// window holds expiry and resumption, not the frame's deallocation.
task<void> sleeper(clock::time_point at, std::atomic<long>& woke) {
  co_await sleep_until(at);
  woke.fetch_add(1, std::memory_order_relaxed);
  co_await sleep_for(24h);
}

void bm_sleepers_expire(benchmark::State& state, timer_kind kind, bool metrics) {
  const auto n = static_cast<long>(state.range(0));
  std::mt19937_64 rng(7);
  double total_seconds = 0;
  double cpu_seconds = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::atomic<long> woke{0};
    double seconds = 0;
    run([&]() -> task<void> {
      const clock::time_point t0 = now();
      std::uniform_int_distribution<long> ms(1, 1000);
      for (long i = 0; i < n; ++i) spawn(sleeper(t0 + std::chrono::milliseconds(ms(rng)), woke));
      co_await sleep_for(0ns);  // every sleeper has started (ready_budget is raised below)
      const auto w0 = clock::now();
      const double c0 = thread_cpu_seconds();
      while (woke.load(std::memory_order_relaxed) < n) co_await sleep_for(1ms);
      seconds = std::chrono::duration<double>(clock::now() - w0).count();
      cpu_seconds += thread_cpu_seconds() - c0;
    }(), runtime_options{.timers = kind, .ready_budget = static_cast<unsigned>(n + 16), .paused_clock = true,
                         .metrics = metrics});
    state.ResumeTiming();
    state.SetIterationTime(seconds);
    total_seconds += seconds;
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["ns_per_sleeper"] = total_seconds * 1e9 / static_cast<double>(state.iterations() * n);
  state.counters["cpu_ns_per_sleeper"] = cpu_seconds * 1e9 / static_cast<double>(state.iterations() * n);
}

task<void> far_sleeper() { co_await sleep_for(1h); }

void bm_sleep_lateness(benchmark::State& state, timer_kind kind) {
  const auto n = static_cast<long>(state.range(0));
  std::vector<double> late_us;
  for (auto _ : state) {
    late_us.clear();
    run([&]() -> task<void> {
      for (long i = 0; i < n; ++i) spawn(far_sleeper());
      co_await sleep_for(0ns);  // all far sleepers have started before the probe begins
      co_await sleep_for(0ns);
      bool stop = false;
      spawn([](bool& stop) -> task<void> {  // keeps the loop busy between sleeps
        while (!stop) {
          const auto until = clock::now() + 20us;
          while (clock::now() < until) {
          }
          co_await yield();
        }
      }(stop));
      std::mt19937 rng(11);
      for (int i = 0; i < 400; ++i) {
        const auto d = std::chrono::microseconds(1000 + rng() % 4000);
        const auto t0 = clock::now();
        co_await sleep_for(d);
        late_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0 - d).count());
      }
      stop = true;
      co_await yield();
    }(), runtime_options{.timers = kind, .ready_budget = static_cast<unsigned>(n + 16)});
  }
  std::sort(late_us.begin(), late_us.end());
  state.counters["p50_us"] = late_us[late_us.size() / 2];
  state.counters["p99_us"] = late_us[late_us.size() * 99 / 100];
  state.counters["max_us"] = late_us.back();
}

task<void> yield_spinner(const bool& stop) {
  while (!stop) co_await yield();
}

void put_percentiles(benchmark::State& state, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[us.size() * 99 / 100];
  state.counters["max_us"] = us.back();
}

void bm_io_latency(benchmark::State& state, bool spinner) {
  std::vector<double> us;
  for (auto _ : state) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      state.SkipWithError("socketpair");
      return;
    }
    constexpr int rounds = 20000;
    std::thread client([&, fd = sv[1]] {
      char b = 'x';
      for (int i = 0; i < rounds; ++i) {
        const auto t0 = clock::now();
        if (::write(fd, &b, 1) != 1 || ::read(fd, &b, 1) != 1) return;
        us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
      }
      ::shutdown(fd, SHUT_WR);
    });
    run([&, fd = sv[0]]() -> task<void> {
      bool stop = false;
      if (spinner) spawn(yield_spinner(stop));
      tcp_stream s(fd);
      std::array<std::byte, 64> buf{};
      for (;;) {
        auto n = co_await s.read(buf);
        if (!n || *n == 0) break;
        if (!co_await s.write_all(std::span<const std::byte>(buf.data(), *n))) break;
      }
      stop = true;
    }());
    client.join();
    ::close(sv[1]);
  }
  put_percentiles(state, us);
}

void bm_submit_to_round_trip(benchmark::State& state, bool busy) {
  runtime rt(runtime_options{.cores = 2});
  std::atomic<bool> stop{false};
  rt.run([&](unsigned core) -> task<void> {
    if (core != 0) {
      if (busy)
        while (!stop.load(std::memory_order_relaxed)) co_await yield();
      co_return;
    }
    bool spin_stop = false;
    if (busy) spawn(yield_spinner(spin_stop));
    long sum = 0;
    for (auto _ : state) sum += co_await submit_to(1, [] { return 1; });
    benchmark::DoNotOptimize(sum);
    spin_stop = true;
    stop.store(true);
  });
}

// submit_to_pipelined: core 0 keeps up to `window` submit_to calls to core 1 in flight, each
// in its own task, through the public API only (the inbox itself is runtime-internal).
task<void> one_call(long& answered) {
  benchmark::DoNotOptimize(co_await submit_to(1, [] { return 1; }));
  ++answered;
}

void bm_submit_to_pipelined(benchmark::State& state) {
  constexpr long window = 4096;
  std::atomic<bool> done{false};
  std::uint64_t wakeups = 0;
  runtime rt(runtime_options{.cores = 2});
  rt.run([&](unsigned core) -> task<void> {
    if (core != 0) {
      const std::uint64_t w0 = this_core_metrics().remote_wakeups;
      while (!done.load(std::memory_order_acquire)) co_await sleep_for(1ms);
      wakeups = this_core_metrics().remote_wakeups - w0;
      co_return;
    }
    long sent = 0;
    long answered = 0;  // written by the calls' tasks, on this core
    for (auto _ : state) {
      while (sent - answered >= window) co_await yield();
      spawn(one_call(answered));
      ++sent;
    }
    while (answered < sent) co_await yield();
    done.store(true, std::memory_order_release);
  });
  state.SetItemsProcessed(state.iterations());
  state.counters["wakeups_per_call"] = static_cast<double>(wakeups) / static_cast<double>(state.iterations());
}

void pin_self(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu % static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), &one);
  ::pthread_setaffinity_np(::pthread_self(), sizeof one, &one);
}

void bm_eventfd_ping_pong(benchmark::State& state) {
  const int ping = ::eventfd(0, EFD_CLOEXEC), pong = ::eventfd(0, EFD_CLOEXEC);
  std::uint64_t v = 1;
  std::thread echo([&] {
    pin_self(1);
    std::uint64_t x;
    while (::read(ping, &x, sizeof x) == sizeof x && x < 2) {
      if (::write(pong, &v, sizeof v) != sizeof v) return;
    }
  });
  pin_self(0);
  std::uint64_t x;
  for (auto _ : state) {
    if (::write(ping, &v, sizeof v) != sizeof v || ::read(pong, &x, sizeof x) != sizeof x) break;
  }
  const std::uint64_t quit = 2;
  [[maybe_unused]] ssize_t n = ::write(ping, &quit, sizeof quit);
  echo.join();
  ::close(ping);
  ::close(pong);
  cpu_set_t all;
  CPU_ZERO(&all);
  for (unsigned i = 0; i < std::thread::hardware_concurrency(); ++i) CPU_SET(i, &all);
  ::pthread_setaffinity_np(::pthread_self(), sizeof all, &all);
}

void register_all() {
  benchmark::RegisterBenchmark("resume/task", bm_resume_task);
  benchmark::RegisterBenchmark("spawn/run_and_free", bm_spawn);
  benchmark::RegisterBenchmark("resume/yield", bm_resume_yield, true);
  benchmark::RegisterBenchmark("resume/yield_metrics_off", bm_resume_yield, false);
  for (timer_kind k : kinds)
    benchmark::RegisterBenchmark((std::string("sleep_round_trip/") + name_of(k)).c_str(), bm_sleep_round_trip, k, true);
  for (timer_kind k : kinds)
    benchmark::RegisterBenchmark((std::string("sleep_round_trip_metrics_off/") + name_of(k)).c_str(),
                                 bm_sleep_round_trip, k, false);
  for (timer_kind k : kinds)
    benchmark::RegisterBenchmark((std::string("sleepers_expire/") + name_of(k)).c_str(), bm_sleepers_expire, k, true)
        ->Arg(1000)->Arg(100000)->Arg(1000000)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
  // The same with runtime_options::metrics off: what the metrics cost a sleeper.
  benchmark::RegisterBenchmark("sleepers_expire_metrics_off/wheel", bm_sleepers_expire, timer_kind::wheel, false)
      ->Arg(1000)->Arg(100000)->Arg(1000000)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
  for (timer_kind k : kinds)
    benchmark::RegisterBenchmark((std::string("sleep_lateness/") + name_of(k)).c_str(), bm_sleep_lateness, k)
        ->Arg(1000000)->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("io_latency/alone", bm_io_latency, false)->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("io_latency/yield_spinner", bm_io_latency, true)->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("eventfd_ping_pong", bm_eventfd_ping_pong)->UseRealTime();
  benchmark::RegisterBenchmark("submit_to_round_trip/idle", bm_submit_to_round_trip, false)->UseRealTime();
  benchmark::RegisterBenchmark("submit_to_round_trip/busy", bm_submit_to_round_trip, true)->UseRealTime();
  benchmark::RegisterBenchmark("submit_to_pipelined", bm_submit_to_pipelined)->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
