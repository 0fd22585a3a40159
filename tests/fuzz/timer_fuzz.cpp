// libFuzzer target: decodes the input bytes into an operation stream (tick, start time, pool
// size, operation mix, then schedule / cancel / reschedule / advance with their arguments) and
// runs it on timer_wheel and on timer_heap, each against the reference model of
// tests/timer/differential_model.hpp, the same model and operations as differential_test.cpp.
// Any mismatch prints the latest operations and aborts.
//
// Build (clang only): cmake -DCMAKE_CXX_COMPILER=clang++-16 -DCOGWHEEL_FUZZ=ON, target timer_fuzz.
// Run: build/tests/fuzz/timer_fuzz -max_total_time=60 corpus/
#include "differential_model.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using namespace cogwheel::timer;
using namespace cogwheel::timer::testing;
using namespace std::chrono_literals;

// The required ticks first, then odd ones: one nanosecond (no rounding), divisors that are not
// powers of ten, and a coarse one.
const clock::duration ticks[] = {1ms, 100us, 1ns, 3ns, 1us, 1ms + 1ns, 7919ns, 1s};
// Small pools, so operations and callbacks keep meeting the same nodes.
const std::vector<std::uint32_t> pools = {4, 16, 64, 256};

template <class Queue>
void run(const std::uint8_t* data, std::size_t size) {
  byte_source src(data, size);
  const clock::duration tick = ticks[src.below(std::size(ticks))];
  differential_driver<Queue> driver(draw_settings(src, tick, pools));
  bool ok = true;
  while (ok && !src.exhausted()) ok = driver.step(src);
  if (ok) ok = driver.finish();
  if (!ok) {
    std::fprintf(stderr, "timer_fuzz: %s\n", driver.failure().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  run<timer_wheel>(data, size);
  run<timer_heap>(data, size);
  return 0;
}
