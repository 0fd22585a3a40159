// <cogwheel/timer/detail/cancel_log.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/detail/cancel_log.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, cancel_log_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::timer::detail::cancel_log::capacity, 256u);
}
