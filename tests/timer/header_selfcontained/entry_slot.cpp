// <cogwheel/timer/detail/entry_slot.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/detail/entry_slot.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, entry_slot_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::timer::detail::block_entries, 256u);
}
