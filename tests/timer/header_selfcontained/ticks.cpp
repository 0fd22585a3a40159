// <cogwheel/timer/ticks.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/ticks.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, ticks_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::timer::tick_scale(std::chrono::milliseconds(1)).now_tick({}), 0u);
}
