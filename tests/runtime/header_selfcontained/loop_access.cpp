// <cogwheel/runtime/detail/loop_access.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/detail/loop_access.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, loop_access_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::detail::current_loop_if_any(), nullptr);
}
