// <cogwheel/runtime/when_any.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/when_any.hpp>

#include <gtest/gtest.h>

#include <type_traits>

TEST(header_selfcontained, when_any_hpp_needs_no_other_include) {
  EXPECT_TRUE(std::is_class_v<cogwheel::when_any_result<int>>);
}
