// <cogwheel/runtime/options.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/options.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, options_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::runtime_options{}.tick, std::chrono::milliseconds(1));
}
