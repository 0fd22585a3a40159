// <cogwheel/io/udp.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/io/udp.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, udp_hpp_needs_no_other_include) {
  cogwheel::udp_socket s;
  EXPECT_FALSE(s.is_open());
}
