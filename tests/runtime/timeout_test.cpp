// with_timeout / with_deadline: which side wins, what the caller gets (value, timed_out, the
// operation's own error, an exception), that a losing operation has really finished before the
// caller resumes, nesting, moving deadlines, and cancellation of every child of a when_all.
// All on a paused clock: times are exact at tick resolution and the tests take no real time.
#include <cogwheel/runtime/timeout.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/when_all.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

constexpr clock::duration tick = 1ms;  // runtime_options' default

// Time since `start` on the loop's (virtual) clock.
clock::duration since(clock::time_point start) { return test::loop_now() - start; }

// `at` within one tick after `expected` (timers round up to the tick, never early).
#define EXPECT_AT(at, expected)                     \
  do {                                              \
    EXPECT_GE((at), (expected));                    \
    EXPECT_LT((at), (expected) + tick);             \
  } while (0)

void run_paused(task<> t) { run(std::move(t), test::paused()); }

TEST(with_timeout, sleep_that_outlasts_the_timeout_times_out) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    result<void> r = co_await with_timeout(sleep_for(1s), 20ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_AT(since(start), 20ms);
    EXPECT_EQ(pending_timers(), 0u);  // the sleep's timer went with it
  }());
}

TEST(with_timeout, sleep_that_completes_first_yields_success) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    result<void> r = co_await with_timeout(sleep_for(20ms), 1s);
    EXPECT_TRUE(r.has_value());
    EXPECT_AT(since(start), 20ms);
    EXPECT_EQ(pending_timers(), 0u);  // the timeout's timer was cancelled
  }());
}

TEST(with_timeout, never_completing_operation_times_out) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    result<void> r = co_await with_timeout(sleep_for(24h), 5ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_AT(since(start), 5ms);
  }());
}

TEST(with_timeout, zero_or_negative_timeout_times_out_at_the_next_iteration) {
  run_paused([]() -> task<> {
    for (clock::duration d : {clock::duration::zero(), clock::duration(-1s)}) {
      const auto start = test::loop_now();
      result<void> r = co_await with_timeout(sleep_for(1s), d);
      EXPECT_EQ(r.error(), errc::timed_out);
      EXPECT_LT(since(start), tick);
    }
  }());
}

TEST(with_timeout, huge_timeout_never_fires) {
  run_paused([]() -> task<> {
    result<void> r = co_await with_timeout(sleep_for(10ms), std::chrono::hours::max());
    EXPECT_TRUE(r.has_value());
    r = co_await with_timeout(sleep_for(10ms), clock::duration::max());
    EXPECT_TRUE(r.has_value());
  }());
}

TEST(with_timeout, task_that_sleeps_too_long_times_out_and_has_finished) {
  run_paused([]() -> task<> {
    bool finished = false;
    auto slow = [](bool& done) -> task<int> {
      co_await sleep_for(1h);
      done = true;  // the sleep was cancelled: the task goes on to its end
      co_return 42;
    };
    const auto start = test::loop_now();
    result<int> r = co_await with_timeout(slow(finished), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_TRUE(finished) << "with_timeout returned before the task finished";
    EXPECT_AT(since(start), 10ms);
    EXPECT_EQ(pending_timers(), 0u);
  }());
}

TEST(with_timeout, task_that_completes_first_yields_its_value) {
  run_paused([]() -> task<> {
    auto quick = []() -> task<std::string> {
      co_await sleep_for(5ms);
      co_return "done";
    };
    result<std::string> r = co_await with_timeout(quick(), 1s);
    CO_ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, "done");
    EXPECT_EQ(pending_timers(), 0u);
  }());
}

TEST(with_timeout, void_task_yields_result_void) {
  run_paused([]() -> task<> {
    auto quick = []() -> task<> { co_await sleep_for(5ms); };
    auto r = co_await with_timeout(quick(), 1s);
    static_assert(std::is_same_v<decltype(r), result<void>>);
    EXPECT_TRUE(r.has_value());
    r = co_await with_timeout([]() -> task<> { co_await sleep_for(1h); }(), 1ms);
    EXPECT_EQ(r.error(), errc::timed_out);
  }());
}

TEST(with_timeout, task_returning_a_result_is_flattened) {
  run_paused([]() -> task<> {
    // Stops early when asked, reporting the cancellation in its own result.
    auto fetch = [](clock::duration d, result<int> outcome) -> task<result<int>> {
      co_await sleep_for(d);
      if (co_await stop_requested()) co_return errc::operation_canceled;
      co_return outcome;
    };
    auto value = co_await with_timeout(fetch(5ms, 7), 1s);
    static_assert(std::is_same_v<decltype(value), result<int>>);
    CO_ASSERT_TRUE(value.has_value());
    EXPECT_EQ(*value, 7);

    auto own_error = co_await with_timeout(fetch(5ms, errc::connection_refused), 1s);
    EXPECT_EQ(own_error.error(), errc::connection_refused);

    auto timed_out = co_await with_timeout(fetch(1h, 7), 5ms);
    EXPECT_EQ(timed_out.error(), errc::timed_out);  // operation_canceled becomes timed_out
  }());
}

TEST(with_timeout, value_produced_despite_the_timeout_is_not_lost) {
  run_paused([]() -> task<> {
    // Ignores the stop request and returns a value anyway: that value is returned, not
    // timed_out (the rule that keeps bytes read or written under a timeout).
    auto stubborn = []() -> task<result<int>> {
      co_await sleep_for(1h);
      co_return 99;
    };
    result<int> r = co_await with_timeout(stubborn(), 5ms);
    CO_ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, 99);
  }());
}

TEST(with_timeout, outer_timeout_firing_first_cancels_the_inner_operation) {
  run_paused([]() -> task<> {
    result<void> inner{errc::invalid_argument};
    bool finished = false;
    auto worker = [&]() -> task<result<void>> {
      inner = co_await with_timeout(sleep_for(1h), 50ms);
      finished = true;
      co_return inner;
    };
    const auto start = test::loop_now();
    result<void> outer = co_await with_timeout(worker(), 10ms);
    EXPECT_EQ(outer.error(), errc::timed_out);
    EXPECT_TRUE(finished);
    // The inner operation was cancelled by the outer timeout, not by its own.
    EXPECT_EQ(inner.error(), errc::operation_canceled);
    EXPECT_AT(since(start), 10ms);
    EXPECT_EQ(pending_timers(), 0u);
  }());
}

TEST(with_timeout, inner_timeout_firing_first_returns_through_the_task) {
  run_paused([]() -> task<> {
    auto worker = []() -> task<result<void>> { co_return co_await with_timeout(sleep_for(1h), 10ms); };
    const auto start = test::loop_now();
    auto outer = co_await with_timeout(worker(), 50ms);
    EXPECT_EQ(outer.error(), errc::timed_out);
    EXPECT_AT(since(start), 10ms);
    EXPECT_EQ(pending_timers(), 0u);  // the outer timer was cancelled when the task finished
  }());
}

TEST(with_timeout, exception_thrown_by_the_task_propagates) {
  run_paused([]() -> task<> {
    auto thrower = []() -> task<int> {
      co_await sleep_for(1ms);
      throw std::runtime_error("inside");
    };
    EXPECT_THROW((void)co_await with_timeout(thrower(), 1s), std::runtime_error);
    // Thrown while finishing after the timeout fired: still the exception, not timed_out.
    auto late_thrower = []() -> task<int> {
      co_await sleep_for(1h);
      throw std::logic_error("after cancellation");
    };
    EXPECT_THROW((void)co_await with_timeout(late_thrower(), 1ms), std::logic_error);
    EXPECT_EQ(pending_timers(), 0u);
  }());
}

TEST(with_timeout, stop_requested_becomes_true_inside_the_task_after_the_timeout) {
  run_paused([]() -> task<> {
    bool before = true;
    bool after = false;
    auto worker = [&]() -> task<> {
      before = co_await stop_requested();
      co_await sleep_for(1h);
      after = co_await stop_requested();
    };
    auto r = co_await with_timeout(worker(), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_FALSE(before);
    EXPECT_TRUE(after);
  }());
}

TEST(with_timeout, later_operations_of_a_stopped_task_complete_at_once) {
  run_paused([]() -> task<> {
    int sleeps = 0;
    auto worker = [&]() -> task<> {
      for (int i = 0; i < 3; ++i) {
        co_await sleep_for(1h);
        ++sleeps;
      }
    };
    const auto start = test::loop_now();
    auto r = co_await with_timeout(worker(), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(sleeps, 3);
    EXPECT_AT(since(start), 10ms);
  }());
}

// yield() in a stopped task resumes at once (without requeueing: deadline_scope_test counts
// the iterations), and its next cancellable suspension (a sleep) completes at once; the caller
// gets timed_out when the task has finished.
TEST(with_timeout, yields_of_a_stopped_task_resume_at_once_and_its_next_sleep_completes_at_once) {
  run_paused([]() -> task<> {
    int yields_after_stop = 0;
    bool slept_long = false;
    auto worker = [&]() -> task<> {
      while (!co_await stop_requested()) co_await sleep_for(1ms);
      for (int i = 0; i < 5; ++i) {
        co_await yield();
        ++yields_after_stop;
      }
      const auto t0 = test::loop_now();
      co_await sleep_for(1h);
      slept_long = test::loop_now() - t0 >= 1h;
    };
    const auto start = test::loop_now();
    auto r = co_await with_timeout(worker(), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(yields_after_stop, 5);
    EXPECT_FALSE(slept_long);
    EXPECT_LT(since(start), 10ms + 2 * tick);
  }());
}

TEST(with_timeout, when_all_under_a_timeout_cancels_every_child) {
  run_paused([]() -> task<> {
    int finished = 0;
    auto child = [&](clock::duration d) -> task<int> {
      co_await sleep_for(d);
      ++finished;
      co_return 1;
    };
    auto all = [&]() -> task<> { co_await when_all(child(1h), child(2h), child(3h)); };
    const auto start = test::loop_now();
    auto r = co_await with_timeout(all(), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(finished, 3);
    EXPECT_AT(since(start), 10ms);
    EXPECT_EQ(pending_timers(), 0u);
  }());
}

TEST(with_timeout, when_all_of_a_vector_under_a_timeout_cancels_every_child) {
  run_paused([]() -> task<> {
    int finished = 0;
    auto child = [&](clock::duration d) -> task<> {
      co_await sleep_for(d);
      ++finished;
    };
    auto all = [&]() -> task<> {
      std::vector<task<>> children;
      for (int i = 1; i <= 5; ++i) children.push_back(child(i * 1h));
      co_await when_all(std::move(children));
    };
    const auto start = test::loop_now();
    auto r = co_await with_timeout(all(), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(finished, 5);
    EXPECT_AT(since(start), 10ms);
    EXPECT_EQ(pending_timers(), 0u);
  }());
}

TEST(with_deadline, time_point_fires_at_that_time) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    const auto at = start + 123ms + 5us;
    result<void> r = co_await with_deadline(sleep_for(1h), at);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_AT(test::loop_now(), at);
    r = co_await with_deadline(sleep_for(1ms), test::loop_now() + 1s);
    EXPECT_TRUE(r.has_value());
  }());
}

TEST(with_deadline, time_point_in_the_past_times_out_at_the_next_iteration) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    result<void> r = co_await with_deadline(sleep_for(1h), start - 1s);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_LT(since(start), tick);
  }());
}

class deadline_on : public testing::TestWithParam<timer_kind> {
 protected:
  void run_paused(task<> t) {
    runtime_options o = test::paused();
    o.timers = GetParam();
    run(std::move(t), o);
  }
};

INSTANTIATE_TEST_SUITE_P(timers, deadline_on, testing::Values(timer_kind::wheel, timer_kind::heap),
                         [](const auto& info) { return info.param == timer_kind::wheel ? "wheel" : "heap"; });

TEST_P(deadline_on, fires_at_its_expiry) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline d(40ms);
    EXPECT_EQ(d.expiry(), start + 40ms);
    EXPECT_FALSE(d.expired());
    result<void> r = co_await with_deadline(sleep_for(1h), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_AT(since(start), 40ms);
    EXPECT_TRUE(d.expired());
  }());
}

TEST_P(deadline_on, reset_later_while_waiting_fires_at_the_new_time) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline d(50ms);
    spawn([](deadline& dl) -> task<> {
      co_await sleep_for(30ms);
      dl.reset(100ms);  // from t = 30ms: expires at 130ms instead of 50ms
    }(d));
    result<void> r = co_await with_deadline(sleep_for(1h), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_AT(since(start), 130ms);
    EXPECT_AT(d.expiry() - start, 130ms);
  }());
}

TEST_P(deadline_on, every_waiter_is_released_at_expiry_and_reset_moves_them_all) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline d(100ms);
    std::vector<clock::duration> released;
    auto waiter = [&]() -> task<> {
      result<void> r = co_await with_deadline(sleep_for(1h), d);
      EXPECT_EQ(r.error(), errc::timed_out);
      released.push_back(since(start));
    };
    auto pusher = [&]() -> task<> {
      co_await sleep_for(50ms);
      d.reset(100ms);  // from t = 50ms: all three now expire at 150ms
    };
    co_await when_all(waiter(), waiter(), waiter(), pusher());
    CO_ASSERT_TRUE(released.size() == 3u);
    for (auto t : released) EXPECT_AT(t, 150ms);
  }());
}

TEST_P(deadline_on, a_waiter_that_finishes_early_leaves_the_others_waiting) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline d(100ms);
    int timed_out = 0;
    auto waiter = [&](clock::duration sleep) -> task<> {
      result<void> r = co_await with_deadline(sleep_for(sleep), d);
      if (!r && r.error() == errc::timed_out) ++timed_out;
    };
    co_await when_all(waiter(1h), waiter(10ms), waiter(1h));
    EXPECT_EQ(timed_out, 2);
    EXPECT_AT(since(start), 100ms);
  }());
}

TEST_P(deadline_on, reset_repeatedly_keeps_pushing_the_expiry) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline d(20ms);
    // Like a connection's idle deadline, pushed forward by every message: 10 messages 10ms
    // apart, each pushing it to 20ms after itself.
    spawn([](deadline& dl) -> task<> {
      for (int i = 0; i < 10; ++i) {
        co_await sleep_for(10ms);
        dl.reset(20ms);
      }
    }(d));
    result<void> r = co_await with_deadline(sleep_for(1h), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_AT(since(start), 120ms);
  }());
}

TEST_P(deadline_on, reset_earlier_while_waiting_fires_at_the_new_time) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline d(1s);
    spawn([](deadline& dl) -> task<> {
      co_await sleep_for(20ms);
      dl.reset(5ms);
    }(d));
    result<void> r = co_await with_deadline(sleep_for(1h), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_AT(since(start), 25ms);
  }());
}

TEST_P(deadline_on, already_expired_times_out_at_once_without_starting_the_operation) {
  run_paused([]() -> task<> {
    deadline d(10ms);
    co_await sleep_for(20ms);
    EXPECT_TRUE(d.expired());
    bool started = false;
    auto op = [](bool& s) -> task<int> {
      s = true;
      co_return 1;
    };
    const auto iteration = this_core_metrics().iterations;
    const auto start = test::loop_now();
    result<int> r = co_await with_deadline(op(started), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_FALSE(started);
    EXPECT_EQ(this_core_metrics().iterations, iteration);  // did not even suspend
    EXPECT_EQ(test::loop_now(), start);
  }());
}

TEST_P(deadline_on, reset_after_expiry_makes_it_pending_again) {
  run_paused([]() -> task<> {
    deadline d(10ms);
    co_await sleep_for(20ms);
    EXPECT_TRUE(d.expired());
    d.reset(30ms);
    EXPECT_FALSE(d.expired());
    const auto start = test::loop_now();
    result<void> r = co_await with_deadline(sleep_for(1h), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_AT(since(start), 30ms);
  }());
}

TEST_P(deadline_on, operation_completing_first_leaves_the_deadline_pending) {
  run_paused([]() -> task<> {
    deadline d(100ms);
    result<void> r = co_await with_deadline(sleep_for(10ms), d);
    EXPECT_TRUE(r.has_value());
    EXPECT_FALSE(d.expired());
    EXPECT_EQ(pending_timers(), 1u);  // the deadline's own timer
    // The same deadline bounds the next operation too.
    const auto start = test::loop_now();
    r = co_await with_deadline(sleep_for(1h), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_AT(since(start), 90ms);
  }());
}

TEST_P(deadline_on, huge_durations_saturate) {
  run_paused([]() -> task<> {
    deadline d(std::chrono::hours::max());
    EXPECT_EQ(d.expiry(), clock::time_point::max());
    EXPECT_FALSE(d.expired());
    result<void> r = co_await with_deadline(sleep_for(10ms), d);
    EXPECT_TRUE(r.has_value());
    d.reset(std::chrono::hours::max());
    EXPECT_FALSE(d.expired());
  }());
}

}  // namespace
}  // namespace cogwheel

namespace cogwheel {
namespace {

// The one rule of with_timeout when the timer has fired, for every kind of operation: an
// outcome that carries a value and can say it was cut short (a result<U> holding a value, or
// an error other than operation_canceled) is returned as it is; everything else (a void
// operation, a plain T, operation_canceled) becomes errc::timed_out. Pinned here at the same
// instant on the paused clock, where both sides are due in one advance, on both timer kinds.
class same_instant_on : public testing::TestWithParam<timer_kind> {
 protected:
  void run_paused(task<> t) {
    runtime_options o = test::paused();
    o.timers = GetParam();
    run(std::move(t), o);
  }
};

INSTANTIATE_TEST_SUITE_P(timers, same_instant_on, testing::Values(timer_kind::wheel, timer_kind::heap),
                         [](const auto& info) { return info.param == timer_kind::wheel ? "wheel" : "heap"; });

TEST_P(same_instant_on, a_sleep_due_with_its_timeout_times_out) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    result<void> r = co_await with_timeout(sleep_for(10ms), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_AT(since(start), 10ms);
  }());
}

TEST_P(same_instant_on, a_plain_task_value_due_with_its_timeout_is_dropped_for_timed_out) {
  run_paused([]() -> task<> {
    auto fortytwo = []() -> task<int> {
      co_await sleep_for(10ms);
      co_return 42;  // a plain int cannot say whether the task was cut short
    };
    result<int> r = co_await with_timeout(fortytwo(), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
  }());
}

TEST_P(same_instant_on, a_result_task_cut_at_the_same_instant_says_so_and_times_out) {
  run_paused([]() -> task<> {
    auto fortytwo = []() -> task<result<int>> {
      auto slept = co_await with_timeout(sleep_for(10ms), 1h);  // says whether it was cut short
      if (!slept) co_return slept.error();
      co_return 42;
    };
    result<int> r = co_await with_timeout(fortytwo(), 10ms);
    // Both are due in the same advance. Timers due together fire in filing order, and the
    // outer timeout was filed first: its stop reaches the inner sleep before that completes,
    // so the task itself reports operation_canceled, which the rule turns into timed_out.
    EXPECT_EQ(r.error(), errc::timed_out);
  }());
}

TEST_P(same_instant_on, a_result_task_error_other_than_cancellation_is_returned_as_is) {
  run_paused([]() -> task<> {
    auto refused = []() -> task<result<int>> {
      co_await sleep_for(10ms);
      co_return errc::connection_refused;
    };
    result<int> r = co_await with_timeout(refused(), 10ms);
    EXPECT_EQ(r.error(), errc::connection_refused);
  }());
}

}  // namespace
}  // namespace cogwheel
