// spawn and run: detached tasks run (in the order spawned, from the next iteration), an
// exception escaping one is reported and counted but stops nothing, run() returns the main
// task's value or rethrows its exception, and tasks still pending when run() returns are
// destroyed.
#include <cogwheel/runtime/spawn.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <cogwheel/runtime/runtime.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/task.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

TEST(spawn, spawned_tasks_run_in_spawn_order) {
  std::vector<int> order;
  run([](std::vector<int>& out) -> task<> {
    for (int i = 0; i < 5; ++i) spawn([](std::vector<int>& o, int id) -> task<> {
      o.push_back(id);
      co_return;
    }(out, i));
    co_await yield();
  }(order));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(spawn, spawned_task_starts_at_the_next_iteration_not_inline) {
  run([]() -> task<> {
    bool ran = false;
    spawn([](bool& r) -> task<> {
      r = true;
      co_return;
    }(ran));
    EXPECT_FALSE(ran);
    co_await yield();
    EXPECT_TRUE(ran);
  }());
}

TEST(spawn, spawned_tasks_can_spawn_and_sleep) {
  int finished = 0;
  run([](int& n) -> task<> {
    spawn([](int& n) -> task<> {
      for (int i = 0; i < 3; ++i) spawn([](int& n, int i) -> task<> {
        co_await sleep_for(i * 10ms);
        ++n;
      }(n, i));
      co_return;
    }(n));
    co_await sleep_for(50ms);
  }(finished), test::paused());
  EXPECT_EQ(finished, 3);
}

TEST(spawn, exception_escaping_a_spawned_task_is_reported_and_counted_and_the_loop_carries_on) {
  testing::internal::CaptureStderr();
  const auto [failures, later_ran] = run([]() -> task<std::pair<std::uint64_t, bool>> {
    spawn([]() -> task<> {
      co_await sleep_for(1ms);
      throw std::runtime_error("spawned and failed");
    }());
    bool ran = false;
    co_await sleep_for(5ms);
    spawn([](bool& r) -> task<> {
      r = true;
      co_return;
    }(ran));
    co_await sleep_for(5ms);
    co_return std::pair{this_core_metrics().spawn_failures, ran};
  }(), test::paused());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(failures, 1u);
  EXPECT_TRUE(later_ran);
  EXPECT_NE(err.find("spawned and failed"), std::string::npos) << err;
  EXPECT_NE(err.find("runtime_error"), std::string::npos) << err;
}

TEST(spawn, exception_of_a_non_standard_type_is_reported_too) {
  testing::internal::CaptureStderr();
  const std::uint64_t failures = run([]() -> task<std::uint64_t> {
    spawn([]() -> task<> {
      throw 42;
      co_return;
    }());
    co_await yield();
    co_return this_core_metrics().spawn_failures;
  }());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(failures, 1u);
  EXPECT_NE(err.find("non-std"), std::string::npos) << err;
}

TEST(spawn, outside_a_loop_aborts_with_a_clear_message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(spawn([]() -> task<> { co_return; }()), "runs no cogwheel loop");
}

TEST(run, returns_the_main_task_value) {
  EXPECT_EQ(run([]() -> task<int> {
              co_await sleep_for(1ms);
              co_return 17;
            }(),
            test::paused()),
            17);
  EXPECT_EQ(run([]() -> task<std::string> { co_return "text"; }()), "text");
}

TEST(run, rethrows_the_main_task_exception) {
  EXPECT_THROW(run([]() -> task<int> {
                 co_await sleep_for(1ms);
                 throw std::out_of_range("main");
               }(),
               test::paused()),
               std::out_of_range);
}

TEST(run, runs_as_core_zero) {
  EXPECT_EQ(run([]() -> task<unsigned> { co_return this_core(); }()), 0u);
}

TEST(run, can_run_again_on_the_same_thread) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(run([](int v) -> task<int> { co_return v; }(i)), i);
}

TEST(run, nested_run_on_the_same_thread_is_a_logic_error) {
  run([]() -> task<> {
    EXPECT_THROW(run([]() -> task<> { co_return; }()), std::logic_error);
    co_return;
  }());
}

TEST(run, pending_spawned_tasks_are_destroyed_when_it_returns) {
  bool sleeping = false, yielding = false, unstarted = false;
  run([](bool& s, bool& y, bool& u) -> task<> {
    spawn([](test::destroy_probe) -> task<> { co_await sleep_for(1h); }(test::destroy_probe(s)));
    spawn([](test::destroy_probe) -> task<> {
      for (;;) co_await yield();
    }(test::destroy_probe(y)));
    co_await yield();
    // Spawned last, never started: destroyed all the same.
    spawn([](test::destroy_probe) -> task<> { co_return; }(test::destroy_probe(u)));
    EXPECT_FALSE(s || y || u);
  }(sleeping, yielding, unstarted), test::paused());
  EXPECT_TRUE(sleeping);
  EXPECT_TRUE(yielding);
  EXPECT_TRUE(unstarted);
}

}  // namespace
}  // namespace cogwheel
