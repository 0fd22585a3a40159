// <cogwheel/runtime/stop.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/stop.hpp>

#include <gtest/gtest.h>

#include <type_traits>

TEST(header_selfcontained, stop_hpp_needs_no_other_include) {
  EXPECT_TRUE(std::is_class_v<cogwheel::stop_requested_awaiter>);
}
