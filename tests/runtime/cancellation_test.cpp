// Cancellation by destruction: a coroutine frame destroyed while suspended takes its timers with
// it (RAII in the awaiters), whatever it was suspended on, so nothing dangles in the timer queue
// or the ready queue. Frames still suspended when run() returns are destroyed the same way
// (the sanitizer builds check that nothing leaks and nothing is touched after it is freed).
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/interval.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>
#include <cogwheel/runtime/when_all.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

// Starts t without awaiting it (as the runtime's own drivers do), so the test can destroy its
// frame while it is suspended.
template <class T>
void start_detached_from_awaiter(task<T>& t) {
  t.start(detail::continuation(), nullptr).resume();
}

TEST(cancellation, destroying_a_frame_suspended_in_a_sleep_removes_its_timer) {
  run([]() -> task<> {
    bool destroyed = false;
    bool resumed = false;
    auto sleeper = [](test::destroy_probe, bool& r) -> task<> {
      co_await sleep_for(1h);
      r = true;
    };
    task<> t = sleeper(test::destroy_probe(destroyed), resumed);
    start_detached_from_awaiter(t);
    EXPECT_EQ(pending_timers(), 1u);
    t = {};
    EXPECT_TRUE(destroyed);
    EXPECT_EQ(pending_timers(), 0u);
    co_await sleep_for(5ms);  // the loop goes on without it
    EXPECT_FALSE(resumed);
  }(), test::paused());
}

TEST(cancellation, destroying_a_frame_suspended_under_a_timeout_removes_both_timers) {
  run([]() -> task<> {
    auto waiter = []() -> task<> { (void)co_await with_timeout(sleep_for(1h), 10min); };
    task<> t = waiter();
    start_detached_from_awaiter(t);
    EXPECT_EQ(pending_timers(), 2u);  // the sleep's and the timeout's
    t = {};
    EXPECT_EQ(pending_timers(), 0u);
    co_return;
  }(), test::paused());
}

TEST(cancellation, destroying_a_frame_suspended_on_a_task_under_a_timeout_removes_every_timer) {
  run([]() -> task<> {
    bool inner_destroyed = false;
    auto inner = [](test::destroy_probe) -> task<int> {
      co_await sleep_for(1h);
      co_return 1;
    };
    auto outer = [&]() -> task<> { (void)co_await with_timeout(inner(test::destroy_probe(inner_destroyed)), 10min); };
    task<> t = outer();
    start_detached_from_awaiter(t);
    EXPECT_EQ(pending_timers(), 2u);
    t = {};
    EXPECT_TRUE(inner_destroyed);
    EXPECT_EQ(pending_timers(), 0u);
    co_return;
  }(), test::paused());
}

TEST(cancellation, destroying_a_frame_suspended_on_a_deadline_removes_its_timers) {
  run([]() -> task<> {
    auto waiter = []() -> task<> {
      deadline d(1h);
      (void)co_await with_deadline(sleep_for(2h), d);
    };
    task<> t = waiter();
    start_detached_from_awaiter(t);
    EXPECT_EQ(pending_timers(), 2u);  // the sleep's and the deadline's
    t = {};
    EXPECT_EQ(pending_timers(), 0u);
    co_return;
  }(), test::paused());
}

TEST(cancellation, destroying_a_frame_suspended_on_an_interval_removes_its_timer) {
  run([]() -> task<> {
    auto ticker = []() -> task<> {
      interval every(1s);
      for (;;) co_await every.next();
    };
    task<> t = ticker();
    start_detached_from_awaiter(t);
    EXPECT_EQ(pending_timers(), 1u);
    co_await sleep_for(3500ms);
    EXPECT_EQ(pending_timers(), 1u);
    t = {};
    EXPECT_EQ(pending_timers(), 0u);
  }(), test::paused());
}

TEST(cancellation, destroying_a_frame_suspended_in_when_all_destroys_every_child) {
  run([]() -> task<> {
    int destroyed = 0;
    struct counter {
      int* n;
      ~counter() { ++*n; }
    };
    auto child = [](int& n, clock::duration d) -> task<int> {
      counter c{&n};
      co_await sleep_for(d);
      co_return 1;
    };
    auto parent = [&]() -> task<> { co_await when_all(child(destroyed, 1h), child(destroyed, 2h), child(destroyed, 3h)); };
    task<> t = parent();
    start_detached_from_awaiter(t);
    EXPECT_EQ(pending_timers(), 3u);
    t = {};
    EXPECT_EQ(destroyed, 3);
    EXPECT_EQ(pending_timers(), 0u);
    co_return;
  }(), test::paused());
}

TEST(cancellation, destroying_a_frame_suspended_in_when_all_of_a_vector_destroys_every_child) {
  run([]() -> task<> {
    auto child = [](clock::duration d) -> task<> { co_await sleep_for(d); };
    auto parent = [&]() -> task<> {
      std::vector<task<>> children;
      for (int i = 1; i <= 4; ++i) children.push_back(child(i * 1h));
      co_await when_all(std::move(children));
    };
    // Under a timeout, so that every child's operation is registered with a stop source when
    // the frames go.
    auto guarded = [&]() -> task<> { (void)co_await with_timeout(parent(), 10h); };
    task<> t = guarded();
    start_detached_from_awaiter(t);
    EXPECT_EQ(pending_timers(), 5u);
    t = {};
    EXPECT_EQ(pending_timers(), 0u);
    co_return;
  }(), test::paused());
}

TEST(cancellation, frame_destroyed_while_queued_after_yield_is_never_resumed) {
  run([]() -> task<> {
    bool resumed = false;
    auto yielder = [](bool& r) -> task<> {
      co_await yield();
      r = true;
    };
    task<> t = yielder(resumed);
    start_detached_from_awaiter(t);  // now queued in the ready queue
    t = {};
    co_await yield();
    co_await sleep_for(1ms);
    EXPECT_FALSE(resumed);
  }(), test::paused());
}

TEST(cancellation, frame_destroyed_while_its_timer_is_due_in_the_same_batch_is_not_resumed) {
  run([]() -> task<> {
    bool resumed = false;
    task<> victim = [](bool& r) -> task<> {
      co_await sleep_for(10ms);
      r = true;
    }(resumed);
    // Same deadline as the victim's, scheduled first: fires first in the batch and destroys
    // the victim whose timer is already due.
    spawn([](task<>& v) -> task<> {
      co_await sleep_for(10ms);
      v = {};
    }(victim));
    co_await yield();  // the spawned task starts and sleeps
    start_detached_from_awaiter(victim);
    co_await sleep_for(20ms);
    EXPECT_FALSE(resumed);
    EXPECT_FALSE(victim.valid());
    EXPECT_EQ(pending_timers(), 0u);
  }(), test::paused());
}

// The process aborts if a frame is freed with its timer still queued (timer_node checks it in
// every build), and LSan reports frames that are never freed.
TEST(cancellation, frames_suspended_when_run_returns_are_destroyed_and_leave_no_timer) {
  int destroyed = 0;
  struct counter {
    int* n;
    ~counter() { ++*n; }
  };
  run([](int& n) -> task<> {
    auto sleeper = [](int& n, clock::duration d) -> task<> {
      counter c{&n};
      co_await sleep_for(d);
    };
    auto timed = [](int& n) -> task<> {
      counter c{&n};
      deadline d(1h);
      (void)co_await with_deadline(sleep_for(2h), d);
    };
    auto grouped = [&](int& n) -> task<> {
      counter c{&n};
      co_await when_all(sleeper(n, 1h), sleeper(n, 2h));
    };
    for (int i = 0; i < 10; ++i) spawn(sleeper(n, 1h));
    spawn(timed(n));
    spawn(grouped(n));
    spawn([](int& n) -> task<> {
      counter c{&n};
      for (;;) co_await yield();
    }(n));
    co_await yield();  // after every spawned task has started (a paused clock would not move:
                       // the yielding task keeps the loop busy)
    EXPECT_EQ(pending_timers(), 10u + 2u + 2u);
  }(destroyed), test::paused());
  EXPECT_EQ(destroyed, 10 + 1 + 3 + 1);
}

}  // namespace
}  // namespace cogwheel
