// Metrics at their limits and over windows: sums and counters saturate at 2^64 - 1 instead of
// wrapping (and the Prometheus text says so); `later - earlier` of histograms and snapshots is
// the window between them, clamped at 0 when earlier is not earlier; the final state of the
// loops stays readable after run() returns.
#include <cogwheel/runtime/metrics.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include <cogwheel/runtime/histogram.hpp>
#include <cogwheel/runtime/prometheus.hpp>
#include <cogwheel/runtime/run.hpp>
#include <cogwheel/runtime/runtime.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t half = std::numeric_limits<std::int64_t>::max();  // 2^63 - 1

TEST(metrics_limits, a_histogram_sum_saturates_and_prometheus_reads_it_saturated_not_wrapped) {
  histogram h;
  for (int i = 0; i < 3; ++i) h.record(half);
  EXPECT_EQ(h.count(), 3u);
  EXPECT_EQ(h.sum(), top) << "wrapped: three times 2^63 - 1 reads as 2^63 - 3";
  EXPECT_EQ(h.max(), half);
  const metric_registration r = register_histogram("cogwheel_test_huge_seconds", "Huge.", h);
  const std::string text = to_prometheus(snapshot_metrics());
  // 2^64 - 1 ns = 1.84467441e+10 s (wrapped it would be 9.22337204e+09).
  EXPECT_NE(text.find("cogwheel_test_huge_seconds_sum 1.84467441e+10\n"), std::string::npos) << text;

  histogram product;  // record(v, n) with v * n past 2^64
  product.record(std::uint64_t{1} << 40, std::uint64_t{1} << 30);
  EXPECT_EQ(product.sum(), top);
  EXPECT_EQ(product.count(), std::uint64_t{1} << 30);
  histogram merged = h;
  merged.merge(h);
  EXPECT_EQ(merged.sum(), top);
  EXPECT_EQ(merged.count(), 6u);
}

TEST(metrics_limits, a_counter_near_its_maximum_saturates_instead_of_reading_as_a_reset) {
  counter c;
  c += top - 5;
  c += 3;
  EXPECT_EQ(c.value(), top - 2);
  c += 10;
  EXPECT_EQ(c.value(), top);
  ++c;
  EXPECT_EQ(c.value(), top);
  const metric_registration r = register_counter("cogwheel_test_huge", "Huge.", c);
  const std::string text = to_prometheus(snapshot_metrics());
  EXPECT_NE(text.find("cogwheel_test_huge_total 1.84467441e+19\n"), std::string::npos) << text;
}

TEST(metrics_window, a_histogram_minus_an_earlier_copy_is_the_window_bucket_by_bucket) {
  histogram h;
  for (std::uint64_t v : {5u, 1000u, 1000u, 70'000u}) h.record(v);
  const histogram earlier = h;
  for (std::uint64_t v : {1000u, 3u, 2'000'000u}) h.record(v);
  const histogram window = h - earlier;
  EXPECT_EQ(window.count(), 3u);
  EXPECT_EQ(window.sum(), 2'001'003u);
  for (std::size_t i = 0; i < histogram::bucket_count; ++i) {
    const std::uint64_t want = i == histogram::bucket_of(1000) || i == histogram::bucket_of(3) ||
                                       i == histogram::bucket_of(2'000'000)
                                   ? 1
                                   : 0;
    ASSERT_EQ(window.bucket(i), want) << i;
  }
  EXPECT_EQ(window.max(), 2'000'000u);  // later's max falls in the window's top bucket: exact
  EXPECT_EQ(window.quantile(0.5), histogram::bucket_upper(histogram::bucket_of(1000)));
  EXPECT_EQ(window.count_at_most(4), 1u);

  // A window whose largest value is not later's max: bounded by its top bucket.
  histogram g;
  g.record(1'000'000);
  const histogram before = g;
  g.record(100);
  const histogram w2 = g - before;
  EXPECT_EQ(w2.max(), histogram::bucket_upper(histogram::bucket_of(100)));
  EXPECT_EQ(w2.quantile(1), w2.max());

  // Nothing new: empty. Swapped (earlier is not earlier): every cell 0, never wrapped.
  const histogram same = h - h;
  EXPECT_EQ(same.count(), 0u);
  EXPECT_EQ(same.max(), 0u);
  const histogram swapped = earlier - h;
  EXPECT_EQ(swapped.count(), 0u);
  EXPECT_EQ(swapped.sum(), 0u);
  for (std::size_t i = 0; i < histogram::bucket_count; ++i) ASSERT_EQ(swapped.bucket(i), 0u) << i;

  // A sum saturated in later stays saturated in the window: its true value is unknown.
  histogram s;
  s.record(10);
  const histogram s_before = s;
  for (int i = 0; i < 3; ++i) s.record(half);
  EXPECT_EQ((s - s_before).sum(), top);
  EXPECT_EQ((s - s_before).count(), 3u);
}

TEST(metrics_window, a_snapshot_minus_an_earlier_one_subtracts_counters_and_keeps_later_gauges) {
  counter claims;
  gauge depth;
  histogram waits;
  claims += 10;
  depth.set(7);
  waits.record(500);
  const metric_registration r1 = register_counter("cogwheel_test_window_claims", "Claims.", claims);
  const metric_registration r2 = register_gauge("cogwheel_test_window_depth", "Depth.", depth);
  const metric_registration r3 = register_histogram("cogwheel_test_window_seconds", "Waits.", waits);
  run([&]() -> task<void> {
    co_await sleep_for(1ms);
    const metrics_snapshot earlier = snapshot_metrics();
    for (int i = 0; i < 25; ++i) co_await sleep_for(1ms);
    claims += 4;
    depth.set(2);
    waits.record(9'000);
    waits.record(9'000);
    counter late;  // registered inside the window: kept whole
    late += 3;
    const metric_registration r4 = register_counter("cogwheel_test_window_late", "Late.", late);
    const metrics_snapshot later = snapshot_metrics();
    const metrics_snapshot window = later - earlier;
    EXPECT_EQ(window.cores.size(), 1u);
    if (window.cores.size() != 1u || earlier.cores.size() != 1u) co_return;
    const core_metrics& c = window.cores[0];
    EXPECT_EQ(c.timers_fired, later.cores[0].timers_fired - earlier.cores[0].timers_fired);
    EXPECT_GE(c.timers_fired, 25u);
    EXPECT_LT(c.timers_fired, earlier.cores[0].timers_fired + 25u) << "subtracted";
    EXPECT_EQ(c.iterations, later.cores[0].iterations - earlier.cores[0].iterations);
    EXPECT_EQ(c.timer_lateness.count(), later.cores[0].timer_lateness.count() - earlier.cores[0].timer_lateness.count());
    EXPECT_EQ(c.operations_in_flight, later.cores[0].operations_in_flight);  // a gauge: later's
    EXPECT_EQ(c.core, 0u);
    for (const registered_value& v : window.values) {
      if (v.name == "cogwheel_test_window_claims") {
        EXPECT_EQ(v.value, 4.0);
      } else if (v.name == "cogwheel_test_window_depth") {
        EXPECT_EQ(v.value, 2.0);
      } else if (v.name == "cogwheel_test_window_late") {
        EXPECT_EQ(v.value, 3.0);
      }
    }
    EXPECT_EQ(window.values.size(), 3u);
    EXPECT_EQ(window.histograms.size(), 1u);
    if (window.histograms.size() == 1u) {
      EXPECT_EQ(window.histograms[0].values.count(), 2u);
      EXPECT_EQ(window.histograms[0].values.sum(), 18'000u);
    }
    // Swapped: counters clamp at 0.
    const metrics_snapshot swapped = earlier - later;
    EXPECT_EQ(swapped.cores[0].timers_fired, 0u);
    EXPECT_EQ(swapped.cores[0].timer_lateness.count(), 0u);
  }());
}

TEST(metrics_window, after_run_returns_the_snapshot_holds_how_each_core_ended) {
  std::uint64_t fired_inside = 0;
  run([&]() -> task<void> {
    for (int i = 0; i < 20; ++i) co_await sleep_for(1ms);
    fired_inside = this_core_metrics().timers_fired;
  }());
  const metrics_snapshot after = snapshot_metrics();
  ASSERT_EQ(after.cores.size(), 1u) << "the final state is kept";
  EXPECT_GE(after.cores[0].timers_fired, fired_inside);
  EXPECT_GE(after.cores[0].timers_fired, 20u);
  EXPECT_GE(after.cores[0].timer_lateness.count(), 20u);
  EXPECT_EQ(after.cores[0].core, 0u);
  EXPECT_EQ(snapshot_metrics().cores.size(), 1u) << "and stays readable";

  // A multi-core runtime: every core's final state, by index; it replaces the previous run's.
  runtime rt(runtime_options{.cores = 2, .pin_threads = false});
  rt.run([](unsigned core) -> task<void> {
    for (unsigned i = 0; i < 5 + 10 * core; ++i) co_await sleep_for(1ms);
  });
  const metrics_snapshot two = snapshot_metrics();
  ASSERT_EQ(two.cores.size(), 2u);
  EXPECT_EQ(two.cores[0].core, 0u);
  EXPECT_EQ(two.cores[1].core, 1u);
  EXPECT_GE(two.cores[0].timers_fired, 5u);
  EXPECT_GE(two.cores[1].timers_fired, 15u);
}

}  // namespace
}  // namespace cogwheel
