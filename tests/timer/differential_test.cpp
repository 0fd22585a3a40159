// Randomized differential tests: timer_wheel and timer_heap, each at ticks of 1 ms, 100 us,
// 1 us, 3 ns and 1 ns (the fine ticks reach the wheel's levels 8-10), against the reference
// model of differential_model.hpp over millions of random operations:
// schedule, cancel (of idle nodes too), reschedule earlier and later, advance by sub-tick steps,
// single ticks, jumps of up to a century and backwards; deadlines in the past, before the epoch,
// clustered, decades ahead and at time_point::max(); callbacks that cancel other timers and
// re-arm themselves. Every advance must fire exactly the model's due set, and size(), now() and
// next_deadline() must agree with it after every step, and the wheel's invariant check must
// pass after every advance. Bursts of more than 256 cancels and schedules between advances fill
// the wheel's cancel log and staging area; callbacks cancel, schedule and reschedule other
// nodes; a lockstep run compares the wheel with the heap directly, advance by advance. The
// wheel counts what it reached (this test links the timer sources built with
// COGWHEEL_TIMER_COVERAGE, in every build type): each run asserts it reached every level its
// tick can reach and every flush path.
//
// COGWHEEL_TEST_SCALE (a float, default 1) multiplies the operation counts; the ASan stage of
// tests/ci.sh sets 0.1. COGWHEEL_TEST_SEED=<n> runs only that seed (to reproduce a failure).
#include "differential_model.hpp"

#include <cogwheel/timer/detail/wheel_coverage.hpp>
#include <cogwheel/timer/queue.hpp>

static_assert(cogwheel::timer::detail::wheel_coverage_enabled,
              "link the timer sources built with COGWHEEL_TIMER_COVERAGE (tests/timer/CMakeLists.txt)");

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <string>
#include <vector>

namespace {

using namespace cogwheel::timer;
using namespace cogwheel::timer::testing;
using namespace std::chrono_literals;

double test_scale() {
  const char* s = std::getenv("COGWHEEL_TEST_SCALE");
  if (s == nullptr) return 1.0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  return end != s && v > 0 ? v : 1.0;
}

std::uint64_t scaled(std::uint64_t n) {
  const auto v = static_cast<std::uint64_t>(static_cast<double>(n) * test_scale());
  return v == 0 ? 1 : v;
}

struct param {
  timer_kind kind;
  clock::duration tick;
  const char* name;
};

std::string param_name(const ::testing::TestParamInfo<param>& info) { return info.param.name; }

struct totals {
  std::uint64_t operations = 0, fired = 0;
  std::size_t peak_pending = 0;
  detail::wheel_coverage reached;  // what the wheel's code reached (zero where not counted)
};

// Runs `seeds` seeds of `ops` operations each from seed `first`, pools drawn from `pools`.
// Stops at the first mismatch.
template <class Queue>
totals run(clock::duration tick, std::uint64_t first, std::uint64_t seeds, std::uint64_t ops,
           const std::vector<std::uint32_t>& pools, unsigned burst_permille = 0) {
  totals total;
  detail::coverage() = {};
  const char* only = std::getenv("COGWHEEL_TEST_SEED");
  for (std::uint64_t i = 0; i < seeds; ++i) {
    const std::uint64_t seed = only != nullptr ? std::strtoull(only, nullptr, 0) : first + i;
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with COGWHEEL_TEST_SEED=" +
                 std::to_string(seed) + ")");
    prng_source src(seed);
    driver_settings settings = draw_settings(src, tick, pools);
    if (burst_permille != 0) {  // the filling-up mix, so bursts find hundreds of filed nodes
      settings.burst_permille = burst_permille;
      settings.advance_permille = 40;
      settings.schedule_weight = 16;
      settings.cancel_weight = 1;
      settings.reschedule_weight = 3;
    }
    differential_driver<Queue> driver(settings);
    bool ok = true;
    for (std::uint64_t n = 0; n < ops && ok; ++n) ok = driver.step(src);
    if (ok) ok = driver.finish();
    total.operations += driver.operations();
    total.fired += driver.fired();
    total.peak_pending = std::max(total.peak_pending, driver.peak_pending());
    if (!ok) {
      ADD_FAILURE() << driver.failure();
      break;
    }
    if (only != nullptr) break;
  }
  total.reached = detail::coverage();
  return total;
}

// The highest wheel level a tick can reach: deadlines go up to the clock's end, 2^63 - 1 ns.
unsigned top_level(clock::duration tick) {
  const auto ticks = static_cast<std::uint64_t>(clock::duration::max().count() / tick.count());
  return detail::level_for(0, ticks);
}

// Asserts that a wheel run reached every level up to what its tick allows (filed there, and a
// slot of it came due), and each path that files staged nodes, applies logged cancels, pushes
// a deadline lazily or moves a pushed node early. With `bursts`, also the flushes forced by a
// full staging area and a full cancel log.
void expect_reached(const param& p, const totals& t, bool bursts) {
  if (p.kind != timer_kind::wheel) return;
  const detail::wheel_coverage& c = t.reached;
  for (unsigned level = 0; level <= top_level(p.tick); ++level) {
    EXPECT_GT(c.filed[level], 0u) << "no node was filed at level " << level;
    EXPECT_GT(c.processed[level], 0u) << "no slot of level " << level << " came due";
  }
  EXPECT_GT(c.filed_overdue, 0u);
  EXPECT_GT(c.stage_flush_advance, 0u);
  EXPECT_GT(c.cancel_flush_filing, 0u);
  EXPECT_GT(c.lazy_pushes, 0u);
  EXPECT_GT(c.revived, 0u) << "no cancelled node was put back into its entry";
  EXPECT_GT(c.filed_now, 0u) << "no replaced timeout was filed at once";
  EXPECT_GT(c.filed_now_woke, 0u) << "no filing at once woke a level's visits";
  EXPECT_GT(c.due_cancels, 0u);
  EXPECT_GT(c.cancel_flush_destroy, 0u);
  if (bursts) {
    EXPECT_GT(c.stage_flush_full, 0u) << "no burst filled the staging area (256)";
    EXPECT_GT(c.cancel_flush_full, 0u) << "no burst filled the cancel log (256)";
  } else {
    EXPECT_GT(c.visit_moves, 0u) << "no pushed node was moved early";
    EXPECT_GT(c.visit_restarts, 0u) << "no visit pass began again over its slot";
    EXPECT_GT(c.fast_advances, 0u) << "no advance() took the O(1) path";
  }
}

template <class F>
totals on_kind(timer_kind kind, F&& f) {
  return kind == timer_kind::wheel ? f.template operator()<timer_wheel>()
                                   : f.template operator()<timer_heap>();
}

void report(const param& p, const totals& t) {
  std::printf("[ differential ] %s: %llu operations, %llu timers fired, peak %zu pending\n", p.name,
              static_cast<unsigned long long>(t.operations), static_cast<unsigned long long>(t.fired),
              t.peak_pending);
  if (p.kind != timer_kind::wheel) return;
  const detail::wheel_coverage& c = t.reached;
  std::printf("[ differential ]   processed per level:");
  for (const std::uint64_t n : c.processed) std::printf(" %llu", static_cast<unsigned long long>(n));
  std::printf("; stage full %llu, cancel log full %llu, visit moves %llu, restarts %llu\n",
              static_cast<unsigned long long>(c.stage_flush_full),
              static_cast<unsigned long long>(c.cancel_flush_full),
              static_cast<unsigned long long>(c.visit_moves),
              static_cast<unsigned long long>(c.visit_restarts));
}

class differential : public ::testing::TestWithParam<param> {};

// Long streams over pools of up to a few thousand nodes: 2.5 million operations per queue and
// tick at scale 1 (1 million at the fine ticks).
TEST_P(differential, long_random_streams_fire_exactly_what_the_model_says_is_due) {
  const param& p = GetParam();
  const totals t = on_kind(p.kind, [&]<class Q>() {
    return run<Q>(p.tick, 1000, p.tick >= 100us ? 25 : 10, scaled(100'000), {64, 512, 4096});
  });
  report(p, t);
  expect_reached(p, t, false);
}

// Between advances, bursts of 257..512 cancels of filed nodes and 257..512 schedules (the
// cancel log and the staging area each hold 256), over pools large enough to have them pending.
TEST_P(differential, bursts_of_cancels_and_schedules_between_advances_fire_exactly_what_is_due) {
  const param& p = GetParam();
  const totals t = on_kind(p.kind, [&]<class Q>() {
    return run<Q>(p.tick, 5000, 8, scaled(40'000), {4096}, 4);
  });
  report(p, t);
  expect_reached(p, t, true);
}

// Many short streams over a handful of nodes, so callbacks cancel and re-arm timers of the same
// batch often and every start time and operation mix gets its turn.
TEST_P(differential, short_streams_over_few_nodes_fire_exactly_what_the_model_says_is_due) {
  const param& p = GetParam();
  const totals t = on_kind(p.kind, [&]<class Q>() {
    return run<Q>(p.tick, 1'000'000, scaled(1000), 400, {4, 16, 64});
  });
  report(p, t);
}

INSTANTIATE_TEST_SUITE_P(timer, differential,
                         ::testing::Values(param{timer_kind::wheel, 1ms, "wheel_1ms"},
                                           param{timer_kind::wheel, 100us, "wheel_100us"},
                                           param{timer_kind::wheel, 1us, "wheel_1us"},
                                           param{timer_kind::wheel, 3ns, "wheel_3ns"},
                                           param{timer_kind::wheel, 1ns, "wheel_1ns"},
                                           param{timer_kind::heap, 1ms, "heap_1ms"},
                                           param{timer_kind::heap, 100us, "heap_100us"},
                                           param{timer_kind::heap, 1us, "heap_1us"},
                                           param{timer_kind::heap, 3ns, "heap_3ns"},
                                           param{timer_kind::heap, 1ns, "heap_1ns"}),
                         param_name);

// The wheel and the heap driven by one stream of choices (nothing in it depends on the queue),
// compared with each other directly: after every operation the same size, and every advance
// fires the same set of nodes in both. Ticks of 1 ms and 1 ns, with bursts.
TEST(differential_lockstep, wheel_and_heap_fire_the_same_set_at_every_advance) {
  for (const clock::duration tick : {clock::duration(1ms), clock::duration(1ns)}) {
    std::uint64_t steps = 0;
    for (std::uint64_t seed = 9000; seed < 9000 + scaled(12); ++seed) {
      SCOPED_TRACE("tick " + std::to_string(tick.count()) + " ns, seed " + std::to_string(seed));
      prng_source wheel_src(seed), heap_src(seed);
      driver_settings ws = draw_settings(wheel_src, tick, {64, 1024});
      driver_settings hs = draw_settings(heap_src, tick, {64, 1024});
      ws.lockstep = hs.lockstep = true;
      ws.burst_permille = hs.burst_permille = 2;
      differential_driver<timer_wheel> wheel(ws);
      differential_driver<timer_heap> heap(hs);
      bool ok = true;
      for (std::uint64_t n = 0; n < scaled(20'000) && ok; ++n) {
        const std::uint64_t before = wheel.operations();
        const bool w = wheel.step(wheel_src);
        const bool h = heap.step(heap_src);
        if (!w || !h) {
          ADD_FAILURE() << (w ? heap.failure() : wheel.failure());
          ok = false;
          break;
        }
        if (wheel.size() != heap.size()) {
          ADD_FAILURE() << "after operation " << before << " the wheel holds " << wheel.size()
                        << " timers, the heap " << heap.size();
          ok = false;
        } else if (wheel.last_fired() != heap.last_fired()) {
          ADD_FAILURE() << "after operation " << before << " the wheel and the heap fired "
                        << "different sets (" << wheel.last_fired().size() << " and "
                        << heap.last_fired().size() << " nodes)";
          ok = false;
        }
        ++steps;
      }
      if (!ok) break;
    }
    EXPECT_GT(steps, 0u);
  }
}

// A wheel whose slots are all too small to visit early (1,000 timers over a minute) leaves the
// O(1) path of advance() only for a slot that comes due: it does not poll its small slots for
// growth every few ticks (which cost such a wheel ~2x the instructions of ratas per timer).
TEST(wheel_cost, a_small_wheel_leaves_the_fast_path_only_when_a_slot_comes_due) {
  constexpr std::size_t count = 1000;
  std::vector<timer_node> nodes(count);
  const clock::time_point start{std::chrono::seconds(1000)};
  timer_wheel w(1ms, start);
  std::uint64_t seed = 7;
  for (timer_node& n : nodes) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    w.schedule(n, start + std::chrono::milliseconds(1 + (seed >> 33) % 60'000));
  }
  detail::coverage() = {};
  clock::time_point now = start;
  std::uint64_t advances = 0;
  while (!w.empty()) {
    now += 1ms;
    w.advance(now);
    ++advances;
  }
  const detail::wheel_coverage c = detail::coverage();
  std::uint64_t due_slots = 0;
  for (const std::uint64_t p : c.processed) due_slots += p;
  // The first advance files the staged timers; every other slow one processes a due slot.
  EXPECT_LE(advances - c.fast_advances, due_slots + 1)
      << advances << " advances, " << c.fast_advances << " on the O(1) path, " << due_slots
      << " slots came due";
}

}  // namespace
