// <cogwheel/runtime/interval.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/interval.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, interval_hpp_needs_no_other_include) {
  EXPECT_TRUE((std::is_constructible_v<cogwheel::interval, cogwheel::clock::duration>));
}
