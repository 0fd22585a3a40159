// <cogwheel/runtime/detail/posting_timer.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/detail/posting_timer.hpp>

#include <gtest/gtest.h>

#include <type_traits>

TEST(header_selfcontained, posting_timer_hpp_needs_no_other_include) {
  EXPECT_TRUE((std::is_base_of_v<cogwheel::timer::timer_node, cogwheel::detail::posting_timer>));
}
