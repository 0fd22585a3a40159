// timer_node stores its expiry callback as a 1-byte index into a process-wide table
// (timer/include/cogwheel/timer/detail/expire_registry.hpp). These tests pin what that must not
// change: each node fires the function it was given, by either constructor or set_on_expire(),
// from many threads at once, on the wheel and the heap; the node is 16 bytes; and the 256th
// distinct callback aborts with a message instead of wrapping the index.
#include <cogwheel/timer/heap.hpp>
#include <cogwheel/timer/node.hpp>
#include <cogwheel/timer/wheel.hpp>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace cogwheel::timer;
using namespace std::chrono_literals;

constexpr clock::time_point t0{1000h};

static_assert(sizeof(timer_node) == 16, "a pending timer on the wheel costs 16 + 8 bytes");

// 300 distinct callbacks: callback<I> counts into fired[I] and records the node it got, so a
// node given callback<I> is seen to run exactly that one.
constexpr std::size_t callback_count = 300;
std::array<std::atomic<int>, callback_count> fired{};

struct tagged : timer_node {
  using timer_node::timer_node;
  std::size_t expect = 0;  // the callback this node was given
  std::size_t got = callback_count;
};

template <std::size_t I>
void callback(timer_node& n) noexcept {
  fired[I].fetch_add(1, std::memory_order_relaxed);
  static_cast<tagged&>(n).got = I;
}

template <std::size_t... I>
constexpr std::array<timer_node::expire_fn, sizeof...(I)> make_callbacks(std::index_sequence<I...>) {
  return {&callback<I>...};
}
constexpr auto callbacks = make_callbacks(std::make_index_sequence<callback_count>{});

// Schedules every node on a fresh queue of type Queue, fires them all, and checks each ran its own.
template <class Queue>
void expect_each_fires_its_own(std::vector<std::unique_ptr<tagged>>& nodes) {
  Queue q(1ms, t0);
  for (std::size_t i = 0; i < nodes.size(); ++i) q.schedule(*nodes[i], t0 + std::chrono::milliseconds(1 + i % 7));
  EXPECT_EQ(q.advance(t0 + 10ms), nodes.size());
  for (const auto& n : nodes) EXPECT_EQ(n->got, n->expect);
  for (auto& n : nodes) n->got = callback_count;
}

TEST(expire_registry, each_node_fires_the_callback_it_was_given) {
  // Within the 255-callback budget, whatever order and however the callback was given.
  std::vector<std::unique_ptr<tagged>> nodes;
  for (std::size_t k = 0; k < 3 * 100; ++k) {
    const std::size_t i = (k * 37) % 100;  // not in registration order
    auto n = std::make_unique<tagged>();
    if (k % 3 == 0) n = std::make_unique<tagged>(callbacks[i]);
    else n->set_on_expire(callbacks[i]);
    n->expect = i;
    nodes.push_back(std::move(n));
  }
  // The compile-time path agrees with the lookup for the same function.
  auto a = std::make_unique<tagged>(timer_node::calls<&callback<5>>{});
  a->expect = 5;
  nodes.push_back(std::move(a));
  auto b = std::make_unique<tagged>(callbacks[6]);
  b->set_on_expire(timer_node::calls<&callback<7>>{});
  b->expect = 7;
  nodes.push_back(std::move(b));
  expect_each_fires_its_own<timer_wheel>(nodes);
  expect_each_fires_its_own<timer_heap>(nodes);
}

TEST(expire_registry, a_null_callback_fires_nothing_and_can_be_set_again) {
  timer_wheel q(1ms, t0);
  tagged n(callbacks[3]);
  n.set_on_expire(nullptr);
  q.schedule(n, t0 + 1ms);
  EXPECT_EQ(q.advance(t0 + 1ms), 1u);  // fired (counted), no callback run
  EXPECT_EQ(n.got, callback_count);
  n.set_on_expire(timer_node::calls<nullptr>{});
  q.schedule(n, t0 + 2ms);
  EXPECT_EQ(q.advance(t0 + 2ms), 1u);
  EXPECT_EQ(n.got, callback_count);
}

// Eight threads give nodes callbacks first..first+count-1 in different orders at the same time;
// each thread then fires its own nodes on its own wheel (as each loop does). A lost or
// duplicated entry would fire the wrong function. Returns the nodes that fired another callback
// than theirs.
int register_at_once_and_count_wrong(std::size_t first, std::size_t count) {
  constexpr int threads = 8;
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  std::array<int, threads> wrong{};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([t, first, count, &ready, &wrong] {
      std::vector<std::unique_ptr<tagged>> nodes;
      ready.fetch_add(1);
      while (ready.load() < threads) {
      }
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t i = first + (k * (2 * t + 1) + 13 * t) % count;
        nodes.push_back(std::make_unique<tagged>(callbacks[i]));
        nodes.back()->expect = i;
      }
      timer_wheel q(1ms, t0);
      for (auto& n : nodes) q.schedule(*n, t0 + 1ms);
      q.advance(t0 + 1ms);
      for (const auto& n : nodes) wrong[t] += n->got != n->expect;
    });
  }
  for (auto& th : pool) th.join();
  int total = 0;
  for (const int w : wrong) total += w;
  return total;
}

TEST(expire_registry, threads_registering_at_once_agree) { EXPECT_EQ(register_at_once_and_count_wrong(100, 100), 0); }

// The same race in 40 fresh processes (a callback is inserted once per process, so only a fresh
// table races again), each on 250 callbacks (nearly the whole table). With the insertion's lock
// removed, a round went wrong about one time in seven on two cores; 40 rounds all but always.
TEST(expire_registry, threads_registering_at_once_agree_in_fresh_processes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int round = 0; round < 40; ++round)
    EXPECT_EXIT(std::_Exit(register_at_once_and_count_wrong(0, 250) == 0 ? 0 : 1), testing::ExitedWithCode(0), "")
        << "round " << round;
}

TEST(expire_registry, the_256th_distinct_callback_aborts_with_message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // 255 callbacks fit (index 0 is "none"); whatever this process registered before, 300
  // distinct ones cannot.
  const auto register_all = [] {
    for (const timer_node::expire_fn fn : callbacks) timer_node n(fn);
  };
  EXPECT_DEATH(register_all(), "more than 255 distinct timer_node expiry callbacks");
}

}  // namespace
