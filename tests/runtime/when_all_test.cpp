// when_all: children run concurrently on the current core, results come back in argument
// order, the first exception (in argument order) is rethrown once every child has finished,
// and a stop request reaches every child (see also timeout_test).
#include <cogwheel/runtime/when_all.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

template <class T>
task<T> after(clock::duration d, T v) {
  co_await sleep_for(d);
  co_return v;
}

TEST(when_all, results_come_back_in_argument_order_and_children_run_concurrently) {
  run([]() -> task<> {
    const auto start = test::loop_now();
    auto [a, b, c] = co_await when_all(after(30ms, 1), after(10ms, std::string("two")), after(20ms, 3.0));
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, "two");
    EXPECT_EQ(c, 3.0);
    EXPECT_GE(test::loop_now() - start, 30ms);  // the longest, not the sum
    EXPECT_LT(test::loop_now() - start, 31ms);
  }(), test::paused());
}

TEST(when_all, void_children_yield_monostate) {
  run([]() -> task<> {
    int done = 0;
    auto child = [](int& d) -> task<> {
      co_await sleep_for(1ms);
      ++d;
    };
    auto r = co_await when_all(child(done), after(2ms, 5));
    static_assert(std::is_same_v<decltype(r), std::tuple<std::monostate, int>>);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(std::get<1>(r), 5);
  }(), test::paused());
}

TEST(when_all, vector_results_come_back_in_order) {
  run([]() -> task<> {
    std::vector<task<int>> children;
    for (int i = 0; i < 10; ++i) children.push_back(after((10 - i) * 1ms, i));
    const std::vector<int> r = co_await when_all(std::move(children));
    EXPECT_EQ(r, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    const std::vector<int> none = co_await when_all(std::vector<task<int>>{});
    EXPECT_TRUE(none.empty());
  }(), test::paused());
}

TEST(when_all, children_completing_synchronously_do_not_resume_the_parent_early) {
  run([]() -> task<> {
    auto now = [](int v) -> task<int> { co_return v; };
    auto [a, b] = co_await when_all(now(1), now(2));
    EXPECT_EQ(a + b, 3);
    std::vector<task<int>> children;
    for (int i = 0; i < 100; ++i) children.push_back(now(i));
    EXPECT_EQ((co_await when_all(std::move(children))).size(), 100u);
  }());
}

TEST(when_all, first_exception_in_argument_order_is_rethrown_after_every_child_finished) {
  run([]() -> task<> {
    bool slow_finished = false;
    auto fail = [](clock::duration d, const char* what) -> task<int> {
      co_await sleep_for(d);
      throw std::runtime_error(what);
    };
    auto slow = [](bool& f) -> task<int> {
      co_await sleep_for(50ms);
      f = true;
      co_return 0;
    };
    try {
      (void)co_await when_all(slow(slow_finished), fail(20ms, "second"), fail(10ms, "third"));
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "second");
    }
    EXPECT_TRUE(slow_finished);
  }(), test::paused());
}

TEST(when_all, stop_reaches_every_child) {
  run([]() -> task<> {
    std::vector<bool> stopped(3, false);
    auto child = [](std::vector<bool>& s, std::size_t i, clock::duration d) -> task<> {
      co_await sleep_for(d);
      s[i] = co_await stop_requested();
    };
    auto all = [&]() -> task<> { co_await when_all(child(stopped, 0, 1h), child(stopped, 1, 2h), child(stopped, 2, 3h)); };
    (void)co_await with_timeout(all(), 5ms);
    EXPECT_EQ(stopped, (std::vector<bool>{true, true, true}));
  }(), test::paused());
}

}  // namespace
}  // namespace cogwheel
