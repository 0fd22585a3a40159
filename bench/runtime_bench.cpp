// runtime_bench: what the runtime adds on top of the timer queues, each on the wheel and the
// heap in one run where the queue matters.
//
//   resume/task                 co_await of a task that completes at once (frame + symmetric
//                               transfer), per await
//   resume/yield                yield(): through the ready queue and back, per yield
//   sleep_round_trip/<kind>     co_await sleep_for(0): one loop iteration incl. io_uring_enter
//   sleepers_expire/<kind>/N    N coroutines asleep at random deadlines over 1 s expire and
//                               resume (paused clock, so only CPU is timed), per sleeper; each
//                               then sleeps again (a day), so frames are freed outside the window
//   sleep_lateness/<kind>/N     real clock: with N far timers pending and the loop kept busy by
//                               a task doing 20 us of work per yield, how late 1..5 ms sleeps
//                               complete: counters p50_us, p99_us, max_us
//   submit_to_round_trip        submit_to(other core, f) and back, two cores, per round trip
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <random>
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

void bm_resume_yield(benchmark::State& state) {
  run([&]() -> task<void> {
    for (auto _ : state) co_await yield();
  }());
}

void bm_sleep_round_trip(benchmark::State& state, timer_kind kind) {
  run([&]() -> task<void> {
    for (auto _ : state) co_await sleep_for(0ns);
  }(), runtime_options{.timers = kind});
}

// Wakes, counts, and goes back to sleep (as a server's coroutine would), so the measured
// window holds expiry and resumption, not the frame's deallocation.
task<void> sleeper(clock::time_point at, std::atomic<long>& woke) {
  co_await sleep_until(at);
  woke.fetch_add(1, std::memory_order_relaxed);
  co_await sleep_for(24h);
}

void bm_sleepers_expire(benchmark::State& state, timer_kind kind) {
  const auto n = static_cast<long>(state.range(0));
  std::mt19937_64 rng(7);
  double total_seconds = 0;
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
      while (woke.load(std::memory_order_relaxed) < n) co_await sleep_for(1ms);
      seconds = std::chrono::duration<double>(clock::now() - w0).count();
    }(), runtime_options{.timers = kind, .ready_budget = static_cast<unsigned>(n + 16), .paused_clock = true});
    state.ResumeTiming();
    state.SetIterationTime(seconds);
    total_seconds += seconds;
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["ns_per_sleeper"] = total_seconds * 1e9 / static_cast<double>(state.iterations() * n);
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

void bm_submit_to_round_trip(benchmark::State& state) {
  runtime rt(runtime_options{.cores = 2});
  rt.run([&](unsigned core) -> task<void> {
    if (core != 0) co_return;
    long sum = 0;
    for (auto _ : state) sum += co_await submit_to(1, [] { return 1; });
    benchmark::DoNotOptimize(sum);
  });
}

void register_all() {
  benchmark::RegisterBenchmark("resume/task", bm_resume_task);
  benchmark::RegisterBenchmark("resume/yield", bm_resume_yield);
  for (timer_kind k : kinds)
    benchmark::RegisterBenchmark((std::string("sleep_round_trip/") + name_of(k)).c_str(), bm_sleep_round_trip, k);
  for (timer_kind k : kinds)
    benchmark::RegisterBenchmark((std::string("sleepers_expire/") + name_of(k)).c_str(), bm_sleepers_expire, k)
        ->Arg(1000)->Arg(100000)->Arg(1000000)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
  for (timer_kind k : kinds)
    benchmark::RegisterBenchmark((std::string("sleep_lateness/") + name_of(k)).c_str(), bm_sleep_lateness, k)
        ->Arg(1000000)->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("submit_to_round_trip", bm_submit_to_round_trip)->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
