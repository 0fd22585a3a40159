// <cogwheel/runtime/prometheus.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/prometheus.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, prometheus_hpp_needs_no_other_include) {
  EXPECT_TRUE(cogwheel::to_prometheus(cogwheel::metrics_snapshot{}).empty());
}
