// semaphore: permits (RAII, release growing the limit), strict FIFO waiters, and an acquire cut
// at every moment of its wait (before it suspends, suspended, granted but not yet resumed) by
// the task itself, another task, a timer and another core: a cut acquire holds no permit, a
// granted one whose frame goes away gives its permits back. Labelled `multicore`.
#include <cogwheel/runtime/semaphore.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <vector>

#include <cogwheel/runtime/runtime.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>
#include <cogwheel/runtime/when_all.hpp>
#include <cogwheel/runtime/when_any.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

template <class T>
void start_detached(task<T>& t) {
  t.start(detail::continuation(), nullptr).resume();
}

TEST(semaphore, permits_give_themselves_back_and_release_grows_the_limit) {
  semaphore s(2);
  {
    std::optional<semaphore::permit> p = s.try_acquire(2);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->count(), 2u);
    EXPECT_EQ(s.available(), 0u);
    EXPECT_FALSE(s.try_acquire());
    semaphore::permit moved = std::move(*p);
    EXPECT_EQ(p->count(), 0u);
    EXPECT_EQ(s.available(), 0u);
    moved.release();
    EXPECT_EQ(s.available(), 2u);
    moved.release();  // holds nothing any more
    EXPECT_EQ(s.available(), 2u);
  }
  s.release(3);
  EXPECT_EQ(s.available(), 5u);
  EXPECT_TRUE(s.try_acquire(5));
  EXPECT_EQ(s.available(), 5u);
}

TEST(semaphore, acquire_takes_free_permits_without_suspending) {
  run([]() -> task<> {
    semaphore s(1);
    result<semaphore::permit> p = co_await s.acquire();
    CO_ASSERT_TRUE(p);
    EXPECT_EQ(s.available(), 0u);
  }());
}

// The rule: strict FIFO. A request for 3 at the head holds back a request for 1 behind it even
// while 1 permit is free; try_acquire does not barge past waiters either.
TEST(semaphore, waiters_are_served_in_fifo_order_and_a_big_head_is_not_starved) {
  run([]() -> task<> {
    semaphore s(0);
    std::vector<int> order;
    auto taker = [&](int id, std::size_t n) -> task<> {
      result<semaphore::permit> p = co_await s.acquire(n);
      EXPECT_TRUE(p);
      order.push_back(id);
      co_await sleep_for(1ms);  // holds them a moment
    };
    spawn(taker(3, 3));
    spawn(taker(1, 1));
    co_await yield();
    s.release(1);
    co_await sleep_for(2ms);
    EXPECT_TRUE(order.empty());        // 1 free, but the head wants 3
    EXPECT_FALSE(s.try_acquire(1));    // no barging past waiters
    s.release(2);
    co_await yield();
    co_await yield();
    EXPECT_EQ(order, (std::vector<int>{3}));
    co_await sleep_for(5ms);  // 3 gives its permits back: 1 gets its turn
    EXPECT_EQ(order, (std::vector<int>{3, 1}));
    co_await sleep_for(5ms);
    EXPECT_EQ(s.available(), 3u);
  }());
}

TEST(semaphore, an_acquire_cut_before_it_suspends_holds_nothing) {
  run([]() -> task<> {
    semaphore s(0);
    auto acquire_task = [&]() -> task<result<semaphore::permit>> { co_return co_await s.acquire(); };
    result<semaphore::permit> p = co_await with_deadline(acquire_task(), now() - 1ms);
    EXPECT_EQ(p.error(), errc::timed_out);
    s.release(1);
    EXPECT_EQ(s.available(), 1u);  // no waiter left queued to swallow it
  }());
}

TEST(semaphore, an_acquire_cut_by_a_timer_while_suspended_holds_nothing) {
  run([]() -> task<> {
    semaphore s(0);
    result<semaphore::permit> p = co_await with_timeout(s.acquire(), 1ms);
    EXPECT_EQ(p.error(), errc::timed_out);
    s.release(1);
    EXPECT_EQ(s.available(), 1u);
  }());
}

TEST(semaphore, an_acquire_cut_by_another_task_holds_nothing_and_unblocks_those_behind) {
  run([]() -> task<> {
    semaphore s(1);
    bool small_got = false;
    // A big request (2) at the head, cut by the winner of a when_any: the small one behind it
    // must then be served by the permit that is free.
    auto big = [&]() -> task<> {
      result<semaphore::permit> p = co_await s.acquire(2);
      EXPECT_EQ(p.error(), errc::operation_canceled);
    };
    auto other = [&]() -> task<> { co_await sleep_for(2ms); };
    auto small = [&]() -> task<> {
      result<semaphore::permit> p = co_await s.acquire(1);
      small_got = p.has_value();
    };
    spawn(small());  // not yet started: runs after big has queued
    (void)co_await when_any(big(), other());
    co_await sleep_for(1ms);
    EXPECT_TRUE(small_got);
    EXPECT_EQ(s.available(), 1u);
  }());
}

TEST(semaphore, a_grant_whose_frame_is_destroyed_before_it_resumes_goes_back) {
  run([]() -> task<> {
    semaphore s(0);
    bool resumed = false;
    auto waiter = [&]() -> task<> {
      result<semaphore::permit> p = co_await s.acquire(2);
      resumed = true;
    };
    task<> t = waiter();
    start_detached(t);
    s.release(2);          // granted: queued to resume at the next iteration
    EXPECT_EQ(s.available(), 0u);
    t = {};                // destroyed before it resumes
    EXPECT_EQ(s.available(), 2u);
    co_await sleep_for(1ms);
    EXPECT_FALSE(resumed);
  }());
}

TEST(semaphore, a_queued_waiter_whose_frame_is_destroyed_leaves_the_queue) {
  run([]() -> task<> {
    semaphore s(0);
    auto waiter = [&]() -> task<> { (void)co_await s.acquire(5); };
    task<> t = waiter();
    start_detached(t);
    t = {};
    s.release(1);
    EXPECT_EQ(s.try_acquire(1).has_value(), true);  // nobody queued holds it back
    co_return;
  }());
}

TEST(semaphore, a_grant_that_raced_ahead_of_the_cut_keeps_its_permit) {
  run([]() -> task<> {
    semaphore s(0);
    std::optional<result<semaphore::permit>> got;
    auto waiter = [&]() -> task<> { got = co_await with_timeout(s.acquire(), 1h); };
    spawn(waiter());
    co_await yield();
    s.release(1);  // granted; the waiter has not resumed yet
    co_await yield();
    co_await yield();
    CO_ASSERT_TRUE(got.has_value());
    EXPECT_TRUE(*got);
    got.reset();  // the permit goes back
    EXPECT_EQ(s.available(), 1u);
  }());
}

runtime_options two_cores() {
  runtime_options o;
  o.cores = 2;
  return o;
}

// Cross-core: tasks on both cores take a semaphore(1) as a mutex around a plain counter; some
// acquires are cut by 0-1 ms timeouts. No two holders at once, nothing lost, every permit back.
TEST(semaphore, is_a_mutex_across_cores_with_cut_waits) {
  semaphore s(1);
  std::atomic<int> holders{0};
  std::atomic<int> overlap{0};
  long counter = 0;  // guarded by s
  std::atomic<long> increments{0};
  const int per_task = static_cast<int>(test::scaled(400));
  runtime rt(two_cores());
  rt.run([&](unsigned core) -> task<> {
    auto worker = [&](int seed) -> task<> {
      for (int i = 0; i < per_task; ++i) {
        // (Not one ternary of two co_awaits: g++ 12 destroys such a temporary twice.)
        result<semaphore::permit> p;
        if ((i + seed) % 3 == 0)
          p = co_await with_timeout(s.acquire(), std::chrono::microseconds((i * 37 + seed) % 1000));
        else
          p = co_await s.acquire();
        if (!p) continue;
        if (holders.fetch_add(1) != 0) overlap.fetch_add(1);
        ++counter;
        increments.fetch_add(1, std::memory_order_relaxed);
        if (i % 7 == 0) co_await yield();
        holders.fetch_sub(1);
      }
    };
    std::vector<task<>> ws;
    for (int k = 0; k < 4; ++k) ws.push_back(worker(static_cast<int>(core * 10 + k)));
    co_await when_all(std::move(ws));
  });
  EXPECT_EQ(overlap.load(), 0);
  EXPECT_EQ(counter, increments.load());
  EXPECT_GT(counter, 0);
  EXPECT_EQ(s.available(), 1u);
}

// A waiter asleep on core 1 is woken by a release on core 0, and a wait on core 1 is cut by a
// stop that comes from core 0 (submit_to under a timeout).
TEST(semaphore, a_release_on_one_core_wakes_a_waiter_on_the_other_and_a_remote_stop_cuts_one) {
  semaphore s(0);
  std::atomic<bool> got{false};
  std::atomic<bool> cut{false};
  runtime rt(two_cores());
  rt.run([&](unsigned core) -> task<> {
    if (core == 1) {
      result<semaphore::permit> p = co_await s.acquire();
      got = p.has_value();
      co_return;
    }
    co_await sleep_for(5ms);
    s.release(1);
    // Now a remote wait cut from here: the remote acquire is stopped when our timeout fires.
    auto r = co_await with_timeout(submit_to(1, [&]() -> task<bool> {
                                     result<semaphore::permit> p = co_await s.acquire(5);
                                     co_return p.has_value();
                                   }),
                                   3ms);
    cut = !r.has_value() || !*r;
  });
  EXPECT_TRUE(got.load());
  EXPECT_TRUE(cut.load());
  EXPECT_EQ(s.available(), 1u);
}

}  // namespace
}  // namespace cogwheel
