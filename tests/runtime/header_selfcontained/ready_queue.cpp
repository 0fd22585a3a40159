// <cogwheel/runtime/detail/ready_queue.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/detail/ready_queue.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, ready_queue_hpp_needs_no_other_include) {
  EXPECT_TRUE(cogwheel::detail::ready_queue().empty());
}
