// idle_bench: the idle-connection scenario without sockets (examples/idle_simulation.hpp, the
// demo's last phase): N simulated connections heartbeating every 0.5..1.5 s, each pushing its
// 3 s idle deadline forward; 10% go silent and are kicked. 15 s of virtual time on the paused
// clock, so the whole measurement is CPU; wheel and heap in one run.
//
// Names: idle/<kind>/<N>. Counters:
//   timer_pct   timer work as a share of the loop thread's CPU time: time inside the queue's
//               advance() plus time inside deadline::reset(), calibrated as the header says.
//   advance_pct, reset_pct   the two parts of timer_pct. reset_pct is the less certain one: a
//               reset takes a few ns, the two clock reads around it tens of ns.
//   clock_pair_ns, clock_loop_ns   an empty pair of clock reads where the resets run (the
//               calibration subtracted), and one clock read in a tight loop
//   cpu_ns_per_heartbeat   loop thread CPU per heartbeat handled (everything)
//   timer_ns_per_heartbeat timer work (as timer_pct) per heartbeat handled
//   kicked, silent, wrongly_kicked (must be 0)
//
// Built with -DCOGWHEEL_TIMER_COVERAGE (CMAKE_CXX_FLAGS, a build of its own: the library must be
// compiled with it too), it also reports what the wheel did per heartbeat over the measured 15 s:
// visit_{entries,nodes,moves}_per_hb, sample_nodes_per_hb, due_nodes_per_hb,
// cascade_moves_per_hb, filed_per_hb, visit_restarts (timer/detail/wheel_coverage.hpp).
//
// miss_floor/N: the floor of timer work per heartbeat, in the same run: read-modify-write one
// field of a random node among N 32-byte nodes (a cache and TLB miss at 1e6), per touch.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <cogwheel/cogwheel.hpp>
#ifdef COGWHEEL_TIMER_COVERAGE
#include <cogwheel/timer/detail/wheel_coverage.hpp>
#endif

#include "../examples/idle_simulation.hpp"

using namespace cogwheel;
using namespace std::chrono_literals;

namespace {

std::uint64_t clock_read_cost_ns() {
  const int n = 100000;
  const auto t0 = clock::now();
  for (int i = 0; i < n; ++i) benchmark::DoNotOptimize(clock::now());
  return static_cast<std::uint64_t>(std::chrono::nanoseconds(clock::now() - t0).count() / n);
}

// The in-place floor: the cost of touching one random node of the run's own (its connections'
// deadlines where they live, in their coroutine frames), timed the same way as miss_floor (a
// read-modify-write of the node's first word, which writes back what it read, in a precomputed
// random order) in thread CPU time, while the connections are still alive. miss_floor packs its
// nodes 32 bytes apart (32 MB at 1e6, about this machine's L3); the wheel's nodes are spread
// over the frames, and a touch of one of those is what a re-file pays.
double in_place_floor_ns(const std::vector<deadline*>& nodes) {
  std::vector<volatile std::uint64_t*> live;
  for (deadline* d : nodes)
    if (d != nullptr) live.push_back(reinterpret_cast<volatile std::uint64_t*>(d));
  if (live.empty()) return 0.0;
  std::vector<volatile std::uint64_t*> pick(std::size_t{1} << 20);
  std::minstd_rand rng(11);
  for (auto& p : pick) p = live[rng() % live.size()];
  constexpr int rounds = 4;
  const double cpu0 = examples::sim::thread_cpu_seconds();
  for (int r = 0; r < rounds; ++r)
    for (volatile std::uint64_t* p : pick) *p = *p;
  return (examples::sim::thread_cpu_seconds() - cpu0) * 1e9 / (static_cast<double>(rounds) * static_cast<double>(pick.size()));
}

void bm_idle(benchmark::State& state, timer_kind kind) {
  const auto n = static_cast<long>(state.range(0));
  const std::uint64_t clock_ns = clock_read_cost_ns();
  for (auto _ : state) {
    double floor_ns = 0;
#ifdef COGWHEEL_TIMER_COVERAGE
    timer::detail::wheel_coverage window;  // the wheel's paths over the measured 15 s
#endif
    examples::idle_simulation_hooks hooks;
#ifdef COGWHEEL_TIMER_COVERAGE
    hooks.window_begins = [] { timer::detail::coverage() = {}; };
#endif
    hooks.window_ends = [&](const std::vector<deadline*>& nodes) {
#ifdef COGWHEEL_TIMER_COVERAGE
      window = timer::detail::coverage();
#endif
      floor_ns = in_place_floor_ns(nodes);
    };
    const examples::idle_simulation_result r = examples::simulate_idle_connections(n, kind, 15s, hooks);
    const double cpu = r.loop_cpu_s;
    const double timer_s = r.timer_ns() * 1e-9;
    const double hb = static_cast<double>(r.heartbeats);
    state.SetIterationTime(cpu);
    state.counters["timer_pct"] = 100.0 * timer_s / cpu;
    state.counters["advance_pct"] = 100.0 * r.advance_ns * 1e-9 / cpu;
    state.counters["reset_pct"] = 100.0 * r.reset_ns * 1e-9 / cpu;
    state.counters["cpu_ns_per_heartbeat"] = cpu * 1e9 / hb;
    state.counters["timer_ns_per_heartbeat"] = timer_s * 1e9 / hb;
    state.counters["clock_pair_ns"] = r.clock_pair_ns;
    state.counters["clock_loop_ns"] = static_cast<double>(clock_ns);
    state.counters["in_place_floor_ns"] = floor_ns;
    state.counters["timer_per_floor"] = floor_ns > 0 ? timer_s * 1e9 / hb / floor_ns : 0.0;
    state.counters["kicked"] = static_cast<double>(r.kicked);
    state.counters["silent"] = static_cast<double>(r.silent);
    state.counters["wrongly_kicked"] = static_cast<double>(r.wrongly_kicked);
#ifdef COGWHEEL_TIMER_COVERAGE
    {
      const timer::detail::wheel_coverage& c = window;
      state.counters["visit_entries_per_hb"] = static_cast<double>(c.visit_entries) / hb;
      state.counters["visit_nodes_per_hb"] = static_cast<double>(c.visit_nodes) / hb;
      state.counters["visit_moves_per_hb"] = static_cast<double>(c.visit_moves) / hb;
      state.counters["sample_nodes_per_hb"] = static_cast<double>(c.sample_nodes) / hb;
      state.counters["due_nodes_per_hb"] = static_cast<double>(c.due_nodes) / hb;
      state.counters["cascade_moves_per_hb"] = static_cast<double>(c.cascade_moves) / hb;
      state.counters["visit_restarts"] = static_cast<double>(c.visit_restarts);
      long filed = 0;
      for (auto f : c.filed) filed += static_cast<long>(f);
      state.counters["filed_per_hb"] = static_cast<double>(filed) / hb;
    }
#endif
  }
}

// The miss floor: one random 32-byte node among n touched (its first word incremented); the
// indices come from a precomputed table read in order, so only the node's miss is timed.
void bm_miss_floor(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  struct alignas(32) node {
    std::uint64_t word[4] = {};
  };
  std::vector<node> nodes(n);
  std::vector<std::uint32_t> pick(std::size_t{1} << 20);
  std::minstd_rand rng(11);
  for (auto& p : pick) p = static_cast<std::uint32_t>(rng() % n);
  std::size_t j = 0;
  for (auto _ : state) {
    ++nodes[pick[j]].word[0];
    j = (j + 1) & (pick.size() - 1);
  }
  benchmark::DoNotOptimize(nodes.data());
  state.SetItemsProcessed(state.iterations());
}

void register_all() {
  benchmark::RegisterBenchmark("miss_floor", bm_miss_floor)->Arg(1000000);
  for (auto [name, kind] : {std::pair{"idle/wheel", timer_kind::wheel}, std::pair{"idle/heap", timer_kind::heap}})
    benchmark::RegisterBenchmark(name, bm_idle, kind)
        ->Arg(100000)
        ->Arg(1000000)
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
