// <cogwheel/tls/context.hpp> compiles on its own: it is this file's first include.
#include <cogwheel/tls/context.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, tls_context_hpp_needs_no_other_include) {
  cogwheel::tls::context c;
  EXPECT_FALSE(c);
}
