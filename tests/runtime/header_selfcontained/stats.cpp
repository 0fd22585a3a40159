// <cogwheel/runtime/stats.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/stats.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, stats_hpp_needs_no_other_include) {
  cogwheel::core_metrics c;
  EXPECT_EQ(c.iterations, 0u);
}
