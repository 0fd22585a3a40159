// <cogwheel/runtime/detail/event_loop.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/detail/event_loop.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, event_loop_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::detail::event_loop::current(), nullptr);
}
