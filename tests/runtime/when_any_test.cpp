// when_any: the first child to finish wins; the others are stopped and have finished (their
// frames destroyed with the awaiter) before the caller resumes; a stop from above reaches all.
#include <cogwheel/runtime/when_any.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

// On the paused clock a timer fires at its deadline rounded up to the 1 ms tick.
void expect_at(clock::duration elapsed, clock::duration expected) {
  EXPECT_GE(elapsed, expected);
  EXPECT_LT(elapsed, expected + 1ms);
}

template <class T>
task<T> after(clock::duration d, T v) {
  co_await sleep_for(d);
  co_return v;
}

// Sleeps d; records whether it was stopped and when it finished.
task<int> sleeper(clock::duration d, bool& stopped, clock::time_point& finished, bool& destroyed) {
  test::destroy_probe probe(destroyed);
  co_await sleep_for(d);
  stopped = co_await stop_requested();
  finished = test::loop_now();
  co_return 7;
}

TEST(when_any, the_first_to_finish_wins_with_its_index_and_value) {
  run([]() -> task<> {
    const auto start = test::loop_now();
    auto r = co_await when_any(after(30ms, 1), after(10ms, std::string("two")), after(20ms, 3.0));
    static_assert(std::is_same_v<decltype(r), when_any_result<int, std::string, double>>);
    EXPECT_EQ(r.index, 1u);
    EXPECT_EQ(std::get<1>(r.value), "two");
    expect_at(test::loop_now() - start, 10ms);  // the losers were stopped, not waited out
  }(), test::paused());
}

TEST(when_any, losers_are_stopped_and_finished_before_it_returns) {
  run([]() -> task<> {
    bool stopped = false, destroyed = false;
    clock::time_point finished{};
    const auto start = test::loop_now();
    auto r = co_await when_any(sleeper(1h, stopped, finished, destroyed), after(5ms, 0));
    EXPECT_EQ(r.index, 1u);
    EXPECT_TRUE(stopped);                    // the loser saw the stop at its sleep
    expect_at(finished - start, 5ms);        // and finished before the caller resumed
    EXPECT_TRUE(destroyed);                  // and its frame went with the awaiter
  }(), test::paused());
}

TEST(when_any, loser_frames_are_gone_once_the_statement_ends) {
  run([]() -> task<> {
    bool stopped = false, destroyed = false;
    clock::time_point finished{};
    auto r = co_await when_any(after(1ms, 1), sleeper(1h, stopped, finished, destroyed));
    EXPECT_EQ(r.index, 0u);
    EXPECT_TRUE(destroyed);
  }(), test::paused());
}

TEST(when_any, a_child_finishing_at_once_wins_and_later_children_never_start) {
  run([]() -> task<> {
    bool started = false;
    auto instant = []() -> task<int> { co_return 3; };
    auto marks = [](bool& s) -> task<int> {
      s = true;
      co_return 4;
    };
    auto r = co_await when_any(instant(), marks(started));
    EXPECT_EQ(r.index, 0u);
    EXPECT_EQ(std::get<0>(r.value), 3);
    EXPECT_FALSE(started);
  }(), test::paused());
}

TEST(when_any, void_children_yield_monostate) {
  run([]() -> task<> {
    auto nap = [](clock::duration d) -> task<> { co_await sleep_for(d); };
    auto r = co_await when_any(nap(2ms), nap(1ms));
    EXPECT_EQ(r.index, 1u);
    EXPECT_EQ(r.value.index(), 1u);  // std::monostate, at the winner's index
  }(), test::paused());
}

TEST(when_any, the_winners_exception_is_rethrown) {
  run([]() -> task<> {
    auto boom = []() -> task<int> {
      co_await sleep_for(1ms);
      throw std::runtime_error("boom");
    };
    bool threw = false;
    try {
      (void)co_await when_any(boom(), after(1h, 2));
    } catch (const std::runtime_error&) {
      threw = true;
    }
    EXPECT_TRUE(threw);
  }(), test::paused());
}

TEST(when_any, a_timeout_above_stops_every_child_and_is_exact) {
  run([]() -> task<> {
    bool s1 = false, s2 = false, d1 = false, d2 = false;
    clock::time_point f1{}, f2{};
    const auto start = test::loop_now();
    auto race = [](bool& s1, bool& s2, clock::time_point& f1, clock::time_point& f2, bool& d1,
                   bool& d2) -> task<int> {
      auto r = co_await when_any(sleeper(1h, s1, f1, d1), sleeper(2h, s2, f2, d2));
      co_return std::visit([](int v) { return v; }, r.value);
    };
    auto r = co_await with_timeout(race(s1, s2, f1, f2, d1, d2), 25ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    expect_at(test::loop_now() - start, 25ms);
    EXPECT_TRUE(s1);
    EXPECT_TRUE(s2);
    EXPECT_TRUE(d1);
    EXPECT_TRUE(d2);
  }(), test::paused());
}

TEST(when_any, nested_races_stop_the_inner_losers_too) {
  run([]() -> task<> {
    bool stopped = false, destroyed = false;
    clock::time_point finished{};
    auto inner = [](bool& s, clock::time_point& f, bool& d) -> task<int> {
      auto r = co_await when_any(sleeper(1h, s, f, d), after(2h, 0));
      co_return static_cast<int>(r.index);
    };
    const auto start = test::loop_now();
    auto r = co_await when_any(inner(stopped, finished, destroyed), after(3ms, 9));
    EXPECT_EQ(r.index, 1u);
    EXPECT_TRUE(stopped);
    EXPECT_TRUE(destroyed);
    expect_at(finished - start, 3ms);
  }(), test::paused());
}

}  // namespace
}  // namespace cogwheel
