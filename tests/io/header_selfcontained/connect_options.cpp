// <cogwheel/io/connect_options.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/io/connect_options.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, connect_options_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::connect_options{}.attempt_delay, std::chrono::milliseconds(250));
}
