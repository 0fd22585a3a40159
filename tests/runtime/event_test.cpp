// event: set wakes every waiter (on this core, on another core, from a thread that is no core),
// a wait when set completes at once, reset holds later waits, and a wait cut at every moment
// (before it suspends, suspended, released but not yet resumed) by the task itself, another
// task, a timer and another core. A loop whose tasks all wait sleeps (iterations counted).
// Labelled `multicore`.
#include <cogwheel/runtime/event.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <cogwheel/runtime/metrics.hpp>
#include <cogwheel/runtime/runtime.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>
#include <cogwheel/runtime/when_any.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

template <class T>
void start_detached(task<T>& t) {
  t.start(detail::continuation(), nullptr).resume();
}

TEST(event, set_wakes_every_waiter_and_later_waits_pass_until_reset) {
  run([]() -> task<> {
    event e;
    int woken = 0;
    auto waiter = [&]() -> task<> {
      co_await e.wait();
      ++woken;
    };
    for (int i = 0; i < 3; ++i) spawn(waiter());
    co_await yield();
    EXPECT_EQ(woken, 0);
    e.set();
    EXPECT_TRUE(e.is_set());
    co_await yield();
    co_await yield();
    EXPECT_EQ(woken, 3);
    co_await e.wait();  // at once
    e.reset();
    EXPECT_FALSE(e.is_set());
    result<void> r = co_await with_timeout(e.wait(), 1ms);
    EXPECT_EQ(r.error(), errc::timed_out);
  }());
}

TEST(event, a_waiter_released_then_reset_before_it_runs_still_resumes) {
  run([]() -> task<> {
    event e;
    bool woken = false;
    auto waiter = [&]() -> task<> {
      co_await e.wait();
      woken = true;
    };
    spawn(waiter());
    co_await yield();
    e.set();
    e.reset();
    co_await yield();
    co_await yield();
    EXPECT_TRUE(woken);
  }());
}

TEST(event, waits_cut_before_suspending_by_a_timer_and_by_another_task_leave_no_waiter) {
  run([]() -> task<> {
    event e;
    auto wait_task = [&]() -> task<> { co_await e.wait(); };
    result<void> r = co_await with_deadline(wait_task(), now() - 1ms);  // before it suspends
    EXPECT_EQ(r.error(), errc::timed_out);
    r = co_await with_timeout(e.wait(), 1ms);  // suspended, cut by a timer
    EXPECT_EQ(r.error(), errc::timed_out);
    auto waits = [&]() -> task<int> {
      co_await e.wait();
      co_return 0;
    };
    auto other = []() -> task<int> {
      co_await sleep_for(1ms);
      co_return 1;
    };
    auto w = co_await when_any(waits(), other());  // cut by another task
    EXPECT_EQ(w.index, 1u);
    e.set();  // no waiter left behind to resume into a frame that is gone
    co_await sleep_for(1ms);
  }());
}

TEST(event, a_waiter_destroyed_after_its_release_but_before_it_resumes_is_never_resumed) {
  run([]() -> task<> {
    event e;
    bool resumed = false;
    auto waiter = [&]() -> task<> {
      co_await e.wait();
      resumed = true;
    };
    task<> t = waiter();
    start_detached(t);
    e.set();  // released: queued to resume at the next iteration
    t = {};
    co_await sleep_for(1ms);
    EXPECT_FALSE(resumed);
  }());
}

runtime_options two_cores() {
  runtime_options o;
  o.cores = 2;
  return o;
}

// Waiters on core 1 asleep for 50 ms: the loop does not spin meanwhile, a set() from core 0
// wakes them all in one burst, and a wait on core 1 is cut by a stop from core 0.
TEST(event, a_set_on_one_core_wakes_waiters_asleep_on_the_other_and_the_loop_does_not_spin) {
  event e;
  std::atomic<int> woken{0};
  std::atomic<std::uint64_t> iterations{~0ull};
  std::atomic<bool> cut{false};
  runtime rt(two_cores());
  rt.run([&](unsigned core) -> task<> {
    if (core == 1) {
      auto waiter = [&]() -> task<> {
        co_await e.wait();
        woken.fetch_add(1);
      };
      for (int i = 0; i < 4; ++i) spawn(waiter());
      const std::uint64_t before = this_core_metrics().iterations;
      co_await e.wait();
      iterations = this_core_metrics().iterations - before;
      co_return;
    }
    co_await sleep_for(50ms);
    e.set();
    e.reset();
    auto r = co_await with_timeout(submit_to(1, [&]() -> task<bool> {
                                     result<void> w = co_await with_timeout(e.wait(), 1h);
                                     co_return w.has_value();
                                   }),
                                   2ms);
    cut = !r.has_value() || !*r;
  });
  EXPECT_EQ(woken.load(), 4);
  EXPECT_TRUE(cut.load());
  // Asleep in the kernel the whole 50 ms: a handful of iterations (the spawned waiters' starts,
  // the wake-up), not thousands.
  EXPECT_LE(iterations.load(), 8u);
}

TEST(event, a_thread_that_is_no_core_can_set_it) {
  event e;
  std::thread setter;
  run([&]() -> task<> {
    setter = std::thread([&] {
      std::this_thread::sleep_for(5ms);
      e.set();
    });
    result<void> r = co_await with_timeout(e.wait(), 10s);
    EXPECT_TRUE(r);
    // The set() call must be over before this loop goes away: its wake-up may still be
    // writing to the loop's eventfd after the waiter ran.
    setter.join();
  }());
}

}  // namespace
}  // namespace cogwheel
