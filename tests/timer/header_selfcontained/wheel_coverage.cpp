// <cogwheel/timer/detail/wheel_coverage.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/detail/wheel_coverage.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, wheel_coverage_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::timer::detail::wheel_coverage{}.lazy_pushes, 0u);
}
