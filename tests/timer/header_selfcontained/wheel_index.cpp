// <cogwheel/timer/detail/wheel_index.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/detail/wheel_index.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, wheel_index_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::timer::detail::level_count, 11u);
}
