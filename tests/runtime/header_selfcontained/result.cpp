// <cogwheel/runtime/result.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/result.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, result_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::result<int>(cogwheel::errc::timed_out).error(), cogwheel::errc::timed_out);
}
