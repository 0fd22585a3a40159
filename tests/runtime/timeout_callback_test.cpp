// with_timeout over 256 operation types: the timers of every awaiter type share one expiry
// callback. In a file of its own because its 256 instantiations are most of the compile time
// of the with_timeout tests (timeout_test.cpp), and one big file is the tail of a parallel build.
// On a paused clock: the test takes no real time.
#include <cogwheel/runtime/timeout.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <utility>
#include <vector>

#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/task.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

void run_paused(task<> t) { run(std::move(t), test::paused()); }

// A sleep whose type is its own for each I: with_timeout instantiates one awaiter type per I.
template <int I>
struct sleep_of_type : sleep_operation {
  explicit sleep_of_type(clock::time_point t) noexcept : sleep_operation(t) {}
};
template <int I>
task<bool> times_out() {
  auto r = co_await with_timeout(sleep_of_type<I>(clock::time_point::max()), 1ms);
  co_return !r.has_value() && r.error() == errc::timed_out;
}
template <int... I>
task<int> time_out_each(std::integer_sequence<int, I...>) {
  std::vector<task<bool>> each;
  (each.push_back(times_out<I>()), ...);
  int timed_out = 0;
  for (task<bool>& t : each) timed_out += co_await std::move(t) ? 1 : 0;
  co_return timed_out;
}

// A timer names its expiry callback by a 1-byte index into a process-wide table of 255
// (timer/node.hpp): the awaiters of every operation type share one callback, so a program that
// puts 256 types under timeouts neither runs out of entries nor aborts.
TEST(with_timeout, 256_operation_types_under_timeouts_share_one_timer_callback) {
  run_paused([]() -> task<> {
    EXPECT_EQ(co_await time_out_each(std::make_integer_sequence<int, 256>{}), 256);
    EXPECT_EQ(pending_timers(), 0u);
  }());
}

}  // namespace
}  // namespace cogwheel
