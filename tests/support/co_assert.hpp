// Shared by every test directory: assertions usable inside coroutines, and the scaling of big
// counts for slow (sanitized) builds.
#pragma once

#include <cstdlib>

#include <gtest/gtest.h>

// ASSERT_* `return`s, which a coroutine cannot: these record the failure and co_return from a
// task<void>.
#define CO_ASSERT_TRUE(cond)                    \
  do {                                          \
    if (!(cond)) {                              \
      ADD_FAILURE() << "expected true: " #cond; \
      co_return;                                \
    }                                           \
  } while (0)

// `res` is a result<T>; on an error, reports it by message.
#define CO_ASSERT_OK(res)                                           \
  do {                                                              \
    if (!(res)) {                                                   \
      ADD_FAILURE() << #res " failed: " << (res).error().message(); \
      co_return;                                                    \
    }                                                               \
  } while (0)

namespace cogwheel::test_support {

// n times COGWHEEL_TEST_SCALE (CI sets 0.1 for sanitizer builds), never below `floor`, so that
// a scaled test still tests something.
template <class N>
N scaled(N n, N floor = 1) {
  double scale = 1.0;
  if (const char* s = std::getenv("COGWHEEL_TEST_SCALE")) scale = std::atof(s);
  if (scale <= 0) scale = 1.0;
  const auto v = static_cast<N>(static_cast<double>(n) * scale);
  if (v >= floor) return v;
  return n < floor ? n : floor;
}

}  // namespace cogwheel::test_support
