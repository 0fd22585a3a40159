// tick_divider and tick_scale against plain division: exact for every divisor and numerator,
// deadlines rounding up, current times rounding down, times before the epoch at tick 0, and
// tick starts saturating at time_point::max().
#include <cogwheel/timer/ticks.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace {

using namespace cogwheel::timer;
using namespace std::chrono_literals;

constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

static_assert(tick_divider(1).floor_div(u64_max) == u64_max);
static_assert(tick_divider(3).floor_div(10) == 3 && tick_divider(3).ceil_div(10) == 4);
static_assert(tick_divider(1000000).ceil_div(1) == 1 && tick_divider(1000000).ceil_div(0) == 0);
static_assert(tick_divider(u64_max).floor_div(u64_max) == 1);

std::uint64_t xorshift(std::uint64_t& x) {
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

void expect_exact(std::uint64_t d, std::uint64_t n) {
  const tick_divider div(d);
  EXPECT_EQ(div.floor_div(n), n / d) << n << " / " << d;
  EXPECT_EQ(div.ceil_div(n), n / d + (n % d != 0 ? 1 : 0)) << n << " / " << d;
}

std::vector<std::uint64_t> edge_divisors() {
  std::vector<std::uint64_t> ds = {1, 3, 7, 10, 1000, 100000, 1000000, 1000000007, 999999999989ull,
                                   u64_max, u64_max - 1, u64_max / 2, u64_max / 3};
  for (unsigned k = 0; k < 64; ++k) {
    const std::uint64_t p = std::uint64_t{1} << k;
    ds.push_back(p);
    ds.push_back(p + 1);
    if (p > 2) ds.push_back(p - 1);
  }
  return ds;
}

std::vector<std::uint64_t> edge_numerators(std::uint64_t d) {
  const std::uint64_t top = u64_max / d * d;  // the largest multiple of d
  std::vector<std::uint64_t> ns = {0, 1, 2, u64_max, u64_max - 1, top, top - 1, u64_max / 2, d - 1, d};
  if (d < u64_max) ns.insert(ns.end(), {d + 1, 2 * d - 1});
  if (d <= u64_max / 2) ns.push_back(2 * d);
  if (top >= d) ns.push_back(top - d + 1);
  // Around 2^63, where the divider switches from its one-multiply path to the reciprocal's.
  constexpr std::uint64_t half = std::uint64_t{1} << 63;
  const std::uint64_t below = (half - 1) / d * d;  // the largest multiple of d below 2^63
  ns.insert(ns.end(), {half - 2, half - 1, half, half + 1, below, below + 1});
  if (below >= 1) ns.push_back(below - 1);
  return ns;
}

TEST(tick_divider, floor_div_and_ceil_div_are_exact_at_edge_values) {
  for (const std::uint64_t d : edge_divisors())
    for (const std::uint64_t n : edge_numerators(d)) expect_exact(d, n);
}

TEST(tick_divider, floor_div_and_ceil_div_are_exact_for_random_values) {
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 1'000'000; ++i) {
    // Random widths, so small and large divisors and numerators all occur.
    const std::uint64_t d = xorshift(x) >> (xorshift(x) % 64) | 1u << (x % 2);
    const std::uint64_t n = xorshift(x) >> (xorshift(x) % 64);
    const tick_divider div(d);
    ASSERT_EQ(div.floor_div(n), n / d) << n << " / " << d;
    ASSERT_EQ(div.ceil_div(n), n / d + (n % d != 0 ? 1 : 0)) << n << " / " << d;
  }
  for (const std::uint64_t d : {1ull, 3ull, 1000ull, 100000ull, 1000000ull, 1ull << 20}) {
    const tick_divider div(d);
    for (int i = 0; i < 100'000; ++i) {
      const std::uint64_t n = xorshift(x);
      ASSERT_EQ(div.floor_div(n), n / d) << n << " / " << d;
      ASSERT_EQ(div.ceil_div(n), n / d + (n % d != 0 ? 1 : 0)) << n << " / " << d;
    }
  }
}

const clock::duration ticks[] = {1ns, 3ns, 1us, 100us, 1ms, 1ms + 1ns, 1s};

TEST(tick_scale, deadline_tick_rounds_up_and_now_tick_rounds_down) {
  for (const clock::duration tick : ticks) {
    const tick_scale scale(tick);
    const std::int64_t d = tick.count();
    for (const std::int64_t k : {std::int64_t{1}, std::int64_t{2}, std::int64_t{1000}, std::int64_t{123456789}}) {
      const clock::time_point boundary{clock::duration(k * d)};
      EXPECT_EQ(scale.deadline_tick(boundary), static_cast<tick_t>(k));
      EXPECT_EQ(scale.now_tick(boundary), static_cast<tick_t>(k));
      EXPECT_EQ(scale.time_of(static_cast<tick_t>(k)), boundary);
      if (d > 1) {
        EXPECT_EQ(scale.deadline_tick(boundary + 1ns), static_cast<tick_t>(k + 1));
        EXPECT_EQ(scale.now_tick(boundary + 1ns), static_cast<tick_t>(k));
        EXPECT_EQ(scale.deadline_tick(boundary - 1ns), static_cast<tick_t>(k));
        EXPECT_EQ(scale.now_tick(boundary - 1ns), static_cast<tick_t>(k - 1));
      }
    }
  }
}

TEST(tick_scale, a_deadline_tick_starts_at_or_after_the_deadline_and_a_now_tick_at_or_before_now) {
  std::uint64_t x = 0x2545f4914f6cdd1dull;
  for (const clock::duration tick : ticks) {
    const tick_scale scale(tick);
    for (int i = 0; i < 100'000; ++i) {
      const clock::time_point t{clock::duration(static_cast<std::int64_t>(xorshift(x) >> (1 + x % 63)))};
      const clock::time_point up = scale.time_of(scale.deadline_tick(t));
      const clock::time_point down = scale.time_of(scale.now_tick(t));
      ASSERT_GE(up, t);
      ASSERT_LE(down, t);
      ASSERT_LT(t - down, tick);
      if (up != clock::time_point::max()) {
        ASSERT_LT(up - t, tick);
      }
    }
  }
}

TEST(tick_scale, times_before_the_epoch_map_to_tick_zero) {
  for (const clock::duration tick : ticks) {
    const tick_scale scale(tick);
    for (const clock::time_point t : {clock::time_point::min(), clock::time_point(-1ns),
                                      clock::time_point(-1h), clock::time_point{}}) {
      EXPECT_EQ(scale.deadline_tick(t), 0u);
      EXPECT_EQ(scale.now_tick(t), 0u);
    }
    EXPECT_EQ(scale.time_of(0), clock::time_point{});
  }
}

TEST(tick_scale, time_of_saturates_at_time_point_max) {
  constexpr auto max = clock::time_point::max();
  for (const clock::duration tick : ticks) {
    const tick_scale scale(tick);
    const tick_t last = scale.now_tick(max);  // the last tick that starts within the clock
    EXPECT_LE(scale.time_of(last), max);
    EXPECT_GT(scale.time_of(last), max - tick);
    EXPECT_EQ(scale.time_of(scale.deadline_tick(max)), max);
    EXPECT_EQ(scale.time_of(last + 1), max);
    EXPECT_EQ(scale.time_of(std::numeric_limits<tick_t>::max()), max);
  }
  const tick_scale ns(1ns);
  EXPECT_EQ(ns.deadline_tick(max), static_cast<tick_t>(max.time_since_epoch().count()));
  EXPECT_EQ(ns.time_of(ns.now_tick(max)), max);
}

TEST(tick_scale, a_non_positive_tick_is_rejected) {
  EXPECT_THROW(tick_scale(0ns), std::invalid_argument);
  EXPECT_THROW(tick_scale(-1ns), std::invalid_argument);
  EXPECT_EQ(tick_scale(100us).tick(), 100us);
}

}  // namespace
