// sleep_for / sleep_until on the loop's timer queue: never early, at most one tick late (checked
// against the loop's own virtual clock), immediate for deadlines already reached, no overflow
// for huge durations, deadline order for a million sleepers on both timer kinds, and an idle
// loop asleep in the kernel.
#include <cogwheel/runtime/sleep.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>
#include <cogwheel/timer/ticks.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

struct timer_config {
  timer_kind kind;
  clock::duration tick;
};

std::string config_name(const testing::TestParamInfo<timer_config>& info) {
  return std::string(info.param.kind == timer_kind::wheel ? "wheel" : "heap") + "_tick_" +
         std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(info.param.tick).count()) + "us";
}

class sleep_on : public testing::TestWithParam<timer_config> {
 protected:
  runtime_options options() const {
    runtime_options o;
    o.paused_clock = true;
    o.timers = GetParam().kind;
    o.tick = GetParam().tick;
    return o;
  }
};

INSTANTIATE_TEST_SUITE_P(timers, sleep_on,
                         testing::Values(timer_config{timer_kind::wheel, 1ms}, timer_config{timer_kind::wheel, 100us},
                                         timer_config{timer_kind::heap, 1ms}, timer_config{timer_kind::heap, 100us}),
                         config_name);

TEST_P(sleep_on, never_completes_early_nor_more_than_one_tick_late) {
  const clock::duration tick = GetParam().tick;
  // Durations around tick multiples and wheel level boundaries (64, 4096, 262144 ticks).
  const std::vector<clock::duration> durations = {
      1ns,         tick / 3,     tick,           tick + 1ns,          7 * tick / 2,      63 * tick,
      64 * tick,   65 * tick,    4095 * tick,    4096 * tick + 17ns,  262'145 * tick,    1h,
      26h + 1ns};
  run([&]() -> task<> {
        for (clock::duration d : durations) {
          const clock::time_point start = test::loop_now();
          EXPECT_EQ(now(), start);  // a paused clock reads the loop's time
          co_await sleep_for(d);
          const clock::time_point woke = test::loop_now();
          EXPECT_GE(woke, start + d) << "early, for d = " << d.count() << "ns";
          EXPECT_LT(woke - (start + d), tick) << "late, for d = " << d.count() << "ns";
        }
      }(),
      options());
}

TEST_P(sleep_on, sleep_until_completes_at_its_time_point) {
  const clock::duration tick = GetParam().tick;
  run([&]() -> task<> {
        const clock::time_point at = test::loop_now() + 12345 * tick + 3ns;
        co_await sleep_until(at);
        EXPECT_GE(test::loop_now(), at);
        EXPECT_LT(test::loop_now() - at, tick);
      }(),
      options());
}

// One sleep of the loop's own coroutine: the iteration it starts in is counted, so the wake-up
// must come in the one after.
template <class Sleep>
task<> expect_completes_at_next_iteration(Sleep make_sleep) {
  co_await yield();  // now inside an iteration
  const std::uint64_t iteration = this_core_metrics().iterations;
  const std::uint64_t jumps = this_core_metrics().clock_jumps;
  const clock::time_point before = test::loop_now();
  co_await make_sleep();
  EXPECT_EQ(this_core_metrics().iterations, iteration + 1);
  EXPECT_EQ(this_core_metrics().clock_jumps, jumps) << "waited for a tick boundary";
  EXPECT_EQ(test::loop_now(), before);
}

TEST_P(sleep_on, sleep_for_zero_completes_at_the_next_iteration) {
  run(expect_completes_at_next_iteration([] { return sleep_for(0ns); }), options());
}

TEST_P(sleep_on, negative_sleep_completes_at_the_next_iteration) {
  run(expect_completes_at_next_iteration([] { return sleep_for(-5s); }), options());
  run(expect_completes_at_next_iteration([] { return sleep_for(clock::duration::min()); }), options());
}

TEST_P(sleep_on, sleep_until_in_the_past_completes_at_the_next_iteration) {
  run(expect_completes_at_next_iteration([] { return sleep_until(test::loop_now() - 1ns); }), options());
  run(expect_completes_at_next_iteration([] { return sleep_until(test::loop_now()); }), options());
  run(expect_completes_at_next_iteration([] { return sleep_until(clock::time_point::min()); }), options());
}

// hours::max() in nanoseconds overflows clock::duration; the sleep must saturate to "forever",
// not wrap around to a negative duration that completes at once.
TEST_P(sleep_on, huge_durations_do_not_overflow) {
  run([]() -> task<> {
        const clock::time_point start = test::loop_now();
        result<void> r = co_await with_timeout(sleep_for(std::chrono::hours::max()), 50ms);
        EXPECT_EQ(r.error(), errc::timed_out);
        r = co_await with_timeout(sleep_for(clock::duration::max()), 50ms);
        EXPECT_EQ(r.error(), errc::timed_out);
        r = co_await with_timeout(sleep_until(clock::time_point::max()), 50ms);
        EXPECT_EQ(r.error(), errc::timed_out);
        EXPECT_GE(test::loop_now() - start, 150ms);
        EXPECT_LT(test::loop_now() - start, 151ms);
        EXPECT_EQ(pending_timers(), 0u);
      }(),
      options());
}

// A million spawned sleepers with random durations wake in deadline order at tick resolution,
// none early and none more than a tick late.
TEST_P(sleep_on, a_million_sleepers_wake_in_deadline_order) {
  const std::size_t n = test::scaled(1'000'000, 10'000);
  const clock::duration tick = GetParam().tick;
  const timer::tick_scale scale(tick);
  struct wake {
    clock::time_point deadline;
    clock::time_point woke;
  };
  std::vector<wake> wakes;
  wakes.reserve(n);
  run([&]() -> task<> {
        std::mt19937_64 rng(42);
        std::uniform_int_distribution<std::int64_t> ns(1, std::chrono::nanoseconds(10s).count());
        auto sleeper = [](std::vector<wake>& out, clock::duration d) -> task<> {
          const clock::time_point deadline = now() + d;
          co_await sleep_until(deadline);
          out.push_back({deadline, test::loop_now()});
        };
        for (std::size_t i = 0; i < n; ++i) spawn(sleeper(wakes, std::chrono::nanoseconds(ns(rng))));
        while (wakes.size() < n) co_await sleep_for(1s);
      }(),
      options());
  ASSERT_EQ(wakes.size(), n);
  std::size_t early = 0, late = 0, out_of_order = 0;
  for (std::size_t i = 0; i < n; ++i) {
    early += wakes[i].woke < wakes[i].deadline ? 1 : 0;
    late += wakes[i].woke - wakes[i].deadline >= tick ? 1 : 0;
    if (i > 0 && scale.deadline_tick(wakes[i].deadline) < scale.deadline_tick(wakes[i - 1].deadline)) ++out_of_order;
  }
  EXPECT_EQ(early, 0u);
  EXPECT_EQ(late, 0u);
  EXPECT_EQ(out_of_order, 0u);
}

// Real clock, on purpose: with one timer pending, the loop sleeps in io_uring_enter until it is
// due (a few wake-ups as the wheel cascades it down its levels), instead of ticking.
TEST(sleep, idle_loop_sleeps_in_the_kernel) {
  run([]() -> task<> {
    const clock::time_point start = clock::now();
    co_await sleep_for(300ms);
    EXPECT_GE(clock::now() - start, 300ms);
    EXPECT_LT(this_core_metrics().iterations, 10u);
  }());
}

}  // namespace
}  // namespace cogwheel
