// expiry_map against a reference model (a std::map with each key's rounded deadline) under random
// inserts, moves earlier and later, persists, erases, finds and advances of a paused clock, on
// both timer queues, two ticks and both backends; a key past its deadline is not found before the
// queue fires it; cancellation of expired() before it starts, while it waits, in the advance that
// hands it a batch, and with its frame destroyed after the hand-over; destruction of a map with a
// waiter and with pending keys.
#include <cogwheel/runtime/expiry_map.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>

#include "expiry_map_model.hpp"
#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;
using map_type = expiry_map<std::uint64_t, std::uint64_t>;
using pairs = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

struct config {
  timer_kind kind;
  clock::duration tick;
  backend_kind backend;
};

std::string config_name(const testing::TestParamInfo<config>& info) {
  return std::string(info.param.kind == timer_kind::wheel ? "wheel" : "heap") + "_tick_" +
         std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(info.param.tick).count()) + "us_" +
         (info.param.backend == backend_kind::epoll ? "epoll" : "automatic");
}

class expiry_map_on : public testing::TestWithParam<config> {
 protected:
  runtime_options options() const {
    runtime_options o;
    o.paused_clock = true;
    o.timers = GetParam().kind;
    o.tick = GetParam().tick;
    o.backend = GetParam().backend;
    return o;
  }
};

INSTANTIATE_TEST_SUITE_P(queues, expiry_map_on,
                         testing::Values(config{timer_kind::wheel, 1ms, backend_kind::automatic},
                                         config{timer_kind::wheel, 100us, backend_kind::epoll},
                                         config{timer_kind::heap, 1ms, backend_kind::epoll},
                                         config{timer_kind::heap, 100us, backend_kind::automatic}),
                         config_name);

using test::rounded;

TEST_P(expiry_map_on, matches_a_reference_model) {
  const clock::duration tick = GetParam().tick;
  const int rounds = static_cast<int>(test::scaled(400));
  run([&]() -> task<> {
        std::mt19937_64 rng(GetParam().kind == timer_kind::wheel ? 47 : 74);
        auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
        const std::string failure = co_await test::play_against_model(pick, rounds, tick);
        EXPECT_EQ(failure, "");
      }(),
      options());
}

TEST_P(expiry_map_on, keys_due_in_one_tick_arrive_in_one_batch) {
  const clock::duration tick = GetParam().tick;
  run([&]() -> task<> {
        map_type m;
        const int n = static_cast<int>(test::scaled(5000));
        const clock::time_point start = test::loop_now();
        // Deadlines spread over a tick and a bit: those rounding up to the first due tick come
        // in the first batch, all of them.
        std::size_t first = 0;
        const clock::time_point first_due = rounded(start, 100 * tick - 6 * tick / 8, tick);
        for (int i = 0; i < n; ++i) {
          const clock::duration ttl = 100 * tick - (i % 7) * tick / 8;
          if (rounded(start, ttl, tick) == first_due) ++first;
          m.insert_or_assign(static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(i), ttl);
        }
        m.insert_or_assign(1'000'000, 1, 200 * tick);
        result<map_type::batch> b = co_await m.expired();
        CO_ASSERT_TRUE(b.has_value());
        EXPECT_EQ(b->size(), first);
        EXPECT_EQ(test::loop_now(), first_due);
        EXPECT_EQ(m.size(), static_cast<std::size_t>(n) + 1 - first);
      }(),
      options());
}

TEST_P(expiry_map_on, expired_cut_short_while_waiting_takes_nothing) {
  const clock::duration tick = GetParam().tick;
  run([&]() -> task<> {
        map_type m;
        m.insert_or_assign(1, 10, 50 * tick);
        result<map_type::batch> b = co_await with_timeout(m.expired(), 10 * tick);
        EXPECT_EQ(b.error(), errc::timed_out);
        EXPECT_EQ(m.size(), 1U);
        co_await sleep_for(60 * tick);  // nobody waits: the key is dropped
        EXPECT_EQ(m.size(), 0U);
        m.insert_or_assign(2, 20, 5 * tick);
        b = co_await m.expired();  // the seat is free again
        CO_ASSERT_TRUE(b.has_value());
        EXPECT_EQ(*b, (pairs{{2, 20}}));
      }(),
      options());
}

TEST_P(expiry_map_on, expired_cut_short_in_the_advance_that_fires_keeps_nothing_back) {
  const clock::duration tick = GetParam().tick;
  run([&]() -> task<> {
        for (int order = 0; order < 2; ++order) {
          map_type m;
          // The timeout and the key fall due in the same advance, filed in either order.
          if (order == 1) m.insert_or_assign(1, 10, 20 * tick);
          auto op = with_timeout(m.expired(), 20 * tick);
          if (order == 0) m.insert_or_assign(1, 10, 20 * tick);
          result<map_type::batch> b = co_await std::move(op);
          if (b) {
            EXPECT_EQ(*b, (pairs{{1, 10}}));  // handed first: the batch is the outcome
          } else {
            EXPECT_EQ(b.error(), errc::timed_out);
          }
          EXPECT_EQ(m.size(), 0U);
          // Nothing kept back for a later waiter: the next expired() waits for the next key.
          m.insert_or_assign(2, 20, 5 * tick);
          const clock::time_point before = test::loop_now();
          b = co_await m.expired();
          CO_ASSERT_TRUE(b.has_value());
          EXPECT_EQ(*b, (pairs{{2, 20}}));
          EXPECT_GE(test::loop_now(), before + 5 * tick);
        }
      }(),
      options());
}

TEST_P(expiry_map_on, expired_in_a_stopped_task_does_not_start) {
  run([&]() -> task<> {
        map_type m;
        m.insert_or_assign(1, 10, 10 * GetParam().tick);
        result<map_type::batch> b = co_await with_timeout(m.expired(), 0ns);
        EXPECT_FALSE(b.has_value());
        co_await sleep_for(11 * GetParam().tick);
        EXPECT_EQ(m.size(), 0U);  // dropped: nobody was waiting
      }(),
      options());
}

// An eager coroutine that awaits one expired() and records its outcome: its frame can be
// destroyed from outside at any moment.
struct probe {
  struct promise_type {
    probe get_return_object() { return probe{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> handle;
};

probe await_one(map_type& m, bool& finished) {
  (void)co_await m.expired();
  finished = true;
}

TEST_P(expiry_map_on, a_batch_handed_to_a_destroyed_waiter_goes_to_the_next) {
  const clock::duration tick = GetParam().tick;
  run([&]() -> task<> {
        map_type m;
        bool finished = false;
        // Filed first, the sleep resumes first in the advance that hands the batch over.
        auto killer = [](probe& p, clock::duration d) -> task<> {
          co_await sleep_for(d);
          p.handle.destroy();
        };
        std::optional<probe> p;
        p.emplace(await_one(m, finished));
        spawn(killer(*p, 30 * tick));
        co_await yield();  // the killer files its sleep
        m.insert_or_assign(7, 70, 30 * tick);
        co_await sleep_for(31 * tick);
        EXPECT_FALSE(finished) << "the waiter resumed before its frame was destroyed: nothing tested";
        EXPECT_EQ(m.size(), 0U);
        const clock::time_point before = test::loop_now();
        result<map_type::batch> b = co_await with_timeout(m.expired(), tick);  // the kept batch, at once
        CO_ASSERT_TRUE(b.has_value());
        EXPECT_EQ(*b, (pairs{{7, 70}}));
        EXPECT_EQ(test::loop_now(), before);
      }(),
      options());
}

TEST_P(expiry_map_on, destroying_the_map_ends_its_waiter_and_cancels_its_timers) {
  const clock::duration tick = GetParam().tick;
  run([&]() -> task<> {
        const std::size_t timers_before = pending_timers();
        result<map_type::batch> b = errc::timed_out;
        bool done = false;
        {
          map_type m;
          for (std::uint64_t i = 0; i < 1000; ++i) m.insert_or_assign(i, i, (1 + i % 50) * tick);
          EXPECT_EQ(pending_timers(), timers_before + 1000);
          auto waiter = [](map_type& map, result<map_type::batch>& out, bool& flag) -> task<> {
            out = co_await map.expired();
            flag = true;
          };
          spawn(waiter(m, b, done));
          co_await yield();
        }
        EXPECT_EQ(pending_timers(), timers_before);
        co_await yield();
        EXPECT_TRUE(done);
        EXPECT_EQ(b.error(), errc::operation_canceled);
      }(),
      options());
}

// A real clock: the key's deadline passes while the task runs without yielding, so the queue has
// not fired it, and find() must not return it.
TEST(expiry_map, a_key_past_its_deadline_is_not_found_before_the_queue_fires_it) {
  run([]() -> task<> {
    map_type m;
    m.insert_or_assign(1, 10, 2ms);
    EXPECT_NE(m.find(1), nullptr);
    CO_ASSERT_TRUE(m.expiry(1).has_value());
    const clock::time_point until = *m.expiry(1) + 1ms;
    while (clock::now() < until) {
    }
    EXPECT_EQ(m.find(1), nullptr);
    EXPECT_FALSE(m.expiry(1).has_value());
    EXPECT_FALSE(m.expire_after(1, 1h));
    EXPECT_FALSE(m.persist(1));
    EXPECT_EQ(m.size(), 1U);  // not fired yet
    EXPECT_TRUE(m.insert_or_assign(1, 11, 1h));  // new: the old value has expired
    EXPECT_EQ(*m.find(1), 11U);
    co_return;
  }());
}

TEST(expiry_map, holds_many_maps_of_one_type_and_many_types) {
  run([]() -> task<> {
    std::vector<std::unique_ptr<expiry_map<int, int>>> maps;
    for (int i = 0; i < 300; ++i) {
      maps.push_back(std::make_unique<expiry_map<int, int>>());
      maps.back()->insert_or_assign(i, i, 1ms);
    }
    expiry_map<std::string, std::string> strings;
    EXPECT_TRUE(strings.insert_or_assign("a", std::string(100, 'x'), 1ms));
    EXPECT_FALSE(strings.insert_or_assign("a", "b", 1ms));
    EXPECT_EQ(*strings.find("a"), "b");
    co_await sleep_for(3ms);
    for (auto& m : maps) EXPECT_EQ(m->size(), 0U);
    EXPECT_EQ(strings.size(), 0U);
  }());
}

}  // namespace
}  // namespace cogwheel
