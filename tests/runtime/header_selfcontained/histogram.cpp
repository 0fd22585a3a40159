// <cogwheel/runtime/histogram.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/histogram.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, histogram_hpp_needs_no_other_include) {
  cogwheel::histogram h;
  EXPECT_EQ(h.count(), 0u);
}
