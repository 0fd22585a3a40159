// <cogwheel/timer/wheel.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/wheel.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, wheel_hpp_needs_no_other_include) {
  cogwheel::timer::timer_wheel w;
  EXPECT_TRUE(w.empty());
}
