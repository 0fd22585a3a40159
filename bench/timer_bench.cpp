// timer_bench: identical timer workloads on timer_wheel and timer_heap (tick 1 ms) with N pending
// timers, N = 1e3 .. 1e7, in one binary so that heap/wheel ratios come from one run.
//
// Benchmarks are named <operation>/<queue>/<N>, e.g. churn/wheel/1000000. What each workload
// does and why, and how to read the results: bench/README.md. Typical use:
//
//   timer_bench --benchmark_repetitions=3 --benchmark_format=json --benchmark_out=timer.json
//   python3 bench/pair_table.py timer.json
//
// Nodes are one big array of 32-byte structs (a timer_node and the deadline it was given),
// scheduled in the order of a random permutation at deadlines uniform in 1..60000 ms after the
// queue's time, so neither memory order nor schedule order follows deadline order. Each
// population is set up once per (queue, N) and kept for the life of the process; set-up is never
// timed. Random choices in timed loops are loads from precomputed tables, not PRNG calls.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <time.h>
#include <type_traits>
#include <utility>
#include <vector>

#include <cogwheel/timer/heap.hpp>
#include <cogwheel/timer/node.hpp>
#include <cogwheel/timer/wheel.hpp>

#include "linked_wheel.hpp"
#include "striped_list_wheel.hpp"
#include "timer_idle_pattern.hpp"
#include "timer_workload.hpp"

namespace {

using namespace std::chrono_literals;
using cogwheel::timer::timer_heap;
using cogwheel::timer::timer_node;
using cogwheel::timer::timer_wheel;
using cogwheel_bench::linked_node;
using cogwheel_bench::linked_wheel;
using cogwheel_bench::striped_list_wheel;
using cogwheel_bench::striped_node;
using cogwheel_bench::striped_node24;
using time_point = cogwheel::timer::clock::time_point;
using duration = cogwheel::timer::clock::duration;
using namespace timer_workload;

// The queues' time at set-up: ~11.6 days of uptime, so level spans are not aligned to it.
constexpr time_point start_time{std::chrono::milliseconds(1'000'000'000)};
const std::vector<std::int64_t> pending_counts{1'000, 10'000, 100'000, 1'000'000, 10'000'000};

// The node type each queue links.
template <class Queue>
struct node_of {
  using type = timer_node;
};
template <>
struct node_of<linked_wheel> {
  using type = linked_node;
};
template <unsigned K, class Node, bool Lazy>
struct node_of<striped_list_wheel<K, Node, Lazy>> {
  using type = Node;
};

// What a timer's owner looks like to the queue: a node and the deadline it was given.
template <class Node>
struct alignas(32) bench_timer {
  Node node;
  time_point deadline{};
};
static_assert(sizeof(bench_timer<timer_node>) == 32, "two bench_timers per cache line");
static_assert(sizeof(bench_timer<linked_node>) == 32, "the reference gets the same layout");

// N nodes and one queue. Deadlines and the schedule order depend only on N, so the wheel and
// the heap get identical work.
template <class Queue>
struct population {
  using timer = bench_timer<typename node_of<Queue>::type>;

  explicit population(std::size_t n)
      : size(n), nodes(new timer[n]), rng{0x5eed0000 + n}, order(shuffled_order(n, rng)) {}

  // Precondition: no node is scheduled. Schedules all N in shuffled order, each at a deadline
  // 1..spread_ms after the queue's time.
  void schedule_all() {
    const time_point now = queue.now();
    for (const std::uint32_t i : order) {
      timer& t = nodes[i];
      t.deadline = now + std::chrono::milliseconds(1 + rng.below(spread_ms));
      queue.schedule(t.node, t.deadline);
    }
  }

  void cancel_all() {
    for (const std::uint32_t i : order) queue.cancel(nodes[i].node);
  }

  std::size_t size;
  std::unique_ptr<timer[]> nodes;
  splitmix64 rng;                    // declared before order, which is drawn from it
  std::vector<std::uint32_t> order;  // a random permutation of 0..N-1: the schedule order
  timer spare;                       // schedule_cancel's fresh timer, never one of the N
  // Declared after every node, so destroyed first: its destructor leaves the nodes idle.
  Queue queue{1ms, start_time};
  std::size_t cursor = 0;            // the next entry of draws() to use
  std::uint64_t bumps_left = bumps_per_node * size;
};

// The N pending timers of one queue kind, scheduled on first use and kept (churn,
// schedule_cancel, reschedule_later and next_deadline share them; none changes N).
template <class Queue>
population<Queue>& pending(std::size_t n) {
  static std::map<std::size_t, std::unique_ptr<population<Queue>>> cache;
  auto& p = cache[n];
  if (!p) {
    p = std::make_unique<population<Queue>>(n);
    p->schedule_all();
  }
  return *p;
}

// expire's own nodes and queue (idle between iterations): reusing the queue keeps the slot and
// heap capacity of earlier rounds, as a long-running loop would.
template <class Queue>
population<Queue>& expiry_bed(std::size_t n) {
  static std::map<std::size_t, std::unique_ptr<population<Queue>>> cache;
  auto& p = cache[n];
  if (!p) p = std::make_unique<population<Queue>>(n);
  return *p;
}

// Node plus the queue's share of its own memory, per pending timer (churn rows report it).
template <class Queue>
void report_bytes(benchmark::State& state, const population<Queue>& p) {
  state.counters["bytes_per_timer"] =
      static_cast<double>(sizeof(typename node_of<Queue>::type)) +
      static_cast<double>(p.queue.memory_bytes()) / static_cast<double>(p.size);
}

template <class Queue>
void check_size(benchmark::State& state, const population<Queue>& p) {
  if (p.queue.size() != p.size) state.SkipWithError("the queue lost or gained timers");
}

// Cancel a random pending timer and schedule it again 1..60000 ms ahead. N stays constant.
// With `hot`, the node was just touched (its coroutine frame was resumed by a completion, so it
// is in cache): it is prefetched for writing hot_distance iterations ahead, and only the
// queue's own structures (slot entries, list neighbours, heap array) can be cold.
template <class Queue, bool hot>
void churn_loop(benchmark::State& state, std::size_t n) {
  constexpr std::size_t hot_distance = 16;
  population<Queue>& p = pending<Queue>(n);
  const draw_table& d = draws();
  auto* const nodes = p.nodes.get();
  Queue& q = p.queue;
  const time_point now = q.now();
  std::size_t j = p.cursor;
  for (auto _ : state) {
    if constexpr (hot)
      __builtin_prefetch(&nodes[node_index(d.pick[(j + hot_distance) & draw_table::mask], n)], 1);
    auto& t = nodes[node_index(d.pick[j], n)];
    q.cancel(t.node);
    t.deadline = now + d.delay[j];
    q.schedule(t.node, t.deadline);
    j = (j + 1) & draw_table::mask;
  }
  p.cursor = j;
  state.SetItemsProcessed(state.iterations());
  if constexpr (!hot) report_bytes(state, p);
  check_size(state, p);
}

template <class Queue>
void churn(benchmark::State& state, std::size_t n) {
  churn_loop<Queue, false>(state, n);
}

template <class Queue>
void churn_hot(benchmark::State& state, std::size_t n) {
  churn_loop<Queue, true>(state, n);
}

// Schedule one more timer (a spare node, hot in cache as a just-created awaiter would be) at a
// random deadline among the N, and cancel it at once: the timeout that is not needed.
template <class Queue>
void schedule_cancel(benchmark::State& state, std::size_t n) {
  population<Queue>& p = pending<Queue>(n);
  const draw_table& d = draws();
  Queue& q = p.queue;
  auto& fresh = p.spare.node;
  const time_point now = q.now();
  std::size_t j = p.cursor;
  for (auto _ : state) {
    q.schedule(fresh, now + d.delay[j]);
    q.cancel(fresh);
    j = (j + 1) & draw_table::mask;
  }
  p.cursor = j;
  state.SetItemsProcessed(state.iterations());
  check_size(state, p);
}

// Push a random pending timer's deadline 1..1000 ms later: the idle timeout of a connection that
// just saw traffic. Every bumps_per_node * N pushes, all deadlines are re-drawn (untimed).
template <class Queue>
void reschedule_later(benchmark::State& state, std::size_t n) {
  population<Queue>& p = pending<Queue>(n);
  const draw_table& d = draws();
  auto* const nodes = p.nodes.get();
  Queue& q = p.queue;
  std::size_t j = p.cursor;
  std::uint64_t bumps_left = p.bumps_left;
  for (auto _ : state) {
    if (bumps_left == 0) [[unlikely]] {
      state.PauseTiming();
      p.cancel_all();
      p.schedule_all();
      bumps_left = bumps_per_node * n;
      state.ResumeTiming();
    }
    --bumps_left;
    auto& t = nodes[node_index(d.pick[j], n)];
    t.deadline += d.bump[j];
    q.reschedule(t.node, t.deadline);
    j = (j + 1) & draw_table::mask;
  }
  p.cursor = j;
  p.bumps_left = bumps_left;
  state.SetItemsProcessed(state.iterations());
  check_size(state, p);
}

// Ask for the earliest deadline, as an event loop does before every sleep.
template <class Queue>
void next_deadline(benchmark::State& state, std::size_t n) {
  population<Queue>& p = pending<Queue>(n);
  const Queue& q = p.queue;
  for (auto _ : state) benchmark::DoNotOptimize(q.next_deadline());
  state.SetItemsProcessed(state.iterations());
  check_size(state, p);
}

// CPU time of the calling thread: unlike wall time, it does not count time spent descheduled.
double thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Schedule N timers (untimed), then advance 1 ms at a time until every one has fired. One
// iteration is one such round; ns_per_timer is the CPU time of the advance loop (as the CPU
// column) divided by the timers fired.
template <class Queue>
void expire(benchmark::State& state, std::size_t n) {
  population<Queue>& p = expiry_bed<Queue>(n);
  Queue& q = p.queue;
  double timed_ns = 0;
  std::uint64_t fired = 0;
  for (auto _ : state) {
    state.PauseTiming();
    p.schedule_all();
    state.ResumeTiming();
    const double begin = thread_cpu_ns();
    time_point now = q.now();
    std::uint64_t round = 0;
    while (!q.empty()) {
      now += 1ms;
      round += q.advance(now);
    }
    timed_ns += thread_cpu_ns() - begin;
    fired += round;
  }
  if (fired != n * state.iterations()) state.SkipWithError("not every timer fired exactly once");
  state.SetItemsProcessed(static_cast<std::int64_t>(fired));
  state.counters["ns_per_timer"] = fired == 0 ? 0.0 : timed_ns / static_cast<double>(fired);
}

// One advance() by one tick with nothing due, as an event loop's iteration that finds no timer
// expired: one timer pending ~10 years ahead (no slot of it comes due during any run).
template <class Queue>
void advance_empty(benchmark::State& state, std::size_t) {
  population<Queue>& p = expiry_bed<Queue>(1);
  Queue& q = p.queue;
  if (p.nodes[0].node.scheduled()) q.cancel(p.nodes[0].node);
  time_point now = q.now();
  q.schedule(p.nodes[0].node, now + std::chrono::hours(24 * 3650));
  for (auto _ : state) {
    now += 1ms;
    benchmark::DoNotOptimize(q.advance(now));
  }
  q.cancel(p.nodes[0].node);
  state.SetItemsProcessed(state.iterations());
}

// N idle connections, each with a 30 s idle deadline that a heartbeat pushes to now + 30 s once
// a second (in a fixed random order, N / 1000 heartbeats per 1 ms step), the queue advanced 1 ms
// at a time for 60 s. First deadlines either spread over (1 s, 30 s] or all at 30 s (connections
// that started together). Nothing ever fires; advance() only re-files pushed-back deadlines.
//
// The workload is deterministic, so it is run `runs` times on fresh queues and each step keeps
// the shortest of its times: a preemption or a host hiccup on this shared VM lands on one run,
// not on the same step of all three, while a stall the queue causes shows in every run. Reports
// the p99.9 and the longest single advance() (wall time of that call alone, after that filter),
// the mean advance() and the mean heartbeat. The iteration's reported time is the sum of the
// advance() calls of one run.
template <class Queue>
void advance_max(benchmark::State& state, std::size_t n, bool together) {
  using timer = bench_timer<typename node_of<Queue>::type>;
  using wall = std::chrono::steady_clock;
  constexpr std::size_t runs = 3;
  constexpr std::size_t steps = 60'000;
  constexpr std::size_t beats_per_period = 1'000;  // steps between two heartbeats of one node
  constexpr duration idle = 30s;
  std::vector<double> advance_ns(steps, 1e18);
  double beat_ns = 0;
  double total_ns = 0;
  std::uint64_t fired = 0;
  for (auto _ : state) {
    for (std::size_t run = 0; run < runs; ++run) {
      auto nodes = std::make_unique<timer[]>(n);
      auto q = std::make_unique<Queue>(1ms, start_time);
      splitmix64 rng{0x1d1e0000 + n};
      std::vector<std::uint32_t> order(n);
      std::iota(order.begin(), order.end(), std::uint32_t{0});
      for (std::size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
      time_point now = q->now();
      for (const std::uint32_t i : order) {
        nodes[i].deadline =
            together ? now + idle : now + idle - std::chrono::milliseconds(rng.below(29'000));
        q->schedule(nodes[i].node, nodes[i].deadline);
      }
      total_ns = 0;
      std::size_t cursor = 0;
      for (std::size_t step = 0; step < steps; ++step) {
        now += 1ms;
        const std::size_t end = (step % beats_per_period + 1) * n / beats_per_period;
        const auto b0 = wall::now();
        for (; cursor < end; ++cursor) {
          timer& t = nodes[order[cursor]];
          t.deadline = now + idle;
          q->reschedule(t.node, t.deadline);
        }
        if (cursor == n) cursor = 0;
        const auto b1 = wall::now();
        fired += q->advance(now);
        const auto b2 = wall::now();
        beat_ns += std::chrono::duration<double, std::nano>(b1 - b0).count();
        const double ns = std::chrono::duration<double, std::nano>(b2 - b1).count();
        advance_ns[step] = std::min(advance_ns[step], ns);
        total_ns += ns;
      }
      for (std::size_t i = 0; i < n; ++i) q->cancel(nodes[i].node);
    }
    state.SetIterationTime(total_ns * 1e-9);
  }
  if (fired != 0) state.SkipWithError("an idle deadline fired");
  double sum = 0;
  for (const double v : advance_ns) sum += v;
  std::sort(advance_ns.begin(), advance_ns.end());
  state.counters["p999_us"] = advance_ns[steps * 999 / 1000] * 1e-3;
  state.counters["max_us"] = advance_ns.back() * 1e-3;
  state.counters["mean_advance_ns"] = sum / steps;
  state.counters["heartbeat_ns"] =
      beat_ns / static_cast<double>(state.iterations() * runs * (steps / beats_per_period) * n);
}

// The idle-connection pattern (timer_idle_pattern.hpp), `runs` runs on fresh queues, first
// touch included. Counters: max_us, the median over the runs of each run's longest advance()
// (thread CPU time), with max_us_lo/hi the least and greatest run; max_filtered_us, the longest
// step after each step keeps its least CPU time over the runs, and max_step, that step (ms after
// the start); mean_advance_ns, the mean over steps of each step's least wall time;
// heartbeat_ns, the mean reschedule; moved_per_advance, the nodes the wheel re-filed (cascaded
// or visited) per advance(), 0 for the other queues. The iteration time is the sum of the
// filtered wall times (one run's advance() calls).
template <class Queue>
void idle_max(benchmark::State& state, std::size_t n) {
  constexpr std::size_t runs = 5;
  idle_pattern_result r;
  for (auto _ : state) {
    for (std::size_t run = 0; run < runs; ++run)
      run_idle_pattern<Queue, bench_timer<typename node_of<Queue>::type>>(
          n, start_time,
          [](const Queue& q) -> std::uint64_t {
            if constexpr (std::is_same_v<Queue, timer_wheel>)
              return q.moved();
            else
              return 0;
          },
          r);
    double wall_sum = 0;
    for (const double v : r.step_wall_ns) wall_sum += v;
    state.SetIterationTime(wall_sum * 1e-9);
  }
  if (r.fired != 0) state.SkipWithError("an idle deadline fired");
  const auto worst = std::max_element(r.step_cpu_ns.begin(), r.step_cpu_ns.end());
  double wall_sum = 0;
  for (const double v : r.step_wall_ns) wall_sum += v;
  state.counters["max_us"] = median_of(r.run_max_cpu_ns) * 1e-3;
  state.counters["max_us_lo"] = *std::min_element(r.run_max_cpu_ns.begin(), r.run_max_cpu_ns.end()) * 1e-3;
  state.counters["max_us_hi"] = *std::max_element(r.run_max_cpu_ns.begin(), r.run_max_cpu_ns.end()) * 1e-3;
  state.counters["max_filtered_us"] = *worst * 1e-3;
  state.counters["max_step"] = static_cast<double>(worst - r.step_cpu_ns.begin() + 1);
  state.counters["mean_advance_ns"] = wall_sum / idle_steps;
  state.counters["heartbeat_ns"] = r.heartbeat_ns / static_cast<double>(r.beats);
  state.counters["moved_per_advance"] = static_cast<double>(r.moved) / (runs * idle_steps);
}

// The memory floor of the random-node workloads: read-modify-write the deadline of a random node
// of an N-node array laid out as the queues' (expire's idle nodes), with no queue at all.
void node_touch(benchmark::State& state, std::size_t n) {
  population<timer_wheel>& p = expiry_bed<timer_wheel>(n);
  const draw_table& d = draws();
  auto* const nodes = p.nodes.get();
  std::size_t j = p.cursor;
  for (auto _ : state) {
    nodes[node_index(d.pick[j], n)].deadline += d.bump[j];
    j = (j + 1) & draw_table::mask;
  }
  p.cursor = j;
  state.SetItemsProcessed(state.iterations());
}

using workload = void (*)(benchmark::State&, std::size_t);
using max_workload = void (*)(benchmark::State&, std::size_t, bool);

void add(const char* op, const char* kind, workload fn, benchmark::TimeUnit unit) {
  const std::string name = std::string(op) + "/" + kind;
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& state) {
    fn(state, static_cast<std::size_t>(state.range(0)));
  });
  for (const std::int64_t n : pending_counts) b->Arg(n);
  b->Unit(unit);
}

// advance_max/<queue>/<N>/<spread|together>: one iteration each (three simulated minutes).
void add_max(const char* kind, max_workload fn) {
  for (const bool together : {false, true})
    for (const std::int64_t n : {100'000, 1'000'000}) {
      const std::string name = std::string("advance_max/") + kind + "/" + std::to_string(n) +
                               (together ? "/together" : "/spread");
      benchmark::RegisterBenchmark(name.c_str(),
                                   [fn, n, together](benchmark::State& state) {
                                     fn(state, static_cast<std::size_t>(n), together);
                                   })
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
}

// Each operation on the wheel, the heap and the linked reference, N ascending: registration
// order is run order. With COGWHEEL_BENCH_STRIPED set in the environment, the striped-list probe
// joins (bench/striped_list_wheel.hpp; docs/timer.md, "Probe: striped list slots"): striped4,
// striped8 and striped16 (K stripes per slot, 32-byte node), striped8s (24-byte node, so the
// bench struct is 32 bytes as the others', not 64), striped8l (occupancy bits cleared lazily,
// no branch on a neighbour) and striped8sl (both). Off by default: a probe, not a reference, and
// its 1e7 populations take another ~1.3 GB each.
#define COGWHEEL_ADD_WORKLOAD(op, unit)                                                     \
  do {                                                                                      \
    add(#op, "wheel", &op<timer_wheel>, unit);                                              \
    add(#op, "heap", &op<timer_heap>, unit);                                                \
    add(#op, "linked", &op<linked_wheel>, unit);                                            \
    if (striped_variants) {                                                                 \
      add(#op, "striped4", &op<striped_list_wheel<4>>, unit);                               \
      add(#op, "striped8", &op<striped_list_wheel<8>>, unit);                               \
      add(#op, "striped16", &op<striped_list_wheel<16>>, unit);                             \
      add(#op, "striped8s", &op<striped_list_wheel<8, striped_node24>>, unit);              \
      add(#op, "striped8l", &op<striped_list_wheel<8, striped_node, true>>, unit);          \
      add(#op, "striped8sl", &op<striped_list_wheel<8, striped_node24, true>>, unit);       \
    }                                                                                       \
  } while (false)

void register_all() {
  const bool striped_variants = std::getenv("COGWHEEL_BENCH_STRIPED") != nullptr;
  COGWHEEL_ADD_WORKLOAD(churn, benchmark::kNanosecond);
  COGWHEEL_ADD_WORKLOAD(churn_hot, benchmark::kNanosecond);
  COGWHEEL_ADD_WORKLOAD(schedule_cancel, benchmark::kNanosecond);
  COGWHEEL_ADD_WORKLOAD(reschedule_later, benchmark::kNanosecond);
  COGWHEEL_ADD_WORKLOAD(expire, benchmark::kMillisecond);
  COGWHEEL_ADD_WORKLOAD(next_deadline, benchmark::kNanosecond);
  for (const char* kind : {"wheel", "heap", "linked"}) {
    const std::string name = std::string("advance_empty/") + kind + "/1";
    workload fn = kind[0] == 'w' ? &advance_empty<timer_wheel>
                  : kind[0] == 'h' ? &advance_empty<timer_heap>
                                   : &advance_empty<linked_wheel>;
    benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& state) { fn(state, 1); });
  }
  add_max("wheel", &advance_max<timer_wheel>);
  add_max("heap", &advance_max<timer_heap>);
  add_max("linked", &advance_max<linked_wheel>);
  for (const char* kind : {"wheel", "heap", "linked"}) {
    const std::string name = std::string("idle_max/") + kind + "/1000000";
    workload fn = kind[0] == 'w' ? &idle_max<timer_wheel>
                  : kind[0] == 'h' ? &idle_max<timer_heap>
                                   : &idle_max<linked_wheel>;
    benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& state) { fn(state, 1'000'000); })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  add("node_touch", "floor", &node_touch, benchmark::kNanosecond);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cogwheel_timer_tick", "1 ms");
  benchmark::AddCustomContext(
      "cogwheel_nodes",
      "array of 32-byte structs (timer_node + deadline), scheduled in shuffled order, "
      "deadlines uniform in 1..60000 ms");
#ifdef __clang__
  benchmark::AddCustomContext("cogwheel_compiler", __VERSION__);
#else
  benchmark::AddCustomContext("cogwheel_compiler", "g++ " __VERSION__);
#endif
#ifdef NDEBUG
  benchmark::AddCustomContext("cogwheel_asserts", "off (NDEBUG)");
#else
  benchmark::AddCustomContext("cogwheel_asserts", "ON: not a release build, numbers are slow");
#endif
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
