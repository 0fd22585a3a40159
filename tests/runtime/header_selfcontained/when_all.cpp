// <cogwheel/runtime/when_all.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/when_all.hpp>

#include <gtest/gtest.h>

#include <type_traits>

TEST(header_selfcontained, when_all_hpp_needs_no_other_include) {
  EXPECT_TRUE(std::is_class_v<cogwheel::detail::when_all_latch>);
}
