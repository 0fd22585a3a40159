// <cogwheel/runtime/event.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/event.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, event_hpp_needs_no_other_include) {
  cogwheel::event e;
  e.set();
  EXPECT_TRUE(e.is_set());
}
