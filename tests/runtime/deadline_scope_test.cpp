// Deadlines that flow (docs/deadlines.md): scopes opened by with_timeout/with_deadline on a
// task, nested in every order, read with current_deadline(); when_all children inherit them and
// spawned tasks start with none; a later nested scope arms no timer; an operation started past
// its effective deadline completes at once without filing a timer; scopes on a movable
// deadline follow its reset() both ways; shielded cleanup; exceptions through scopes; yield()
// in a stopped task. On a paused clock (exact at tick resolution), for both timer kinds.
#include <cogwheel/runtime/stop.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <vector>

#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>
#include <cogwheel/runtime/when_all.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

constexpr clock::duration tick = 1ms;
constexpr clock::time_point none = clock::time_point::max();

std::uint64_t timers_scheduled() { return this_core_metrics().timers_scheduled; }

class scopes_on : public testing::TestWithParam<timer_kind> {
 protected:
  void run_paused(task<> t) {
    runtime_options o = test::paused();
    o.timers = GetParam();
    run(std::move(t), o);
  }
};

INSTANTIATE_TEST_SUITE_P(timers, scopes_on, testing::Values(timer_kind::wheel, timer_kind::heap),
                         [](const auto& info) { return info.param == timer_kind::wheel ? "wheel" : "heap"; });

// Records the effective deadline seen inside, then sleeps `d`.
task<result<void>> probe(clock::time_point& seen, clock::duration d) {
  seen = co_await current_deadline();
  co_return (co_await with_timeout(sleep_for(d), 24h));
}

TEST_P(scopes_on, current_deadline_is_max_outside_any_scope_and_the_scope_inside_one) {
  run_paused([]() -> task<> {
    EXPECT_EQ(co_await current_deadline(), none);
    const auto start = test::loop_now();
    clock::time_point seen{};
    auto r = co_await with_timeout(probe(seen, 1ms), 50ms);
    EXPECT_TRUE(r.has_value());
    EXPECT_EQ(seen, start + 50ms);
    EXPECT_EQ(co_await current_deadline(), none);  // the scope closed with the task
  }());
}

TEST_P(scopes_on, nested_scopes_in_every_order_give_the_earliest) {
  run_paused([]() -> task<> {
    for (auto [outer, inner] : {std::pair{50ms, 20ms}, std::pair{20ms, 50ms}, std::pair{30ms, 30ms}}) {
      const auto start = test::loop_now();
      clock::time_point seen{};
      auto nest = [&]() -> task<result<void>> { co_return co_await with_timeout(probe(seen, 1h), inner); };
      auto r = co_await with_timeout(nest(), outer);
      EXPECT_EQ(r.error(), errc::timed_out);
      EXPECT_EQ(seen, start + std::min(outer, inner));
      EXPECT_GE(test::loop_now(), start + std::min(outer, inner));
      EXPECT_LT(test::loop_now(), start + std::min(outer, inner) + tick);
      EXPECT_EQ(pending_timers(), 0u);
    }
  }());
}

TEST_P(scopes_on, three_levels_the_middle_one_earliest) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    clock::time_point seen{};
    auto level3 = [&]() -> task<result<void>> { co_return co_await with_timeout(probe(seen, 1h), 90ms); };
    auto level2 = [&]() -> task<result<void>> { co_return co_await with_timeout(level3(), 10ms); };
    auto r = co_await with_timeout(level2(), 60ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(seen, start + 10ms);
    EXPECT_LT(test::loop_now(), start + 10ms + tick);
  }());
}

TEST_P(scopes_on, a_later_inner_scope_arms_no_timer_and_an_earlier_one_arms_one) {
  run_paused([]() -> task<> {
    std::uint64_t later_armed = 99, earlier_armed = 99;
    auto inner = [](clock::duration d, std::uint64_t& armed) -> task<result<void>> {
      const std::uint64_t before = timers_scheduled();
      auto check = [&]() -> task<> {
        armed = timers_scheduled() - before;  // the inner scope's timer, if any, is filed by now
        co_return;
      };
      (void)co_await with_timeout(check(), d);
      co_return (co_await with_timeout(sleep_for(1h), d));  // and an operation's own timeout
    };
    auto r = co_await with_timeout(inner(1h, later_armed), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(later_armed, 0u);
    r = co_await with_timeout(inner(5ms, earlier_armed), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(earlier_armed, 1u);
  }());
}

TEST_P(scopes_on, one_timer_per_scope_never_one_per_operation_inside_it) {
  run_paused([]() -> task<> {
    const std::uint64_t before = timers_scheduled();
    auto many = []() -> task<> {
      for (int i = 0; i < 100; ++i) (void)co_await with_timeout(sleep_for(0ms), 1h);  // sleeps file one each
    };
    auto r = co_await with_timeout(many(), 1h);
    EXPECT_TRUE(r.has_value());
    EXPECT_EQ(timers_scheduled() - before, 1u + 100u);  // the scope's, and the 100 sleeps'
  }());
}

TEST_P(scopes_on, an_operation_started_past_its_deadline_completes_at_once_without_a_timer) {
  run_paused([]() -> task<> {
    deadline d(1h);
    std::uint64_t filed = 99;
    bool cancelled = false;
    auto worker = [&]() -> task<> {
      d.reset_to(test::loop_now() - 1ms);  // the budget is gone; its timer has not fired yet
      const std::uint64_t before = timers_scheduled();
      const auto t0 = test::loop_now();
      auto slept = co_await with_timeout(sleep_for(1h), 24h);
      filed = timers_scheduled() - before;
      cancelled = slept.error() == errc::operation_canceled && test::loop_now() == t0;
      co_await sleep_for(1h);  // a plain sleep: completes at once too
    };
    const auto start = test::loop_now();
    auto r = co_await with_deadline(worker(), d);
    EXPECT_EQ(r.error(), errc::timed_out);  // the scope turns the refusal into timed_out
    EXPECT_EQ(filed, 0u);
    EXPECT_TRUE(cancelled);
    EXPECT_LT(test::loop_now() - start, tick);
  }());
}

TEST_P(scopes_on, with_timeout_inside_a_scope_past_its_deadline_does_not_start) {
  run_paused([]() -> task<> {
    deadline d(1h);
    bool started = false;
    result<void> inner;
    auto worker = [&]() -> task<> {
      d.reset_to(test::loop_now());
      inner = co_await with_timeout([&]() -> task<> { started = true; co_return; }(), 1h);
    };
    auto r = co_await with_deadline(worker(), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_FALSE(started);
    EXPECT_EQ(inner.error(), errc::operation_canceled);  // not its own timeout: the outer one's
  }());
}

// timeout.hpp's lean race (an own time point, no stop source in the caller) is for callers
// outside every chain only: an operation raced against its own time point inside a task that a
// timeout runs still answers to that scope (it arms no timer when the scope comes first, and
// the scope's stop ends it). shielded() takes it: see the shielded_cleanup tests.
TEST_P(scopes_on, an_operation_with_its_own_time_point_inside_a_scope_answers_to_it) {
  run_paused([]() -> task<> {
    std::uint64_t filed = 99;
    result<void> inner;
    auto worker = [&]() -> task<> {
      const std::uint64_t before = timers_scheduled();
      inner = co_await with_deadline(sleep_for(1h), test::loop_now() + 1h);
      filed = timers_scheduled() - before;  // the sleep's own timer only: the race arms none
    };
    const auto start = test::loop_now();
    auto r = co_await with_timeout(worker(), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(inner.error(), errc::operation_canceled);  // stopped by the scope, not its own timer
    EXPECT_EQ(filed, 1u);
    EXPECT_GE(test::loop_now() - start, 10ms);  // at the scope's expiry, not the race's own hour
    EXPECT_LT(test::loop_now() - start, 10ms + tick);
  }());
}

TEST_P(scopes_on, when_all_children_inherit_the_scopes_and_spawned_tasks_start_with_none) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    clock::time_point a{}, b{}, spawned{};
    bool spawned_ran = false;
    auto parent = [&]() -> task<> {
      co_await when_all(probe(a, 1ms), probe(b, 1ms));
      spawn([](clock::time_point& seen, bool& ran) -> task<> {
        seen = co_await current_deadline();
        ran = true;
      }(spawned, spawned_ran));
      co_await sleep_for(1ms);
    };
    auto r = co_await with_timeout(parent(), 40ms);
    EXPECT_TRUE(r.has_value());
    EXPECT_EQ(a, start + 40ms);
    EXPECT_EQ(b, start + 40ms);
    EXPECT_TRUE(spawned_ran);
    EXPECT_EQ(spawned, none);
  }());
}

TEST_P(scopes_on, a_scope_on_a_deadline_follows_its_reset_both_ways) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline d(100ms);
    std::vector<clock::duration> seen;
    auto worker = [&]() -> task<> {
      seen.push_back(co_await current_deadline() - start);
      d.reset(30ms);  // pulled in
      seen.push_back(co_await current_deadline() - start);
      d.reset(200ms);  // pushed out
      seen.push_back(co_await current_deadline() - start);
      d.reset(20ms);
      co_await sleep_for(1h);
    };
    auto r = co_await with_deadline(worker(), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(seen, (std::vector<clock::duration>{100ms, 30ms, 200ms}));
    EXPECT_LT(test::loop_now() - start, 20ms + tick);
  }());
}

TEST_P(scopes_on, an_inner_scope_that_armed_no_timer_arms_one_when_the_outer_deadline_is_pushed_past_it) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline d(10ms);
    result<void> inner;
    auto worker = [&]() -> task<> {
      auto pusher = [&]() -> task<> {
        const std::uint64_t before = timers_scheduled();
        d.reset(200ms);  // the inner scope (50ms) now comes first: it arms its timer
        EXPECT_EQ(timers_scheduled() - before, 1u);
        co_await sleep_for(1h);
      };
      const std::uint64_t before = timers_scheduled();
      inner = co_await with_timeout([&]() -> task<> {
        EXPECT_EQ(timers_scheduled() - before, 0u);  // 50ms after a 10ms deadline: no timer
        co_await pusher();
      }(), 50ms);
    };
    auto r = co_await with_deadline(worker(), d);
    EXPECT_EQ(inner.error(), errc::timed_out);  // its own timer fired
    EXPECT_TRUE(r.has_value());
    EXPECT_GE(test::loop_now() - start, 50ms);
    EXPECT_LT(test::loop_now() - start, 50ms + tick);
  }());
}

TEST_P(scopes_on, an_inner_scope_that_armed_a_timer_follows_the_outer_deadline_pulled_before_it) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline d(100ms);
    result<void> inner;
    auto worker = [&]() -> task<> {
      inner = co_await with_timeout([&]() -> task<> {
        d.reset(20ms);  // now before the inner scope's 50ms
        EXPECT_EQ(co_await current_deadline(), start + 20ms);
        co_await sleep_for(1h);
      }(), 50ms);
    };
    auto r = co_await with_deadline(worker(), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(inner.error(), errc::operation_canceled);  // stopped by the outer scope
    EXPECT_LT(test::loop_now() - start, 20ms + tick);
  }());
}

// A reset that still leaves the deadline first re-links the dependent scope while the reset is
// telling it; the next reset must tell it again (the deadline's maybe_dependents_ flag is set
// by that re-link, not cleared after it).
TEST_P(scopes_on, a_dependent_scope_told_twice_arms_its_timer_at_the_second_push) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline d(10ms);
    result<void> inner;
    auto worker = [&]() -> task<> {
      inner = co_await with_timeout([&]() -> task<> {
        const std::uint64_t before = timers_scheduled();
        d.reset(20ms);  // still before the inner 50ms: the inner scope re-links, no timer
        EXPECT_EQ(timers_scheduled() - before, 0u);
        d.reset(200ms);  // now the inner scope comes first: it arms its timer
        EXPECT_EQ(timers_scheduled() - before, 1u);
        co_await sleep_for(1h);
      }(), 50ms);
    };
    auto r = co_await with_deadline(worker(), d);
    EXPECT_EQ(inner.error(), errc::timed_out);  // its own timer fired
    EXPECT_TRUE(r.has_value());
    EXPECT_GE(test::loop_now() - start, 50ms);
    EXPECT_LT(test::loop_now() - start, 50ms + tick);
  }());
}

TEST_P(scopes_on, a_dependent_scope_moves_to_the_next_deadline_that_precedes_it) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    deadline outer(30ms), middle(10ms);
    result<void> inner;
    auto level2 = [&]() -> task<> {
      inner = co_await with_timeout([&]() -> task<> {
        middle.reset(500ms);  // outer (30ms) still precedes the inner 50ms: no timer yet
        const std::uint64_t before = timers_scheduled();
        outer.reset(400ms);  // now nothing does
        EXPECT_EQ(timers_scheduled() - before, 1u);
        co_await sleep_for(1h);
      }(), 50ms);
    };
    auto level1 = [&]() -> task<> { (void)co_await with_deadline(level2(), middle); };
    auto r = co_await with_deadline(level1(), outer);
    EXPECT_TRUE(r.has_value());
    EXPECT_EQ(inner.error(), errc::timed_out);
    EXPECT_LT(test::loop_now() - start, 50ms + tick);
  }());
}

TEST_P(scopes_on, shielded_cleanup_runs_after_the_deadline_outside_the_scope) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    clock::time_point seen{};
    result<void> cleanup{errc::invalid_argument};
    auto worker = [&]() -> task<> {
      co_await sleep_for(1h);  // cut at 10ms
      cleanup = co_await shielded(probe(seen, 20ms), 50ms);
    };
    auto r = co_await with_timeout(worker(), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_TRUE(cleanup.has_value());
    EXPECT_GE(seen, start + 10ms + 50ms);  // its own grace, not the expired scope
    EXPECT_LT(seen, start + 10ms + tick + 50ms);
    EXPECT_GE(test::loop_now() - start, 30ms);  // the cleanup slept its 20ms in full
  }());
}

TEST_P(scopes_on, shielded_cleanup_that_overruns_its_grace_times_out) {
  run_paused([]() -> task<> {
    const auto start = test::loop_now();
    result<void> cleanup;
    auto worker = [&]() -> task<> {
      co_await sleep_for(1h);
      cleanup = co_await shielded(sleep_for(1h), 15ms);
    };
    auto r = co_await with_timeout(worker(), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(cleanup.error(), errc::timed_out);
    EXPECT_GE(test::loop_now() - start, 25ms);
    EXPECT_LT(test::loop_now() - start, 25ms + 2 * tick);
    EXPECT_EQ(pending_timers(), 0u);
  }());
}

TEST_P(scopes_on, shielded_is_not_reached_by_a_stop_while_it_runs) {
  run_paused([]() -> task<> {
    result<void> cleanup{errc::invalid_argument};
    auto worker = [&]() -> task<> { cleanup = co_await shielded(sleep_for(30ms), 1h); };
    const auto start = test::loop_now();
    auto r = co_await with_timeout(worker(), 10ms);  // fires while the shielded sleep runs
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_TRUE(cleanup.has_value());
    EXPECT_GE(test::loop_now() - start, 30ms);
  }());
}

TEST_P(scopes_on, exceptions_pass_through_nested_scopes_and_leave_no_timer) {
  run_paused([]() -> task<> {
    deadline d(10ms);
    auto thrower = []() -> task<int> {
      co_await sleep_for(1ms);
      throw std::runtime_error("deep");
    };
    auto middle = [&]() -> task<result<int>> { co_return co_await with_timeout(thrower(), 1h); };
    auto outer = [&]() -> task<result<int>> { co_return co_await with_deadline(middle(), d); };
    EXPECT_THROW((void)co_await with_timeout(outer(), 5ms), std::runtime_error);
    EXPECT_EQ(pending_timers(), 1u);  // the deadline's own
    d.reset(1h);                      // no dependent left behind to tell
    EXPECT_EQ(pending_timers(), 1u);
  }());
}

TEST_P(scopes_on, a_stopped_task_yields_without_requeueing) {
  run_paused([]() -> task<> {
    std::uint64_t iterations = 99;
    auto worker = [&]() -> task<> {
      co_await sleep_for(1h);  // stopped here
      const std::uint64_t before = this_core_metrics().iterations;
      for (int i = 0; i < 10; ++i) co_await yield();
      iterations = this_core_metrics().iterations - before;
    };
    auto r = co_await with_timeout(worker(), 5ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(iterations, 0u);
  }());
}

// On the real clock: a task that computes past its deadline lets no loop iteration run, so the
// scope's timer cannot have fired; the operation it starts next is still refused.
TEST(scopes_real_clock, an_operation_after_computing_past_the_deadline_files_no_timer) {
  run([]() -> task<> {
    std::uint64_t filed = 99;
    auto worker = [&]() -> task<result<void>> {
      const auto until = clock::now() + 5ms;
      while (clock::now() < until) {
      }
      const std::uint64_t before = timers_scheduled();
      auto r = co_await with_timeout(sleep_for(1h), 24h);
      filed = timers_scheduled() - before;
      co_return r;
    };
    auto r = co_await with_timeout(worker(), 2ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(filed, 0u);
  }());
}

}  // namespace
}  // namespace cogwheel
