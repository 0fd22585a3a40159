// submit_to carries the caller's budget and honours it (docs/deadlines.md): the remote task
// runs under the caller's remaining time re-anchored on its own core, is stopped there when it
// passes (in a sleep, in a socket read, in a compute loop that checks stop_requested()) or when
// the caller is stopped, and the caller gets timed_out once it has unwound, not when the remote
// work would have finished. with_timeout(submit_to(...)) works; a plain function runs to its
// end. Real clocks (each core's own), two cores, margins wide enough for a loaded machine: the
// remote work would take 5 s or more where the budget is tens of milliseconds. Labelled
// `multicore` (ThreadSanitizer in CI).
#include <cogwheel/runtime/runtime.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <cogwheel/io/udp.hpp>
#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/stats.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

constexpr auto long_work = 5s;  // what the remote work would take if it were not stopped
constexpr auto prompt = 2s;     // far below long_work, far above any scheduling hiccup

// Runs body on core 0 of a two-core runtime; core 1 serves submit_to.
template <class Body>
void on_two_cores(Body body) {
  runtime rt(runtime_options{.cores = 2});
  std::atomic<bool> ran{false};
  rt.run([&](unsigned core) -> task<> {
    if (core != 0) co_return;
    co_await body();
    ran = true;
  });
  EXPECT_TRUE(ran.load());
}

TEST(submit_to_budget, the_remote_task_runs_under_the_callers_remaining_budget) {
  on_two_cores([]() -> task<> {
    clock::duration remote_budget{};
    unsigned remote_core = 99;
    auto caller = [&]() -> task<> {
      co_await sleep_for(10ms);  // 10 ms of the 200 spent here
      co_await submit_to(1, [&]() -> task<> {
        remote_budget = co_await current_deadline() - now();
        remote_core = this_core();
        co_return;
      });
    };
    auto r = co_await with_timeout(caller(), 200ms);
    EXPECT_TRUE(r.has_value());
    EXPECT_EQ(remote_core, 1u);
    EXPECT_GT(remote_budget, 0ms);
    EXPECT_LE(remote_budget, 190ms);  // what was left, not the whole budget
  });
}

TEST(submit_to_budget, without_a_budget_the_remote_task_has_none) {
  on_two_cores([]() -> task<> {
    clock::time_point remote{};
    co_await submit_to(1, [&]() -> task<> {
      remote = co_await current_deadline();
      co_return;
    });
    EXPECT_EQ(remote, clock::time_point::max());
  });
}

TEST(submit_to_budget, a_remote_sleep_is_cut_when_the_budget_passes_and_the_caller_times_out_promptly) {
  on_two_cores([]() -> task<> {
    std::atomic<bool> remote_finished{false};
    auto caller = [&]() -> task<result<int>> {
      co_return co_await submit_to(1, [&]() -> task<result<int>> {
        auto slept = co_await with_timeout(sleep_for(long_work), 24h);
        remote_finished = true;
        if (!slept) co_return slept.error();
        co_return 7;
      });
    };
    const auto t0 = clock::now();
    result<int> r = co_await with_timeout(caller(), 30ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_GE(clock::now() - t0, 30ms);
    EXPECT_LT(clock::now() - t0, prompt);
    EXPECT_TRUE(remote_finished.load());  // it unwound before the caller resumed
  });
}

TEST(submit_to_budget, with_timeout_takes_submit_to_directly) {
  on_two_cores([]() -> task<> {
    const auto t0 = clock::now();
    result<int> r = co_await with_timeout(submit_to(1, []() -> task<int> {
      co_await sleep_for(long_work);
      co_return 7;
    }), 30ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_LT(clock::now() - t0, prompt);
    result<int> fast = co_await with_timeout(submit_to(1, [] { return 8; }), 10s);
    EXPECT_TRUE(fast.has_value() && *fast == 8);
  });
}

TEST(submit_to_budget, a_remote_socket_read_is_cut_when_the_budget_passes) {
  on_two_cores([]() -> task<> {
    std::atomic<bool> cancelled{false};
    auto caller = [&]() -> task<result<std::size_t>> {
      co_return co_await submit_to(1, [&]() -> task<result<std::size_t>> {
        auto sock = udp_socket::bind(socket_address::ipv4_loopback(0));
        if (!sock) co_return sock.error();
        std::byte buf[64];
        auto got = co_await sock->receive(buf);  // nobody sends
        cancelled = !got && got.error() == errc::operation_canceled;
        co_return got;
      });
    };
    const auto t0 = clock::now();
    auto r = co_await with_timeout(caller(), 30ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_LT(clock::now() - t0, prompt);
    EXPECT_TRUE(cancelled.load());
  });
}

TEST(submit_to_budget, a_remote_compute_loop_that_checks_stop_requested_ends_at_the_budget) {
  on_two_cores([]() -> task<> {
    std::atomic<long> rounds{0};
    auto caller = [&]() -> task<> {
      co_await submit_to(1, [&]() -> task<> {
        const auto give_up = clock::now() + long_work;
        while (!co_await stop_requested() && clock::now() < give_up) {
          const auto until = clock::now() + 100us;  // a slice of computation
          while (clock::now() < until) {
          }
          ++rounds;
          co_await yield();  // lets the loop run: the budget's timer, the caller's stop
        }
      });
    };
    const auto t0 = clock::now();
    auto r = co_await with_timeout(caller(), 30ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_LT(clock::now() - t0, prompt);
    EXPECT_GT(rounds.load(), 0);
  });
}

TEST(submit_to_budget, a_caller_stopped_for_another_reason_stops_the_remote_task) {
  on_two_cores([]() -> task<> {
    // The budget is an hour; the caller's deadline is pulled in after the call was made, so
    // only the caller's stop message can stop the remote task in time.
    deadline d(1h);
    std::atomic<bool> remote_cut{false};
    auto caller = [&]() -> task<> {
      co_await submit_to(1, [&]() -> task<> {
        auto slept = co_await with_timeout(sleep_for(long_work), 24h);
        remote_cut = slept.error() == errc::operation_canceled;
      });
    };
    spawn([](deadline& d) -> task<> {
      co_await sleep_for(20ms);
      d.reset(0ms);
    }(d));
    const auto t0 = clock::now();
    auto r = co_await with_deadline(caller(), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_LT(clock::now() - t0, prompt);
    EXPECT_TRUE(remote_cut.load());
  });
}

TEST(submit_to_budget, a_plain_function_cannot_be_stopped_midway_and_runs_to_its_end) {
  on_two_cores([]() -> task<> {
    const auto t0 = clock::now();
    result<int> r = co_await with_timeout(submit_to(1, [] {
      std::this_thread::sleep_for(100ms);
      return 1;
    }), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_GE(clock::now() - t0, 100ms);
  });
}

TEST(submit_to_budget, a_caller_past_its_deadline_sends_nothing) {
  on_two_cores([]() -> task<> {
    std::atomic<bool> ran{false};
    deadline d(1h);
    auto caller = [&]() -> task<> {
      d.reset_to(now() - 1ms);
      co_await submit_to(1, [&] { ran = true; });
    };
    const std::uint64_t before = this_core_metrics().remote_messages;
    auto r = co_await with_deadline(caller(), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    co_await submit_to(1, [] {});  // a round trip: anything sent before has landed
    EXPECT_FALSE(ran.load());
    EXPECT_EQ(this_core_metrics().remote_messages - before, 1u);  // the reply to the round trip only
  });
}

TEST(submit_to_budget, the_caller_frame_destroyed_mid_flight_stops_the_remote_task) {
  on_two_cores([]() -> task<> {
    std::atomic<bool> remote_done{false};
    std::atomic<bool> remote_cut{false};
    {
      task<> caller = [](std::atomic<bool>& done, std::atomic<bool>& cut) -> task<> {
        co_await submit_to(1, [&]() -> task<> {
          auto slept = co_await with_timeout(sleep_for(long_work), 24h);
          cut = slept.error() == errc::operation_canceled;
          done = true;
        });
      }(remote_done, remote_cut);
      caller.start(detail::continuation(), nullptr).resume();  // suspended in submit_to
      co_await sleep_for(10ms);
    }  // destroyed here, its request in flight
    const auto t0 = clock::now();
    while (!remote_done.load() && clock::now() - t0 < prompt) co_await sleep_for(1ms);
    EXPECT_TRUE(remote_done.load());
    EXPECT_TRUE(remote_cut.load());
  });
}

// stop() while both cores call each other under budgets and timeouts, at a different moment
// each round: stop messages and replies in flight when a loop shuts down are dropped with it
// (LeakSanitizer checks that every call's state is freed).
TEST(submit_to_budget, stop_racing_budgeted_calls_leaves_nothing_behind) {
  std::atomic<long> calls{0};
  for (int round = 0; round < 50; ++round) {
    runtime rt(runtime_options{.cores = 2});
    std::atomic<int> started{0};
    std::thread stopper([&] {
      while (started.load() < 2) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(200 + 40 * round));
      rt.stop();
    });
    rt.run([&](unsigned core) -> task<> {
      ++started;
      for (int i = 0;; ++i) {
        auto one = [](unsigned other, int i) -> task<result<int>> {
          co_return co_await submit_to(other, [i]() -> task<result<int>> {
            if (i % 3 == 0) co_await sleep_for(1h);  // cut by the budget below
            co_return i;
          });
        };
        (void)co_await with_timeout(one(1 - core, i), std::chrono::microseconds(50 + i % 7 * 100));
        ++calls;
      }
    });
    stopper.join();
  }
  EXPECT_GT(calls.load(), 50);
}

}  // namespace
}  // namespace cogwheel
