// Which backend the tests' loops run on. CI runs the runtime and io suites twice, the second
// time with COGWHEEL_BACKEND=epoll; a test of something only io_uring has (a ring's SQ and CQ,
// injected io_uring_submit faults) is then reported skipped.
#pragma once

#include <cstdlib>
#include <string_view>

#include <gtest/gtest.h>

namespace test_support {

inline bool testing_epoll() {
  const char* backend = std::getenv("COGWHEEL_BACKEND");
  return backend != nullptr && std::string_view(backend) == "epoll";
}

}  // namespace test_support

#define SKIP_UNLESS_IO_URING()          \
  if (!::test_support::testing_epoll()) \
    ;                                   \
  else                                  \
    GTEST_SKIP() << "tests io_uring's ring; this run is on epoll (COGWHEEL_BACKEND=epoll)"
