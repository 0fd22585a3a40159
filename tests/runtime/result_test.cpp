// result<T>: the expected-like carrier of docs/contract.md (sections 1 and 2).
#include <cogwheel/runtime/result.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <system_error>

namespace {

using cogwheel::bad_result_access;
using cogwheel::errc;
using cogwheel::result;

TEST(result, a_value_converts_to_true_and_is_read_through_star_arrow_and_value) {
  result<std::string> r(std::string("hello"));
  EXPECT_TRUE(r.has_value());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(*r, "hello");
  EXPECT_EQ(r->size(), 5u);
  EXPECT_EQ(r.value(), "hello");
  EXPECT_FALSE(r.error());
  r->append("!");
  EXPECT_EQ(*r, "hello!");
  const std::string moved = std::move(r).value();
  EXPECT_EQ(moved, "hello!");
}

TEST(result, an_error_converts_to_false_and_value_throws_bad_result_access_with_the_code) {
  result<int> r(errc::timed_out);
  EXPECT_FALSE(r.has_value());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.error(), errc::timed_out);
  EXPECT_EQ(r.value_or(7), 7);
  try {
    (void)r.value();
    FAIL() << "value() of an error must throw";
  } catch (const bad_result_access& e) {
    EXPECT_EQ(e.code(), errc::timed_out);
  }
  static_assert(!std::is_convertible_v<result<int>, bool>, "operator bool is explicit");
}

TEST(result, an_empty_error_code_is_rejected_for_a_value_result_and_means_success_for_void) {
  EXPECT_THROW((void)result<int>(std::error_code{}), std::invalid_argument);
  result<void> ok(std::error_code{});
  EXPECT_TRUE(ok.has_value());
  EXPECT_NO_THROW(ok.value());
  result<void> failed(errc::connection_reset);
  EXPECT_FALSE(failed);
  EXPECT_THROW(failed.value(), bad_result_access);
}

}  // namespace
