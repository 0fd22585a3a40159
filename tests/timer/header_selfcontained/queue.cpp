// <cogwheel/timer/queue.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/queue.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, queue_hpp_needs_no_other_include) {
  cogwheel::timer::timer_queue q(cogwheel::timer::timer_kind::heap);
  EXPECT_EQ(q.kind(), cogwheel::timer::timer_kind::heap);
}
