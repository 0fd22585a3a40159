// The stall detector: an iteration that keeps the core busy past the threshold (25 ms by
// default) is counted and said on stderr once per burst, with what it did; a loop that is busy
// but yields often stays quiet; a threshold of 0 turns it off.
#include <cogwheel/runtime/metrics.hpp>

#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <string>

#include <cogwheel/runtime/run.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

std::chrono::nanoseconds thread_cpu() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Keeps the thread on the CPU until it has used d of it (what a long computation in a
// coroutine does; counted in CPU time, so a machine busy with other work does not shorten it).
void spin(std::chrono::nanoseconds d) {
  const auto end = thread_cpu() + d;
  while (thread_cpu() < end) {
  }
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(stall_detector, a_50_ms_busy_iteration_is_counted_and_reported_with_what_it_did) {
  testing::internal::CaptureStderr();
  const std::uint64_t stalls = run([]() -> task<std::uint64_t> {
    co_await sleep_for(1ms);  // the timer fires in the iteration that then spins
    spin(50ms);
    co_await sleep_for(1ms);  // (a yield here would resume in the same iteration, before its end)
    co_return this_core_metrics().stalls;
  }());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(stalls, 1u);
  EXPECT_EQ(occurrences(err, "stalled"), 1u) << err;
  EXPECT_NE(err.find("1 timers fired"), std::string::npos) << err;
}

TEST(stall_detector, a_burst_of_stalled_iterations_is_said_once_and_each_counted) {
  testing::internal::CaptureStderr();
  const std::uint64_t stalls = run([]() -> task<std::uint64_t> {
    co_await sleep_for(1ms);  // inside the loop's iterations from here on
    co_await yield();  // resumed in the tasks phase: each yield below then ends an iteration
    for (int i = 0; i < 3; ++i) {
      spin(30ms);
      co_await yield();
    }
    co_await sleep_for(1ms);  // a quiet iteration ends the burst
    spin(30ms);
    co_await sleep_for(1ms);
    co_return this_core_metrics().stalls;
  }());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(stalls, 4u);
  EXPECT_EQ(occurrences(err, "stalled"), 2u) << err;
}

TEST(stall_detector, a_busy_loop_that_yields_every_millisecond_stays_quiet) {
  testing::internal::CaptureStderr();
  const std::uint64_t stalls = run([]() -> task<std::uint64_t> {
    for (int i = 0; i < 200; ++i) {
      spin(1ms);
      co_await yield();
    }
    co_return this_core_metrics().stalls;
  }());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(stalls, 0u);
  EXPECT_EQ(err.find("stalled"), std::string::npos) << err;
}

TEST(stall_detector, a_threshold_of_zero_turns_it_off) {
  testing::internal::CaptureStderr();
  runtime_options o;
  o.stall_threshold = clock::duration::zero();
  const std::uint64_t stalls = run(
      []() -> task<std::uint64_t> {
        spin(50ms);
        co_await sleep_for(1ms);
        co_return this_core_metrics().stalls;
      }(),
      o);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(stalls, 0u);
  EXPECT_EQ(err.find("stalled"), std::string::npos) << err;
}

}  // namespace
}  // namespace cogwheel
