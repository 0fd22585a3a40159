// <cogwheel/runtime/channel.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/channel.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, channel_hpp_needs_no_other_include) {
  cogwheel::channel<int> ch(1);
  int v = 1;
  EXPECT_TRUE(ch.try_send(v));
  EXPECT_EQ(ch.try_receive(), 1);
}
