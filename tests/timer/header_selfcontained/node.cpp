// <cogwheel/timer/node.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/node.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, node_hpp_needs_no_other_include) {
  cogwheel::timer::timer_node n;
  EXPECT_FALSE(n.scheduled());
}
