// <cogwheel/runtime/continuation.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/continuation.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, continuation_hpp_needs_no_other_include) {
  EXPECT_FALSE(cogwheel::detail::stop_source().stop_requested());
}
