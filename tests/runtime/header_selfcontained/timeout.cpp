// <cogwheel/runtime/timeout.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/timeout.hpp>

#include <gtest/gtest.h>

#include <type_traits>

TEST(header_selfcontained, timeout_hpp_needs_no_other_include) {
  EXPECT_TRUE((std::is_same_v<cogwheel::detail::timeout_result<cogwheel::result<int>>::type, cogwheel::result<int>>));
}
