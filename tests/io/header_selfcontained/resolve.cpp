// <cogwheel/io/resolve.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/io/resolve.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, resolve_hpp_needs_no_other_include) {
  const std::error_code e = cogwheel::resolve_errc::no_answer;
  EXPECT_EQ(e, std::errc::timed_out);
}
