// <cogwheel/runtime/sleep.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/sleep.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, sleep_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::sleep_until({}).deadline(), cogwheel::clock::time_point{});
}
