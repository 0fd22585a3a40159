// <cogwheel/runtime/semaphore.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/semaphore.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, semaphore_hpp_needs_no_other_include) {
  cogwheel::semaphore s(1);
  EXPECT_TRUE(s.try_acquire().has_value());
}
