// <cogwheel/timer/heap.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/heap.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, heap_hpp_needs_no_other_include) {
  cogwheel::timer::timer_heap h;
  EXPECT_TRUE(h.empty());
}
