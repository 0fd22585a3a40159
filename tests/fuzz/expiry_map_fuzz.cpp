// libFuzzer target: the input bytes choose a timer queue (wheel or heap) and a tick, then every
// operation of tests/runtime/expiry_map_model.hpp's driver (insert, move earlier or later,
// persist, erase, find, expiry, advance), played on an expiry_map inside a paused-clock runtime
// and on the reference model. Any mismatch prints it and aborts.
//
// Build (clang only): cmake -DCMAKE_CXX_COMPILER=clang++-16 -DCOGWHEEL_FUZZ=ON, target
// expiry_map_fuzz. Run: build/tests/fuzz/expiry_map_fuzz -max_total_time=30 corpus/
#include "expiry_map_model.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <cogwheel/runtime/options.hpp>
#include <cogwheel/runtime/run.hpp>

namespace {

using namespace std::chrono_literals;

// Numbers drawn from the input, little-endian, 0 once it is used up.
class bytes {
 public:
  bytes(const std::uint8_t* data, std::size_t size) noexcept : data_(data), size_(size) {}
  std::uint64_t below(std::uint64_t n) noexcept {
    std::uint64_t v = 0;
    for (std::uint64_t range = 1; range < n && at_ < size_; range <<= 8) v = (v << 8) | data_[at_++];
    return n == 0 ? 0 : v % n;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bytes src(data, size);
  cogwheel::runtime_options options;
  options.paused_clock = true;
  options.backend = cogwheel::backend_kind::epoll;  // cheaper to set up per input than a ring
  options.timers = src.below(2) == 0 ? cogwheel::timer_kind::wheel : cogwheel::timer_kind::heap;
  const cogwheel::clock::duration ticks[] = {1ms, 100us, 1us, 7919ns};
  const cogwheel::clock::duration tick = ticks[src.below(4)];
  options.tick = tick;
  const int rounds = static_cast<int>(size / 3 + 1 < 300 ? size / 3 + 1 : 300);
  const std::string failure = cogwheel::run(
      cogwheel::test::play_against_model([&](std::uint64_t n) { return src.below(n); }, rounds, tick), options);
  if (!failure.empty()) {
    std::fprintf(stderr, "expiry_map_fuzz: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
