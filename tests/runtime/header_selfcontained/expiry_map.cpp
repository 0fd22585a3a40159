// <cogwheel/runtime/expiry_map.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/expiry_map.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, expiry_map_hpp_needs_no_other_include) {
  EXPECT_TRUE((std::is_same_v<cogwheel::expiry_map<int, int>::batch, std::vector<std::pair<int, int>>>));
}
