// <cogwheel/runtime/spawn.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/spawn.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, spawn_hpp_needs_no_other_include) {
  void (*f)(cogwheel::task<void>) = &cogwheel::spawn;
  EXPECT_NE(f, nullptr);
}
