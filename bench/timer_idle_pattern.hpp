// The idle-connection pattern, as a server with N idle connections drives its timer queue:
//
//   - N deadlines of 30 s, first scheduled uniformly over the next 30 s after the first second
//     (1001..30000 ms ahead: no deadline comes before its connection's first heartbeat);
//   - every connection heartbeats once a second at its own uniform random phase (0..999 ms),
//     each heartbeat pushing its deadline to now + 30 s (reschedule);
//   - advance() every 1 ms for 60 s. Nothing ever fires.
//
// Each run builds a fresh queue and fresh nodes and gives the freed memory back to the system
// afterwards (malloc_trim), so every run pays the first touch of the memory the queue grows
// into, as a server that has just taken on its connections does. Each advance() is timed alone
// in thread CPU time (page faults included, preemption excluded) and in wall time.
//
// Standard library and glibc only: timer_bench runs it on the wheel, the heap and the linked
// reference.
#pragma once

#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "timer_workload.hpp"

namespace timer_workload {

constexpr std::size_t idle_steps = 60'000;

// What runs of the pattern measured. The per-step arrays keep, for each step, the least time
// over the runs so far: a preemption or a host hiccup on a shared machine lands on one run's
// step, while a stall the queue causes is in every run (the runs are identical, first touch
// included).
struct idle_pattern_result {
  std::vector<double> run_max_cpu_ns;                // each run's longest advance(), CPU time
  std::vector<double> step_cpu_ns = std::vector<double>(idle_steps, 1e18);   // CPU time
  std::vector<double> step_wall_ns = std::vector<double>(idle_steps, 1e18);  // wall time
  double heartbeat_ns = 0;  // mean wall time of one heartbeat (reschedule), over all runs
  std::uint64_t beats = 0;
  std::uint64_t fired = 0;
  std::uint64_t moved = 0;  // nodes the queue re-filed during the timed steps (where it counts)
};

inline double idle_thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// The heartbeat phases of n connections, as the connections of each 1 ms phase: drawn from a
// fixed seed, so every queue sees the same heartbeats.
inline std::vector<std::vector<std::uint32_t>> idle_phases(std::size_t n, std::uint64_t seed) {
  splitmix64 rng{seed};
  std::vector<std::vector<std::uint32_t>> by_phase(1000);
  std::vector<std::uint32_t> order = shuffled_order(n, rng);
  for (const std::uint32_t i : order) by_phase[rng.below(1000)].push_back(i);
  return by_phase;
}

// One run of the pattern on a fresh Queue whose nodes are Timer (a struct with `node` and
// `deadline`, as timer_bench's bench_timer), added to `out`. moved_of(queue) reads the queue's
// count of re-filed nodes (0 where it has none). Each advance() is timed twice: wall time
// (steady_clock, tens of ns to read) inside thread CPU time (a system call here, ~1-2 us).
template <class Queue, class Timer, class Start, class MovedOf>
void run_idle_pattern(std::size_t n, Start start, MovedOf moved_of, idle_pattern_result& out) {
  using namespace std::chrono_literals;
  using wall = std::chrono::steady_clock;
  constexpr auto idle = 30s;
  const auto by_phase = idle_phases(n, 0x1d1e0000 + n);
  double run_max = 0;
  double beat_total = 0;
  {
    auto nodes = std::make_unique<Timer[]>(n);
    auto q = std::make_unique<Queue>(1ms, start);
    splitmix64 rng{0xf125700 + n};
    auto now = q->now();
    for (const std::uint32_t i : shuffled_order(n, rng)) {
      nodes[i].deadline = now + std::chrono::milliseconds(1'001 + rng.below(29'000));
      q->schedule(nodes[i].node, nodes[i].deadline);
    }
    const std::uint64_t moved0 = moved_of(*q);
    for (std::size_t step = 0; step < idle_steps; ++step) {
      now += 1ms;
      const auto& beat = by_phase[step % 1000];
      const auto b0 = wall::now();
      for (const std::uint32_t i : beat) {
        nodes[i].deadline = now + idle;
        q->reschedule(nodes[i].node, nodes[i].deadline);
      }
      const double c0 = idle_thread_cpu_ns();
      const auto w0 = wall::now();
      out.fired += q->advance(now);
      const auto w1 = wall::now();
      const double cpu = idle_thread_cpu_ns() - c0;
      beat_total += std::chrono::duration<double, std::nano>(w0 - b0).count();
      out.beats += beat.size();
      const double wall_ns = std::chrono::duration<double, std::nano>(w1 - w0).count();
      out.step_cpu_ns[step] = std::min(out.step_cpu_ns[step], cpu);
      out.step_wall_ns[step] = std::min(out.step_wall_ns[step], wall_ns);
      run_max = std::max(run_max, cpu);
    }
    out.moved += moved_of(*q) - moved0;
    for (std::size_t i = 0; i < n; ++i) q->cancel(nodes[i].node);
  }
  malloc_trim(0);  // the next run's queue grows into untouched pages again
  out.run_max_cpu_ns.push_back(run_max);
  out.heartbeat_ns += beat_total;
}

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace timer_workload
