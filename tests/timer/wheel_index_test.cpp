#include <cogwheel/timer/detail/wheel_index.hpp>

#include <gtest/gtest.h>

#include <cstdint>

namespace {

using namespace cogwheel::timer::detail;

TEST(wheel_index, level_is_that_of_the_highest_differing_bit) {
  EXPECT_EQ(level_for(0, 1), 0u);
  EXPECT_EQ(level_for(0, 63), 0u);
  EXPECT_EQ(level_for(0, 64), 1u);
  EXPECT_EQ(level_for(100, 101), 0u);
  EXPECT_EQ(level_for(63, 64), 1u);  // adjacent ticks across a level-0 span boundary
  EXPECT_EQ(level_for(4095, 4096), 2u);
  for (unsigned bit = 0; bit < 64; ++bit)
    EXPECT_EQ(level_for(0, std::uint64_t{1} << bit), bit / slot_bits) << "bit " << bit;
}

TEST(wheel_index, slot_is_the_six_bits_of_the_level) {
  EXPECT_EQ(slot_for(0x3f, 0), 63u);
  EXPECT_EQ(slot_for(0x40, 0), 0u);
  EXPECT_EQ(slot_for(0x40, 1), 1u);
  EXPECT_EQ(slot_for(~std::uint64_t{0}, 10), 15u);  // the top level uses 16 slots
}

TEST(wheel_index, level_start_clears_the_bits_below_the_level_span) {
  EXPECT_EQ(level_start(130, 0), 128u);
  EXPECT_EQ(level_start(5000, 1), 4096u);
  EXPECT_EQ(level_start(12345, 10), 0u);
  EXPECT_EQ(slot_span(0), 1u);
  EXPECT_EQ(slot_span(2), 4096u);
}

TEST(wheel_index, a_deadline_filed_at_a_level_lies_in_a_later_slot_of_the_same_span) {
  // The wheel's invariant: filing `when` relative to `elapsed` never lands behind elapsed.
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 100000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const std::uint64_t elapsed = x >> (x & 63);
    const std::uint64_t when = elapsed + 1 + ((x * 0x2545f4914f6cdd1dull) >> (x % 64));
    if (when <= elapsed) continue;  // wrapped
    const unsigned level = level_for(elapsed, when);
    EXPECT_GT(slot_for(when, level), slot_for(elapsed, level));
    EXPECT_EQ(level_start(elapsed, level), level_start(when, level));
  }
}

}  // namespace
