// The multi-core runtime: one loop per core with per-core mains, submit_to between cores
// (values, task<T>s, exceptions), stop() from another thread and from a signal, and the main
// tasks' exceptions. Labelled `multicore`: CI also runs these under ThreadSanitizer.
#include <cogwheel/runtime/runtime.hpp>

#include <gtest/gtest.h>

#include <sched.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>

#include "test_support.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

runtime_options two_cores(runtime_options o = {}) {
  o.cores = 2;
  return o;
}

// Sets an atomic flag when destroyed, on whichever core's thread that happens.
struct atomic_probe {
  std::atomic<bool>* flag;
  explicit atomic_probe(std::atomic<bool>& f) : flag(&f) {}
  atomic_probe(atomic_probe&& o) noexcept : flag(std::exchange(o.flag, nullptr)) {}
  ~atomic_probe() {
    if (flag != nullptr) flag->store(true);
  }
};

TEST(runtime, pins_each_core_inside_the_cpus_the_process_may_use) {
  // As under `taskset -c <last cpu>` or a cgroup cpuset: the threads must stay inside it.
  cpu_set_t before;
  ASSERT_EQ(::sched_getaffinity(0, sizeof before, &before), 0);
  int last = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &before)) last = cpu;
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "needs two CPUs to restrict the process to one";
  cpu_set_t only_last;
  CPU_ZERO(&only_last);
  CPU_SET(last, &only_last);
  ASSERT_EQ(::sched_setaffinity(0, sizeof only_last, &only_last), 0);  // threads inherit it
  std::mutex m;
  std::vector<int> pinned;
  runtime rt(two_cores());
  rt.run([&](unsigned) -> task<void> {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    ::sched_getaffinity(0, sizeof mine, &mine);
    std::lock_guard lock(m);
    pinned.push_back(CPU_COUNT(&mine) == 1 && CPU_ISSET(last, &mine) ? last : -1);
    co_return;
  });
  ASSERT_EQ(::sched_setaffinity(0, sizeof before, &before), 0);
  EXPECT_EQ(pinned, (std::vector<int>{last, last}));
}

TEST(runtime, runs_one_main_per_core_each_on_its_own_core) {
  std::mutex mu;
  std::set<unsigned> seen;
  runtime rt(two_cores());
  EXPECT_EQ(rt.cores(), 2u);
  rt.run([&](unsigned core) -> task<> {
    EXPECT_EQ(this_core(), core);
    co_await sleep_for(1ms);
    EXPECT_EQ(this_core(), core);
    std::lock_guard lock(mu);
    seen.insert(this_core());
  });
  EXPECT_EQ(seen, (std::set<unsigned>{0, 1}));
}

TEST(runtime, default_options_use_every_cpu) {
  runtime rt;
  EXPECT_EQ(rt.cores(), std::max(1u, std::thread::hardware_concurrency()));
}

TEST(runtime, can_run_again) {
  runtime rt(two_cores(test::paused()));
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> mains{0};
    rt.run([&](unsigned) -> task<> {
      co_await sleep_for(10ms);
      ++mains;
    });
    EXPECT_EQ(mains.load(), 2);
  }
}

TEST(runtime, spawned_tasks_keep_their_core_running_until_they_finish) {
  std::atomic<int> finished{0};
  runtime rt(two_cores(test::paused()));
  rt.run([&](unsigned) -> task<> {
    spawn([](std::atomic<int>& f) -> task<> {
      co_await sleep_for(1h);
      ++f;
    }(finished));
    co_return;  // main is done at once; its spawned task is not
  });
  EXPECT_EQ(finished.load(), 2);
}

TEST(submit_to, runs_the_function_on_the_target_core_and_returns_its_value) {
  runtime rt(two_cores());
  rt.run([](unsigned core) -> task<> {
    if (core != 0) co_return;
    const unsigned where = co_await submit_to(1, [] { return this_core(); });
    EXPECT_EQ(where, 1u);
    EXPECT_EQ(this_core(), 0u);  // resumed at home
    const std::string s = co_await submit_to(1, [] { return std::string("from core 1"); });
    EXPECT_EQ(s, "from core 1");
    std::unique_ptr<int> p = co_await submit_to(1, [] { return std::make_unique<int>(3); });
    EXPECT_EQ(*p, 3);
    bool ran = false;
    co_await submit_to(1, [&ran] { ran = true; });  // void; `ran` read back after the reply
    EXPECT_TRUE(ran);
  });
}

TEST(submit_to, ping_pong_of_a_counter_between_two_cores) {
  const int rounds = static_cast<int>(test::scaled(10'000, 1'000));
  int result = 0;
  runtime rt(two_cores());
  rt.run([&](unsigned core) -> task<> {
    if (core != 0) co_return;
    int v = 0;
    for (int i = 0; i < rounds; ++i) {
      v = co_await submit_to(1, [v] {
        EXPECT_EQ(this_core(), 1u);
        return v + 1;
      });
    }
    result = v;
  });
  EXPECT_EQ(result, rounds);
}

TEST(submit_to, task_returning_functions_are_awaited_on_the_target_core) {
  const int rounds = static_cast<int>(test::scaled(2'000, 200));
  int result = 0;
  runtime rt(two_cores());
  rt.run([&](unsigned core) -> task<> {
    if (core != 0) co_return;
    int v = 0;
    for (int i = 0; i < rounds; ++i) {
      // The captures live in the lambda object: it must outlive the task it returns.
      v = co_await submit_to(1, [v]() -> task<int> {
        co_await yield();
        EXPECT_EQ(this_core(), 1u);
        co_return v + 1;
      });
    }
    result = v;
  });
  EXPECT_EQ(result, rounds);
}

TEST(submit_to, both_cores_can_call_each_other_at_once) {
  const int rounds = static_cast<int>(test::scaled(5'000, 500));
  std::atomic<int> total{0};
  runtime rt(two_cores());
  rt.run([&](unsigned core) -> task<> {
    const unsigned other = 1 - core;
    int v = 0;
    for (int i = 0; i < rounds; ++i) v = co_await submit_to(other, [v, other] {
      EXPECT_EQ(this_core(), other);
      return v + 1;
    });
    total += v;
  });
  EXPECT_EQ(total.load(), 2 * rounds);
}

TEST(submit_to, exception_in_the_function_propagates_to_the_caller) {
  runtime rt(two_cores());
  rt.run([](unsigned core) -> task<> {
    if (core != 0) co_return;
    EXPECT_THROW(co_await submit_to(1, []() -> int { throw std::runtime_error("on core 1"); }), std::runtime_error);
    EXPECT_THROW(co_await submit_to(1, []() -> task<int> {
                   co_await sleep_for(1ms);
                   throw std::domain_error("in a task on core 1");
                 }),
                 std::domain_error);
    try {
      co_await submit_to(1, [] { throw std::invalid_argument("void"); });
      ADD_FAILURE() << "no exception";
    } catch (const std::invalid_argument& e) {
      EXPECT_STREQ(e.what(), "void");
    }
    EXPECT_EQ(this_core(), 0u);
  });
}

TEST(submit_to, a_core_that_does_not_exist_aborts_with_a_clear_message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        runtime rt(two_cores());
        rt.run([](unsigned core) -> task<> {
          if (core == 0) co_await submit_to(7, [] { return 0; });
        });
      },
      "submit_to\\(7\\): no such core");
}

// Real clock, on purpose: the point is that an hour-long sleep does not keep run() waiting.
TEST(runtime, stop_from_another_thread_returns_promptly_and_destroys_pending_frames) {
  std::atomic<bool> destroyed[2] = {false, false};
  std::atomic<int> sleeping{0};
  runtime rt(two_cores());
  // Started before run(), and synchronised with nothing (relaxed loads): stop() must be safe to
  // call at any moment from any thread, which ThreadSanitizer checks. The wait only makes sure
  // the stop comes while the cores sleep.
  std::thread stopper([&] {
    while (sleeping.load(std::memory_order_relaxed) < 2) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);
    rt.stop();
  });
  const auto start = std::chrono::steady_clock::now();
  rt.run([&](unsigned core) -> task<> {
    atomic_probe probe(destroyed[core]);
    spawn([](atomic_probe) -> task<> { co_await sleep_for(1h); }(atomic_probe(destroyed[core])));
    ++sleeping;
    co_await sleep_for(1h);
  });
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_TRUE(destroyed[0].load());
  EXPECT_TRUE(destroyed[1].load());
}

// Stops the runtime while both cores keep calling each other, at a different moment each round:
// messages in flight when a loop shuts down are dropped with it, never run on a loop that has
// shut down (the frames they would spawn would leak: LeakSanitizer checks).
TEST(runtime, stop_while_cores_exchange_messages_leaves_nothing_behind) {
  std::atomic<long> exchanged{0};
  for (int round = 0; round < 100; ++round) {
    runtime rt(two_cores());
    std::atomic<int> started{0};
    std::atomic<bool> destroyed[2] = {false, false};
    std::thread stopper([&] {
      while (started.load() < 2) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(100 + 20 * round));
      rt.stop();
    });
    const auto t0 = std::chrono::steady_clock::now();
    rt.run([&](unsigned core) -> task<> {
      atomic_probe probe(destroyed[core]);
      ++started;
      for (int v = 0;;) {
        const int before = v;
        if (v % 2 == 0)
          v = co_await submit_to(1 - core, [v]() -> task<int> { co_return v + 1; });
        else
          v = co_await submit_to(1 - core, [v] { return v + 1; });
        EXPECT_EQ(v, before + 1);  // each reply is the answer to its own request
        ++exchanged;
      }
    });
    stopper.join();
    // run() returned promptly, and both mains (suspended in submit_to) were destroyed.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
    EXPECT_TRUE(destroyed[0].load());
    EXPECT_TRUE(destroyed[1].load());
  }
  EXPECT_GT(exchanged.load(), 100);  // the stops did race real traffic
}

// submit_to under deadlines and stops: submit_deadline_test.cpp.

// The caller's frame destroyed while its submit_to is in flight (not by a stop: the task
// holding it goes away): the remote work still runs to its end (a task is stopped: its sleep
// is cut short, and it goes on to its end), its result is dropped, nothing resumes the
// destroyed frame, and the request's state is released (LeakSanitizer checks). Both kinds of
// remote work, a plain function and a task, and a reply that comes back while the caller's
// core is busy with other work.
TEST(submit_to, a_caller_frame_destroyed_mid_flight_is_never_resumed_and_the_remote_work_still_ends) {
  runtime rt(two_cores());
  std::atomic<int> remote_ran{0};
  std::atomic<bool> checked{false};
  rt.run([&](unsigned core) -> task<> {
    if (core != 0) co_return;
    constexpr int callers = 20;
    bool resumed = false;
    std::atomic<bool> destroyed[callers] = {};
    std::vector<task<>> frames;
    for (int i = 0; i < callers; ++i) {
      auto caller = [](int i, atomic_probe, std::atomic<int>& ran, bool& resumed) -> task<> {
        if (i % 2 == 0) {
          (void)co_await submit_to(1, [&ran]() -> task<int> {
            co_await sleep_for(1h);  // stopped by the caller's frame going away
            ++ran;
            co_return 1;
          });
        } else {
          (void)co_await submit_to(1, [&ran] {
            ++ran;
            return 2;
          });
        }
        resumed = true;
      };
      frames.push_back(caller(i, atomic_probe(destroyed[i]), remote_ran, resumed));
      frames.back().start(detail::continuation(), nullptr).resume();  // suspended in submit_to
    }
    frames.clear();  // every caller's frame goes while its request is in flight
    for (const auto& d : destroyed) EXPECT_TRUE(d.load());
    const auto give_up = clock::now() + 5s;
    while (remote_ran.load() < callers && clock::now() < give_up) co_await sleep_for(1ms);
    co_await sleep_for(20ms);  // the replies arrive and are dropped
    EXPECT_EQ(remote_ran.load(), callers);
    EXPECT_FALSE(resumed);
    checked = true;
  });
  EXPECT_TRUE(checked.load());
}

TEST(runtime, a_stop_before_run_makes_run_return_at_once_without_starting_the_mains) {
  runtime rt(two_cores());
  rt.stop();
  std::atomic<int> started{0};
  rt.run([&](unsigned) -> task<> {
    ++started;
    co_await sleep_for(1h);
  });
  EXPECT_EQ(started.load(), 0);
  // The stop was consumed: the next run() runs.
  rt.run([&](unsigned) -> task<> {
    ++started;
    co_return;
  });
  EXPECT_EQ(started.load(), 2);
}

// A controller thread starts run() and stops it at once, racing the start-up, many times: no
// stop is lost (join() would hang) and nothing races (ThreadSanitizer).
TEST(runtime, a_stop_racing_the_start_of_run_is_never_lost) {
  const int rounds = static_cast<int>(test::scaled(1000, 100));
  for (int round = 0; round < rounds; ++round) {
    runtime rt(two_cores());
    std::thread runner([&] {
      rt.run([](unsigned) -> task<> { co_await sleep_for(1h); });
    });
    if (round % 2 == 1) std::this_thread::yield();
    rt.stop();
    runner.join();
  }
}

// Real clock, on purpose, as above.
TEST(runtime, sigint_stops_the_runtime_when_asked_to) {
  runtime_options o = two_cores();
  o.stop_on_signals = true;
  std::atomic<bool> destroyed{false};
  runtime rt(o);
  const auto start = std::chrono::steady_clock::now();
  rt.run([&](unsigned core) -> task<> {
    atomic_probe probe(destroyed);
    if (core == 1) {
      co_await sleep_for(10ms);
      std::raise(SIGINT);
    }
    co_await sleep_for(1h);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_TRUE(destroyed.load());
  // The default disposition is back once run() returns.
  struct sigaction sa {};
  ::sigaction(SIGINT, nullptr, &sa);
  EXPECT_EQ(sa.sa_handler, SIG_DFL);
}

TEST(runtime, main_task_exception_is_rethrown_by_run) {
  runtime rt(two_cores(test::paused()));
  EXPECT_THROW(rt.run([](unsigned core) -> task<> {
                 co_await sleep_for(5ms);
                 if (core == 1) throw std::runtime_error("core 1 failed");
               }),
               std::runtime_error);
}

// Real clock, on purpose: a failed main task must not leave run() waiting for the other cores
// to run out of work (a server's never would).
TEST(runtime, main_task_exception_stops_the_other_cores) {
  runtime rt(two_cores());
  const auto start = std::chrono::steady_clock::now();
  try {
    rt.run([](unsigned core) -> task<> {
      if (core == 1) {
        co_await sleep_for(10ms);
        throw std::runtime_error("core 1 failed");
      }
      co_await sleep_for(1h);
    });
    ADD_FAILURE() << "run() did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "core 1 failed");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}


// Socket identities (io_request::socket) are taken whenever a socket is opened, accepted or
// connected, on every core: never 0, never reused, and without a write to a line the cores share
// per socket. So each thread takes them from a block of its own: two threads taking identities
// at once each see an unbroken run, where a shared counter would interleave them.
TEST(socket_identity, threads_taking_identities_at_once_get_distinct_unbroken_runs) {
  constexpr int threads = 2;
  constexpr std::size_t per_thread = 2'000;
  std::array<std::vector<std::uint64_t>, threads> got;
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([t, &got, &ready] {
      got[t].reserve(per_thread);
      ready.fetch_add(1);
      while (ready.load() < threads) {
      }
      for (std::size_t i = 0; i < per_thread; ++i) {
        got[t].push_back(detail::new_socket_identity());
        if (i % 64 == 0) std::this_thread::yield();  // lets the other thread in, one core or two
      }
    });
  for (auto& th : pool) th.join();
  std::set<std::uint64_t> all;
  for (int t = 0; t < threads; ++t) {
    std::size_t breaks = 0;
    for (std::size_t i = 0; i < per_thread; ++i) {
      EXPECT_NE(got[t][i], 0u);
      all.insert(got[t][i]);
      if (i > 0 && got[t][i] != got[t][i - 1] + 1) ++breaks;
    }
    // A run breaks only where a thread's block ends (thousands of identities each).
    EXPECT_LE(breaks, 1u) << "thread " << t;
  }
  EXPECT_EQ(all.size(), threads * per_thread);
}

}  // namespace
}  // namespace cogwheel
