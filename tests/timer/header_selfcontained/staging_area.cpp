// <cogwheel/timer/detail/staging_area.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/detail/staging_area.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, staging_area_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::timer::detail::staging_area::capacity, 256u);
}
