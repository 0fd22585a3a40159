// <cogwheel/runtime/deadline.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/deadline.hpp>

#include <gtest/gtest.h>

#include <type_traits>

TEST(header_selfcontained, deadline_hpp_needs_no_other_include) {
  EXPECT_TRUE(std::is_class_v<cogwheel::deadline>);
}
