// <cogwheel/runtime/operation.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/runtime/operation.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, operation_hpp_needs_no_other_include) {
  EXPECT_FALSE((cogwheel::cancellable_operation<int>));
}
