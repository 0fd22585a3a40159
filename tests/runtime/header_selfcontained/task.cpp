// <cogwheel/runtime/task.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/task.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, task_hpp_needs_no_other_include) {
  EXPECT_FALSE(cogwheel::task<int>().valid());
}
