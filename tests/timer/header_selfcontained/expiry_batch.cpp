// <cogwheel/timer/detail/expiry_batch.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/detail/expiry_batch.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, expiry_batch_hpp_needs_no_other_include) {
  cogwheel::timer::detail::expiry_batch b;
  EXPECT_TRUE(b.empty());
}
