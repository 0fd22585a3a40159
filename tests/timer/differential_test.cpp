// Randomized differential tests: timer_wheel and timer_heap, each at a 1 ms and a 100 us tick,
// against the reference model of differential_model.hpp over millions of random operations:
// schedule, cancel (of idle nodes too), reschedule earlier and later, advance by sub-tick steps,
// single ticks, jumps of up to a century and backwards; deadlines in the past, before the epoch,
// clustered, decades ahead and at time_point::max(); callbacks that cancel other timers and
// re-arm themselves. Every advance must fire exactly the model's due set, and size(), now() and
// next_deadline() must agree with it after every step.
//
// COGWHEEL_TEST_SCALE (a float, default 1) multiplies the operation counts; the ASan stage of
// tests/ci.sh sets 0.1. COGWHEEL_TEST_SEED=<n> runs only that seed (to reproduce a failure).
#include "differential_model.hpp"

#include <cogwheel/timer/queue.hpp>

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
};

// Runs `seeds` seeds of `ops` operations each from seed `first`, pools drawn from `pools`.
// Stops at the first mismatch.
template <class Queue>
totals run(clock::duration tick, std::uint64_t first, std::uint64_t seeds, std::uint64_t ops,
                  const std::vector<std::uint32_t>& pools) {
  totals total;
  const char* only = std::getenv("COGWHEEL_TEST_SEED");
  for (std::uint64_t i = 0; i < seeds; ++i) {
    const std::uint64_t seed = only != nullptr ? std::strtoull(only, nullptr, 0) : first + i;
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with COGWHEEL_TEST_SEED=" +
                 std::to_string(seed) + ")");
    prng_source src(seed);
    const driver_settings settings = draw_settings(src, tick, pools);
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
  return total;
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
}

class differential : public ::testing::TestWithParam<param> {};

// Long streams over pools of up to a few thousand nodes: 2.5 million operations per queue and
// tick at scale 1.
TEST_P(differential, long_random_streams_fire_exactly_what_the_model_says_is_due) {
  const param& p = GetParam();
  const totals t = on_kind(p.kind, [&]<class Q>() {
    return run<Q>(p.tick, 1000, 25, scaled(100'000), {64, 512, 4096});
  });
  report(p, t);
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
                                           param{timer_kind::heap, 1ms, "heap_1ms"},
                                           param{timer_kind::heap, 100us, "heap_100us"}),
                         param_name);

}  // namespace
