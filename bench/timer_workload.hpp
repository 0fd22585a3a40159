// The inputs of the timer workloads (constants, seeds, draw tables), shared by bench/timer_bench.cpp
// and the peers of bench/peers/, so a row op/asio/N there and op/wheel/N here did the same work.
// Standard library only: the peers stay optional and the library's benchmark depends on nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace timer_workload {

using std::chrono::milliseconds;

constexpr std::uint64_t spread_ms = 60'000;   // pending deadlines are 1..spread_ms ahead
constexpr std::uint64_t max_bump_ms = 1'000;  // reschedule_later pushes a deadline 1..1000 ms
// reschedule_later re-draws every deadline (untimed) after bumps_per_node * N pushes, so the
// mean push stays below 32 * 0.5 s = 16 s and deadlines never run away from the 60 s spread.
constexpr std::uint64_t bumps_per_node = 32;

// A small, fast PRNG with fixed seeds, so every run (and every peer) sees the same workload.
struct splitmix64 {
  std::uint64_t state;

  std::uint64_t operator()() noexcept {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) for n < 2^32 (multiply-shift on the top 32 bits).
  std::uint64_t below(std::uint64_t n) noexcept { return (((*this)() >> 32) * n) >> 32; }
};

// The random inputs of the timed loops: a cycle of 2^20 draws, read sequentially (prefetched),
// shared by every benchmark. pick maps to a timer index by multiply-shift: pick * N >> 32.
struct draw_table {
  static constexpr std::size_t count = std::size_t{1} << 20;
  static constexpr std::size_t mask = count - 1;
  std::vector<std::uint32_t> pick;
  std::vector<milliseconds> delay;  // 1..spread_ms
  std::vector<milliseconds> bump;   // 1..max_bump_ms
};

inline const draw_table& draws() {
  static const draw_table table = [] {
    draw_table t;
    splitmix64 rng{42};
    t.pick.resize(draw_table::count);
    t.delay.resize(draw_table::count);
    t.bump.resize(draw_table::count);
    for (std::size_t i = 0; i < draw_table::count; ++i) {
      t.pick[i] = static_cast<std::uint32_t>(rng() >> 32);
      t.delay[i] = milliseconds(1 + rng.below(spread_ms));
      t.bump[i] = milliseconds(1 + rng.below(max_bump_ms));
    }
    return t;
  }();
  return table;
}

inline std::size_t node_index(std::uint32_t pick, std::size_t n) noexcept {
  return static_cast<std::size_t>((std::uint64_t{pick} * n) >> 32);
}

// The schedule order of a population of n timers: a random permutation of 0..n-1, drawn from
// rng (seeded 0x5eed0000 + n, as timer_bench seeds it) so memory order is not deadline order.
inline std::vector<std::uint32_t> shuffled_order(std::size_t n, splitmix64& rng) {
  std::vector<std::uint32_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

}  // namespace timer_workload
