// <cogwheel/runtime/runtime.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/runtime.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, runtime_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::runtime(cogwheel::runtime_options{.cores = 3}).cores(), 3u);
}
