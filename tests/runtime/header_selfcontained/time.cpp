// <cogwheel/runtime/time.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/time.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, time_hpp_needs_no_other_include) {
  const auto ours = cogwheel::now();  // outside a loop: the real clock
  const auto real = cogwheel::clock::now();
  EXPECT_LE(ours, real);
}
