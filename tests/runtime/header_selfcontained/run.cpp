// <cogwheel/runtime/run.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/run.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, run_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::run([]() -> cogwheel::task<int> { co_return 3; }()), 3);
}
