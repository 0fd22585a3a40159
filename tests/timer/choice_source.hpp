// Where the differential driver's choices come from (a PRNG for the test, the fuzzer's bytes for
// the fuzz target) and the run settings drawn from them: a start time, a pool size and an
// operation mix. Used by differential_model.hpp.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include <cogwheel/timer/ticks.hpp>

#include "reference_model.hpp"

namespace cogwheel::timer::testing {

// Choices from a splitmix64 generator: deterministic per seed, never exhausted.
class prng_source {
 public:
  explicit prng_source(std::uint64_t seed) noexcept : state_(seed) {}
  // A uniform value of k bits (k <= 64).
  std::uint64_t bits(unsigned k) noexcept { return k == 0 ? 0 : next() >> (64 - k); }
  // A value in [0, n) (n >= 1; Lemire's multiply, bias negligible for testing).
  std::uint64_t below(std::uint64_t n) noexcept {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }
  bool exhausted() const noexcept { return false; }

 private:
  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint64_t state_;
};

// Choices from a byte string (fuzzer input), taking as few bytes as each choice needs. Once the
// bytes run out every choice is 0 and exhausted() is true.
class byte_source {
 public:
  byte_source(const std::uint8_t* data, std::size_t size) noexcept : data_(data), size_(size) {}
  std::uint64_t bits(unsigned k) noexcept {
    const std::uint64_t v = take((k + 7) / 8);
    return k >= 64 ? v : v & ((std::uint64_t{1} << k) - 1);
  }
  std::uint64_t below(std::uint64_t n) noexcept {
    if (n <= 1) return 0;
    return take((static_cast<unsigned>(std::bit_width(n - 1)) + 7) / 8) % n;
  }
  bool exhausted() const noexcept { return pos_ >= size_; }

 private:
  std::uint64_t take(unsigned bytes) noexcept {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i) v = (v << 8) | (pos_ < size_ ? data_[pos_++] : 0u);
    return v;
  }
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

struct driver_settings {
  clock::duration tick = std::chrono::milliseconds(1);
  clock::time_point start{};
  std::uint32_t nodes = 1024;
  // The operation mix: advance() in permille of all operations; the rest split by weight.
  unsigned advance_permille = 250;
  unsigned schedule_weight = 8, cancel_weight = 5, reschedule_weight = 7;
  unsigned jump_permille = 60;  // of advances: jumps of up to a century
  // Of all operations: a burst of 257..512 cancels of pending (filed) nodes, then 257..512
  // schedules, with no advance in between, so the cancel log and the staging area fill up.
  unsigned burst_permille = 0;
  // No choice depends on the queue (advances aim at the model's earliest deadline, not the
  // queue's next_deadline()), so a wheel and a heap driven by equal sources see one stream.
  bool lockstep = false;
  // timer_wheel::set_visit_min_live: the pools here are small, so most runs lower it.
  std::uint32_t visit_min_live = 512;
  // timer_wheel::set_requeue_min_size: 1 (a replaced timeout goes back into its entry, the
  // large-wheel path) or the default (filed at once, the small-wheel path: file_now()).
  std::size_t requeue_min_size = 1;
};

// Draws a start time, a pool size among `pool_sizes` and an operation mix.
template <class Source>
driver_settings draw_settings(Source& src, clock::duration tick,
                              const std::vector<std::uint32_t>& pool_sizes) {
  struct mix {
    unsigned advance, schedule, cancel, reschedule, jump;
  };
  static constexpr mix mixes[] = {
      {250, 8, 5, 7, 60},   // balanced
      {40, 16, 1, 3, 2},    // filling up: thousands pending, rare jumps
      {150, 4, 8, 8, 30},   // churn
      {700, 8, 5, 7, 20},   // advance-heavy: time moves in small steps
      {250, 3, 2, 15, 10},  // reschedule-heavy
  };
  driver_settings s;
  s.tick = tick;
  s.nodes = pool_sizes[src.below(pool_sizes.size())];
  const mix& m = mixes[src.below(std::size(mixes))];
  s.advance_permille = m.advance;
  s.schedule_weight = m.schedule;
  s.cancel_weight = m.cancel;
  s.reschedule_weight = m.reschedule;
  s.jump_permille = m.jump;
  static constexpr std::uint32_t visit_thresholds[] = {1, 4, 16, 512};
  s.visit_min_live = visit_thresholds[src.below(std::size(visit_thresholds))];
  s.requeue_min_size = src.below(2) == 0 ? 1 : std::size_t{1} << 18;
  switch (src.below(6)) {
    case 0: s.start = at(0); break;
    case 1: s.start = at(-static_cast<ns_t>(src.bits(40))); break;           // before the epoch
    case 2: s.start = at(static_cast<ns_t>(src.bits(src.below(63)))); break;  // up to 146 years
    case 3: s.start = at(ns_max - static_cast<ns_t>(src.bits(42))); break;    // near the end
    default: s.start = at(static_cast<ns_t>(src.bits(52))); break;            // days of uptime
  }
  return s;
}

}  // namespace cogwheel::timer::testing
