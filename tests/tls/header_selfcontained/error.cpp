// <cogwheel/tls/error.hpp> compiles on its own, and its codes name their category.
#include <cogwheel/tls/error.hpp>

#include <gtest/gtest.h>

TEST(header_selfcontained, tls_error_hpp_needs_no_other_include) {
  std::error_code ec = cogwheel::tls::error::name_mismatch;
  EXPECT_STREQ(ec.category().name(), "cogwheel.tls");
  EXPECT_NE(ec.message().find("name"), std::string::npos);
}
