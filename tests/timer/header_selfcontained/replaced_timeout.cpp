// <cogwheel/timer/detail/replaced_timeout.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/detail/replaced_timeout.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, replaced_timeout_hpp_needs_no_other_include) {
  cogwheel::timer::timer_wheel wheel;
  EXPECT_TRUE(wheel.empty());
}
