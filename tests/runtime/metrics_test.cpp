// Metrics: the histogram's buckets and quantiles against a reference computed from the sorted
// values; per-core counters that match known work exactly on the paused clock (N sleeps: N
// scheduled, N fired, lateness within a tick); cancels and reschedules; pending timers per
// wheel level; snapshots from another thread; the registry of library and user metrics.
#include <cogwheel/runtime/metrics.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include <cogwheel/runtime/histogram.hpp>
#include <cogwheel/runtime/runtime.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>
#include <cogwheel/runtime/when_all.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

TEST(histogram, buckets_tile_every_value_with_a_width_of_at_most_an_eighth_of_their_start) {
  for (std::size_t i = 0; i + 1 < histogram::bucket_count; ++i) {
    ASSERT_EQ(histogram::bucket_upper(i) + 1, histogram::bucket_lower(i + 1)) << i;
    ASSERT_EQ(histogram::bucket_of(histogram::bucket_lower(i)), i);
    ASSERT_EQ(histogram::bucket_of(histogram::bucket_upper(i)), i);
    if (i >= 8) {
      ASSERT_LE(histogram::bucket_upper(i) - histogram::bucket_lower(i) + 1, histogram::bucket_lower(i) / 8) << i;
    }
  }
  EXPECT_EQ(histogram::bucket_lower(0), 0u);
  EXPECT_EQ(histogram::bucket_upper(histogram::bucket_count - 1), ~std::uint64_t{0});
}

std::vector<std::uint64_t> sample_values() {
  std::mt19937_64 rng(26);
  std::vector<std::uint64_t> v;
  std::lognormal_distribution<double> lateness(std::log(50'000.0), 1.5);  // ~50 us, long tail
  for (int i = 0; i < 20'000; ++i) v.push_back(static_cast<std::uint64_t>(lateness(rng)));
  std::uniform_int_distribution<std::uint64_t> small(0, 40);
  for (int i = 0; i < 2'000; ++i) v.push_back(small(rng));
  v.push_back(0);
  v.push_back(~std::uint64_t{0} / 3);
  return v;
}

TEST(histogram, quantiles_are_the_upper_bound_of_the_bucket_holding_the_reference_quantile) {
  const std::vector<std::uint64_t> values = sample_values();
  histogram h;
  for (std::uint64_t v : values) h.record(v);
  std::vector<std::uint64_t> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(h.count(), sorted.size());
  EXPECT_EQ(h.max(), sorted.back());
  std::uint64_t sum = 0;
  for (std::uint64_t v : values) sum += v;
  EXPECT_EQ(h.sum(), sum);
  for (double q : {0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0}) {
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    if (rank == 0) rank = 1;
    const std::uint64_t truth = sorted[rank - 1];
    const std::uint64_t expected = std::min(histogram::bucket_upper(histogram::bucket_of(truth)), h.max());
    EXPECT_EQ(h.quantile(q), expected) << "q=" << q;
    EXPECT_GE(h.quantile(q), truth) << "q=" << q;
    EXPECT_LE(static_cast<double>(h.quantile(q)), static_cast<double>(truth) * 1.125 + 1) << "q=" << q;
  }
  EXPECT_EQ(h.quantile(1.0), h.max());
}

TEST(histogram, counts_at_or_below_a_bucket_bound_match_the_reference) {
  const std::vector<std::uint64_t> values = sample_values();
  histogram h;
  for (std::uint64_t v : values) h.record(v);
  for (std::size_t i = 0; i < histogram::bucket_count; i += 7) {
    const std::uint64_t bound = histogram::bucket_upper(i);
    const auto truth = static_cast<std::uint64_t>(std::count_if(values.begin(), values.end(), [&](std::uint64_t v) { return v <= bound; }));
    ASSERT_EQ(h.count_at_most(bound), truth) << bound;
  }
}

TEST(histogram, an_empty_one_answers_zero_and_a_copy_and_a_merge_add_up) {
  histogram h;
  EXPECT_EQ(h.quantile(0.5), 0u);
  EXPECT_EQ(h.max(), 0u);
  h.record(100);
  h.record(3);
  histogram copy = h;
  EXPECT_EQ(copy.count(), 2u);
  EXPECT_EQ(copy.quantile(1), 100u);
  copy.merge(h);
  EXPECT_EQ(copy.count(), 4u);
  EXPECT_EQ(copy.sum(), 206u);
  EXPECT_EQ(copy.bucket(3), 2u);
}

class metrics_on : public testing::TestWithParam<timer_kind> {
 protected:
  runtime_options options() const {
    runtime_options o;
    o.paused_clock = true;
    o.timers = GetParam();
    return o;
  }
};
INSTANTIATE_TEST_SUITE_P(timers, metrics_on, testing::Values(timer_kind::wheel, timer_kind::heap),
                         [](const auto& info) { return std::string(info.param == timer_kind::wheel ? "wheel" : "heap"); });

task<void> sleeper(clock::duration d) { co_await sleep_for(d); }

TEST_P(metrics_on, n_sleeps_are_n_timers_scheduled_and_fired_each_within_a_tick_of_its_deadline) {
  run(
      []() -> task<void> {
        const core_metrics before = this_core_metrics();
        constexpr int n = 1000;
        std::vector<task<void>> sleeps;
        for (int i = 0; i < n; ++i) sleeps.push_back(sleeper(std::chrono::microseconds(137 * i + 1)));
        co_await when_all(std::move(sleeps));
        const core_metrics after = this_core_metrics();
        EXPECT_EQ(after.timers_scheduled - before.timers_scheduled, std::uint64_t{n});
        EXPECT_EQ(after.timers_fired - before.timers_fired, std::uint64_t{n});
        EXPECT_EQ(after.timers_cancelled - before.timers_cancelled, 0u);
        EXPECT_EQ(after.timer_lateness.count() - before.timer_lateness.count(), std::uint64_t{n});
        EXPECT_LT(after.timer_lateness.max(), 1'000'000u) << "a timer fired a tick or more after its deadline's tick";
        EXPECT_EQ(after.pending_timers, 0u);
      }(),
      options());
}

TEST_P(metrics_on, a_timeout_that_expires_fires_and_its_cancelled_sleep_is_refiled_as_due_now) {
  run(
      []() -> task<void> {
        const core_metrics before = this_core_metrics();
        auto r = co_await with_timeout(sleep_for(10s), 5ms);
        EXPECT_FALSE(r);
        const core_metrics after = this_core_metrics();
        EXPECT_EQ(after.timers_scheduled - before.timers_scheduled, 2u);
        EXPECT_EQ(after.timers_rescheduled - before.timers_rescheduled, 1u);  // the sleep: due now
        EXPECT_EQ(after.timers_fired - before.timers_fired, 2u);
        EXPECT_EQ(after.timers_cancelled - before.timers_cancelled, 0u);
        // A timer filed as due now (the epoch: deadline tick 0) is not late: only the timeout.
        EXPECT_EQ(after.timer_lateness.count() - before.timer_lateness.count(), 1u);
        EXPECT_LT(after.timer_lateness.max(), 1'000'000u);
      }(),
      options());
}

TEST_P(metrics_on, an_operation_that_beats_its_timeout_cancels_the_timeout_timer) {
  run(
      []() -> task<void> {
        const core_metrics before = this_core_metrics();
        auto r = co_await with_timeout(sleep_for(1ms), 1s);
        EXPECT_TRUE(r);
        const core_metrics after = this_core_metrics();
        EXPECT_EQ(after.timers_scheduled - before.timers_scheduled, 2u);
        EXPECT_EQ(after.timers_fired - before.timers_fired, 1u);
        EXPECT_EQ(after.timers_cancelled - before.timers_cancelled, 1u);
      }(),
      options());
}

TEST_P(metrics_on, pending_timers_are_counted_per_wheel_level_and_sum_to_the_queue_size) {
  run(
      []() -> task<void> {
        for (clock::duration d : {clock::duration(2ms), clock::duration(3ms), clock::duration(100ms), clock::duration(5s), clock::duration(5s), clock::duration(2h)}) spawn(sleeper(d));
        co_await sleep_for(1ms);  // the spawned sleepers run and their timers are filed
        const core_metrics m = this_core_metrics();
        EXPECT_EQ(m.pending_timers, 6u);
        EXPECT_EQ(m.pending_timers, pending_timers());
        std::uint64_t sum = 0;
        for (std::uint64_t c : m.pending_timers_per_level) sum += c;
        EXPECT_EQ(sum, 6u);
        if (m.timers == timer_kind::heap) {
          EXPECT_EQ(m.pending_timers_per_level[0], 6u);
        } else {
          // A deadline d ticks ahead sits at a level L with 64^L <= d (the highest bit in
          // which it differs from the wheel's time): ~99 ms at 1 or more, 5 s (>= 4096 ticks)
          // at 2 or more, 2 h (>= 262144) at 3 or more. A shorter one may sit higher too, when
          // it crosses a 64-tick boundary of the wheel's time: hence at least, not exactly.
          auto at_or_above = [&](unsigned level) {
            std::uint64_t n = 0;
            for (unsigned l = level; l < timer_level_count; ++l) n += m.pending_timers_per_level[l];
            return n;
          };
          EXPECT_GE(at_or_above(1), 4u);
          EXPECT_GE(at_or_above(2), 3u);
          EXPECT_GE(at_or_above(3), 1u);
          EXPECT_EQ(m.pending_timers_per_level[timer_level_count], 0u) << "all filed";
        }
        co_await sleep_for(3h);
        EXPECT_EQ(this_core_metrics().pending_timers, 0u);
      }(),
      options());
}

TEST(metrics, a_snapshot_from_another_thread_sees_every_core_and_its_counters) {
  runtime rt(runtime_options{.cores = 2, .pin_threads = false});
  std::atomic<int> phase{0};
  std::thread watcher([&] {
    while (phase.load() != 1) std::this_thread::yield();
    const metrics_snapshot s = snapshot_metrics();
    EXPECT_EQ(s.cores.size(), 2u);
    for (std::size_t i = 0; i < s.cores.size(); ++i) {
      EXPECT_EQ(s.cores[i].core, i);
      EXPECT_GE(s.cores[i].timers_fired, 10u);
      EXPECT_GE(s.cores[i].iterations, 10u);
      // The core keeps firing while the snapshot copies it, and a snapshot's fields come from
      // slightly different moments (metrics.hpp): a lateness recorded inside an advance() whose
      // timers_fired is added after it returns may be in the copy without it. One timer per
      // iteration here, and a copy spans at most a few iterations.
      EXPECT_NEAR(static_cast<double>(s.cores[i].timer_lateness.count()),
                  static_cast<double>(s.cores[i].timers_fired), 3.0);
    }
    phase.store(2);
  });
  std::atomic<int> done{0};
  rt.run([&](unsigned) -> task<void> {
    for (int i = 0; i < 10; ++i) co_await sleep_for(1ms);
    if (done.fetch_add(1) == 1) phase.store(1);
    while (phase.load() != 2) co_await sleep_for(1ms);
  });
  watcher.join();
  // The loops are gone: what remains is each core's state as its loop shut down.
  const metrics_snapshot after = snapshot_metrics();
  EXPECT_EQ(after.cores.size(), 2u);
  for (const core_metrics& c : after.cores) EXPECT_GE(c.timers_fired, 10u);
}

TEST(metrics, registered_counters_gauges_and_histograms_appear_in_snapshots_until_unregistered) {
  counter c;
  gauge g;
  histogram h;
  c += 5;
  g.set(-3);
  h.record(42);
  {
    metric_registration rc = register_counter("test_things", "Things done.", c, "kind=\"a\"");
    metric_registration rg = register_gauge("test_level", "A level.", g);
    metric_registration rh = register_histogram("test_wait_seconds", "Waits.", h);
    const metrics_snapshot s = snapshot_metrics();
    ASSERT_EQ(s.values.size(), 2u);
    EXPECT_EQ(s.values[0].name, "test_things");
    EXPECT_TRUE(s.values[0].is_counter);
    EXPECT_EQ(s.values[0].value, 5.0);
    EXPECT_EQ(s.values[0].core, -1);
    EXPECT_EQ(s.values[1].value, -3.0);
    ASSERT_EQ(s.histograms.size(), 1u);
    EXPECT_EQ(s.histograms[0].values.count(), 1u);
    EXPECT_THROW(register_counter("9bad name", "", c), std::invalid_argument);
  }
  EXPECT_TRUE(snapshot_metrics().values.empty());
  EXPECT_TRUE(snapshot_metrics().histograms.empty());
}

TEST(metrics, with_metrics_off_counters_still_count_and_no_time_is_recorded) {
  runtime_options o;
  o.paused_clock = true;
  o.metrics = false;
  run(
      []() -> task<void> {
        for (int i = 0; i < 5; ++i) co_await sleep_for(1ms);
        const core_metrics m = this_core_metrics();
        EXPECT_EQ(m.timers_fired, 5u);
        EXPECT_EQ(m.timers_scheduled, 5u);
        EXPECT_EQ(m.timer_lateness.count(), 0u);
        EXPECT_EQ(m.iteration_duration.count(), 0u);
      }(),
      o);
}

TEST(metrics, every_iteration_records_its_duration_and_phases) {
  run([]() -> task<void> {
    for (int i = 0; i < 20; ++i) co_await sleep_for(1ms);
    const core_metrics m = this_core_metrics();
    EXPECT_GE(m.iteration_duration.count(), 20u);
    for (const histogram& p : m.phase_ns) EXPECT_EQ(p.count(), m.iteration_duration.count());
    // Asleep in the kernel for most of 20 ms: the waits hold most of the time.
    EXPECT_GT(m.phase_ns[static_cast<unsigned>(loop_phase::kernel_wait)].sum(), 10'000'000u);
    EXPECT_LT(m.iteration_duration.sum(), 10'000'000u);
    EXPECT_EQ(m.timer_lateness.count(), 20u);
    EXPECT_GT(m.kernel_waits, 0u);
    EXPECT_GT(m.syscalls, 0u);
    EXPECT_EQ(m.operations_in_flight, 1) << "only the loop's own wake-up read";
  }());
}

// A loop that only yields skips the kernel most iterations: those time their phases 1 in 16,
// at random, each sample counting 16, so the phase histograms still count every iteration in
// expectation (here ~32,000 +- ~700 for ~32,000 iterations; 20% is ~9 standard deviations).
TEST(metrics, hot_path_iterations_sample_their_phases_without_bias) {
  run([]() -> task<void> {
    const core_metrics before = this_core_metrics();
    for (int i = 0; i < 32'000; ++i) co_await yield();
    const core_metrics m = this_core_metrics();
    const double iterations = static_cast<double>(m.iteration_duration.count() - before.iteration_duration.count());
    EXPECT_GE(iterations, 31'999);  // the snapshot is taken inside the last one
    for (unsigned p = 0; p < loop_phase_count; ++p) {
      const double counted = static_cast<double>(m.phase_ns[p].count() - before.phase_ns[p].count());
      EXPECT_NEAR(counted, iterations, 0.2 * iterations) << to_string(static_cast<loop_phase>(p));
    }
  }());
}

}  // namespace
}  // namespace cogwheel
