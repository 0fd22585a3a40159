// task<T>: lazy start, value and exception propagation, move-only, symmetric transfer (no stack
// growth over long chains of synchronous completions), destruction before start, and moves
// rather than copies of return values.
#include <cogwheel/runtime/task.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <cogwheel/runtime/spawn.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

static_assert(!std::is_copy_constructible_v<task<int>>);
static_assert(!std::is_copy_assignable_v<task<int>>);
static_assert(std::is_nothrow_move_constructible_v<task<int>>);
static_assert(std::is_nothrow_move_assignable_v<task<int>>);

TEST(task, does_not_start_until_awaited) {
  bool started = false;
  auto body = [&]() -> task<int> {
    started = true;
    co_return 1;
  };
  const int v = run([&]() -> task<int> {
    task<int> t = body();
    EXPECT_FALSE(started);
    const int r = co_await std::move(t);
    EXPECT_TRUE(started);
    co_return r;
  }());
  EXPECT_EQ(v, 1);
}

TEST(task, creating_without_a_loop_runs_nothing) {
  bool started = false;
  auto body = [](bool& s) -> task<> {
    s = true;
    co_return;
  };
  { task<> t = body(started); }
  EXPECT_FALSE(started);
}

TEST(task, value_propagates_to_awaiter) {
  auto inner = []() -> task<std::string> { co_return std::string("cogwheel"); };
  auto outer = [&]() -> task<std::size_t> {
    const std::string s = co_await inner();
    co_return s.size();
  };
  EXPECT_EQ(run(outer()), 8u);
}

TEST(task, exception_propagates_to_awaiter) {
  auto thrower = []() -> task<int> {
    throw std::runtime_error("boom");
    co_return 0;
  };
  auto outer = [&]() -> task<std::string> {
    try {
      co_await thrower();
    } catch (const std::runtime_error& e) {
      co_return e.what();
    }
    co_return "not thrown";
  };
  EXPECT_EQ(run(outer()), "boom");
}

TEST(task, exception_propagates_out_of_run) {
  auto thrower = []() -> task<> {
    throw std::logic_error("from main");
    co_return;
  };
  EXPECT_THROW(run(thrower()), std::logic_error);
}

TEST(task, void_task_completes) {
  int steps = 0;
  auto inner = [&]() -> task<> {
    ++steps;
    co_return;
  };
  run([&]() -> task<> {
    co_await inner();
    co_await inner();
  }());
  EXPECT_EQ(steps, 2);
}

TEST(task, is_move_only_and_moves_keep_the_frame) {
  auto body = []() -> task<int> { co_return 42; };
  task<int> a = body();
  EXPECT_TRUE(a.valid());
  task<int> b = std::move(a);
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): testing the moved-from state
  EXPECT_TRUE(b.valid());
  task<int> c;
  c = std::move(b);
  EXPECT_FALSE(b.valid());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(run(std::move(c)), 42);
}

TEST(task, move_assignment_destroys_the_previous_frame) {
  bool first_destroyed = false;
  auto body = [](test::destroy_probe) -> task<int> { co_return 1; };
  auto other = []() -> task<int> { co_return 2; };
  task<int> t = body(test::destroy_probe(first_destroyed));
  EXPECT_FALSE(first_destroyed);
  t = other();
  EXPECT_TRUE(first_destroyed);
  EXPECT_EQ(run(std::move(t)), 2);
}

TEST(task, destroying_an_unstarted_task_destroys_its_frame_without_running_it) {
  bool ran = false;
  bool destroyed = false;
  auto body = [](bool& r, test::destroy_probe) -> task<> {
    r = true;
    co_return;
  };
  {
    task<> t = body(ran, test::destroy_probe(destroyed));
    EXPECT_FALSE(destroyed);
  }
  EXPECT_TRUE(destroyed);
  EXPECT_FALSE(ran);
}

// GCC makes symmetric transfer a tail call only with sibling-call optimisation, which no -O0
// build has (tests/runtime/CMakeLists.txt turns it on for the optimised builds).
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__)
#define SKIP_WITHOUT_TAIL_CALLS() GTEST_SKIP() << "GCC without optimisation compiles no tail calls"
#else
#define SKIP_WITHOUT_TAIL_CALLS() (void)0
#endif

// A chain of synchronous completions: each co_await starts a task that finishes at once. With
// symmetric transfer every hop is a tail call; without it this would need ~10M stack frames.
TEST(task, lots_of_synchronous_completions_do_not_overflow_the_stack) {
  SKIP_WITHOUT_TAIL_CALLS();
  const std::size_t n = test::scaled(10'000'000, 1'000'000);
  auto one = []() -> task<int> { co_return 1; };
  auto sum = [&]() -> task<std::size_t> {
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += static_cast<std::size_t>(co_await one());
    co_return total;
  };
  EXPECT_EQ(run(sum()), n);
}

TEST(task, lots_of_synchronous_void_completions_do_not_overflow_the_stack) {
  SKIP_WITHOUT_TAIL_CALLS();
  const std::size_t n = test::scaled(10'000'000, 1'000'000);
  std::size_t count = 0;
  auto one = [&]() -> task<> {
    ++count;
    co_return;
  };
  run([&]() -> task<> {
    for (std::size_t i = 0; i < n; ++i) co_await one();
  }());
  EXPECT_EQ(count, n);
}

// Counts the copies and moves of itself made anywhere.
struct counted {
  static inline int copies = 0;
  static inline int moves = 0;
  static void reset() { copies = moves = 0; }

  int id = 0;
  counted() = default;
  explicit counted(int i) : id(i) {}
  counted(const counted& o) : id(o.id) { ++copies; }
  counted(counted&& o) noexcept : id(o.id) { ++moves; }
  counted& operator=(const counted& o) {
    id = o.id;
    ++copies;
    return *this;
  }
  counted& operator=(counted&& o) noexcept {
    id = o.id;
    ++moves;
    return *this;
  }
};

TEST(task, return_values_are_moved_not_copied) {
  counted::reset();
  auto make = []() -> task<counted> { co_return counted(7); };
  const counted got = run([&]() -> task<counted> { co_return co_await make(); }());
  EXPECT_EQ(got.id, 7);
  EXPECT_EQ(counted::copies, 0);
  EXPECT_GT(counted::moves, 0);
}

TEST(task, returning_a_local_moves_it) {
  counted::reset();
  auto make = []() -> task<counted> {
    counted local(9);
    co_return local;  // co_return of a local is an implicit move
  };
  const counted got = run([&]() -> task<counted> {
    counted c = co_await make();
    co_return c;
  }());
  EXPECT_EQ(got.id, 9);
  EXPECT_EQ(counted::copies, 0);
}

TEST(task, move_only_values_are_returned) {
  auto make = []() -> task<std::unique_ptr<int>> { co_return std::make_unique<int>(5); };
  auto p = run([&]() -> task<std::unique_ptr<int>> { co_return co_await make(); }());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
}

}  // namespace
}  // namespace cogwheel
