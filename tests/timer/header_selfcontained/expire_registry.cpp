// <cogwheel/timer/detail/expire_registry.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/timer/detail/expire_registry.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, expire_registry_hpp_needs_no_other_include) {
  EXPECT_EQ(cogwheel::timer::detail::register_expire_callback(nullptr), 0);
  EXPECT_EQ(cogwheel::timer::detail::expire_callback_at(0), nullptr);
}
