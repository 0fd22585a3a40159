// delay_queue at the limits of its arguments and of the client, against a real redis-server:
// list_dead with the largest count, over a dead set larger than one reply may be, and over a
// payload larger than a reply may be; extend and visibility by the largest duration; extend to
// less than the lease left; an announcement of a job due in millions of years; queue names and
// ids with braces, spaces, binary bytes and nothing at all; a failure's text of 2 MiB; a worker
// with no wait or no lease.
#include <cogwheel/redis/delay_queue.hpp>

#include <cogwheel/cogwheel.hpp>

#include <limits>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../io/support.hpp"
#include "queue_fixture.hpp"

namespace cogwheel::redis_test {
namespace {

using namespace std::chrono_literals;
using redis::delay_queue;
using redis::job;
using redis::wall_clock;

using redis_delay_queue_limits = queue_test;

// Writes `n` dead jobs d1..dn straight into queue `name`'s keys (died at 1..n ms, each with
// a payload of `payload_bytes` bytes and a reason): one script, not n round trips.
task<void> bury_directly(redis::client& c, const std::string& name, int n, int payload_bytes) {
  const std::string lua = R"(
for i = 1, tonumber(ARGV[1]) do
  local id = 'd' .. i
  redis.call('ZADD', KEYS[1], i, id)
  redis.call('HSET', KEYS[2], id, string.rep('p', tonumber(ARGV[2])))
  redis.call('HSET', KEYS[3], id, 'failed on attempt 10: no')
  redis.call('HSET', KEYS[4], id, 10)
end
return 1)";
  auto r = co_await c.command("EVAL", lua, 4, "{" + name + "}:dead", "{" + name + "}:payload", "{" + name + "}:reason",
                              "{" + name + "}:attempts", n, payload_bytes);
  EXPECT_TRUE(r.has_value()) << r.error().message();
}

// Runs q's worker until `jobs` of its jobs were acknowledged or failed (at most 3 s), then stops it.
task<void> run_until_reported(delay_queue& q, delay_queue::handler_type handler, redis::worker_options w, std::uint64_t jobs) {
  co_await run_until(q, std::move(handler), w, [&] { return q.stats().acked + q.stats().failed >= jobs; }, 300);
}

// Before: the script computed offset + count - 1 in Lua, a float past 2^53 that ZRANGE refused
// ("value is not an integer or out of range"), so "everything" failed with server_error.
TEST_F(redis_delay_queue_limits, list_dead_with_the_largest_count_lists_every_dead_job) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    co_await bury_directly(*c, "jobs", 3, 4);
    auto all = co_await q.list_dead(0, std::numeric_limits<std::size_t>::max());
    CO_ASSERT_OK(all);
    CO_ASSERT_TRUE(all->size() == 3u);
    EXPECT_EQ((*all)[0].id, "d1");
    EXPECT_EQ((*all)[2].id, "d3");
    EXPECT_EQ((*all)[2].payload, "pppp");
    EXPECT_EQ((*all)[2].payload_bytes, 4u);
    EXPECT_EQ((*all)[2].died_ms, 3);
    EXPECT_EQ((*all)[2].attempts, 10);
    auto tail = co_await q.list_dead(2, std::numeric_limits<std::size_t>::max());
    CO_ASSERT_OK(tail);
    CO_ASSERT_TRUE(tail->size() == 1u);
    EXPECT_EQ((*tail)[0].id, "d3");
    auto past = co_await q.list_dead(std::numeric_limits<std::size_t>::max(), 10);
    CO_ASSERT_OK(past);
    EXPECT_TRUE(past->empty());
  }());
}

// Before: one script returned the whole listing as one reply; past the client's max_reply_bytes
// the reply was refused (reply_too_large) and the connection dropped, with every command in
// flight on it, each time the operator asked. Now the listing comes in pages.
TEST_F(redis_delay_queue_limits, list_dead_pages_a_dead_set_larger_than_one_reply_may_be) {
  constexpr int dead = 20000;
  run([&]() -> task<void> {
    auto o = options();
    o.max_reply_bytes = 1u << 20;  // 20,000 dead jobs as one reply take ~10 MiB
    auto c = co_await redis::client::connect(o);
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    co_await bury_directly(*c, "jobs", dead, 40);
    auto all = co_await q.list_dead(0, dead + 5);
    CO_ASSERT_OK(all);
    CO_ASSERT_TRUE(all->size() == static_cast<std::size_t>(dead));
    for (int i = 0; i < dead; ++i) {
      if ((*all)[i].died_ms != i + 1 || (*all)[i].payload.size() != 40u) {
        ADD_FAILURE() << "job " << i << ": " << (*all)[i].id << " died at " << (*all)[i].died_ms;
        break;
      }
    }
    EXPECT_EQ(c->stats().connects, 1u);  // the connection held
    auto some = co_await q.list_dead(19990, 100);
    CO_ASSERT_OK(some);
    CO_ASSERT_TRUE(some->size() == 10u);
    EXPECT_EQ((*some)[0].id, "d19991");
  }());
}

// A payload over max_payload_bytes (buried by a claim for that reason: another producer wrote
// it) is left out of the listing, its size told: before, its bytes went into the reply, and one
// larger than the client's max_reply_bytes made every listing fail and drop the connection.
TEST_F(redis_delay_queue_limits, list_dead_leaves_out_a_payload_over_max_payload_bytes) {
  run([&]() -> task<void> {
    auto o = options();
    o.max_reply_bytes = 1u << 20;
    auto c = co_await redis::client::connect(o);
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs", redis::queue_options{.max_payload_bytes = 1000});
    co_await bury_directly(*c, "jobs", 1, 2 << 20);
    CO_ASSERT_OK(co_await c->command("ZADD", "{jobs}:dead", 2, "small"));
    CO_ASSERT_OK(co_await c->command("HSET", "{jobs}:payload", "small", "s"));
    auto all = co_await q.list_dead(0, 10);
    CO_ASSERT_OK(all);
    CO_ASSERT_TRUE(all->size() == 2u);
    EXPECT_EQ((*all)[0].id, "d1");
    EXPECT_TRUE((*all)[0].payload.empty());
    EXPECT_EQ((*all)[0].payload_bytes, std::size_t{2} << 20);
    EXPECT_EQ((*all)[1].payload, "s");
    EXPECT_EQ(c->stats().connects, 1u);
  }());
}

// A handler's error text is the dead job's reason. Before, it was stored whole: an exception
// whose text held a large body (2 MiB here) made every listing of the dead set that reached it
// larger than the client's max_reply_bytes (refused, the connection dropped). It is cut to
// 4 KiB now, and a page counts the reasons' bytes too.
TEST_F(redis_delay_queue_limits, a_huge_failure_message_is_cut_and_the_dead_set_still_lists) {
  run([&]() -> task<void> {
    auto o = options();
    o.max_reply_bytes = 1u << 20;
    auto c = co_await redis::client::connect(o);
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(*co_await q.schedule("f" + std::to_string(i), "", wall_clock::now()));
    auto handler = [&](const job&) -> task<result<void>> {
      throw std::runtime_error(std::string(2 << 20, 'e'));
      co_return result<void>();
    };
    auto w = worker();
    w.max_attempts = 1;
    co_await run_until_reported(q, handler, w, 3);
    EXPECT_EQ(q.stats().dead, 3u);
    auto dead = co_await q.list_dead(0, 10);
    CO_ASSERT_OK(dead);
    CO_ASSERT_TRUE(dead->size() == 3u);
    EXPECT_LE((*dead)[0].reason.size(), 4200u);
    EXPECT_EQ((*dead)[0].reason.substr(0, 40), "failed on attempt 1: exception: eeeeeeee");
    EXPECT_EQ(c->stats().connects, 1u);
  }());
}

// The lease is never shortened on the server, and now neither is the handler's deadline: before,
// extend(j, d) set the deadline to d (less the margin) from now, so a handler asking for less
// than it had left was cut at once, while its lease still ran.
TEST_F(redis_delay_queue_limits, extending_by_less_than_the_lease_left_never_cuts_the_handler) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    EXPECT_TRUE(*co_await q.schedule("x", "", wall_clock::now()));
    auto handler = [&](const job& j) -> task<result<void>> {
      auto e = co_await q.extend(j, 10ms);  // 5 s of lease left
      EXPECT_TRUE(e && *e);
      e = co_await q.extend(j, -1s);
      EXPECT_TRUE(e && *e);
      co_await sleep_for(300ms);
      if (co_await stop_requested()) co_return make_error_code(errc::timed_out);
      co_return result<void>();
    };
    auto w = worker();
    w.visibility = 5s;
    co_await run_until_reported(q, handler, w, 1);
    EXPECT_EQ(q.stats().acked, 1u);
    EXPECT_EQ(q.stats().failed, 0u);
  }());
}

// milliseconds::max() as a visibility or an extension: before, the handler's deadline was
// computed as now + that in nanoseconds, which overflowed into the past (the handler was cut
// at once). It saturates now: the lease is as long as asked.
TEST_F(redis_delay_queue_limits, the_largest_visibility_or_extension_does_not_cut_the_handler) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    EXPECT_TRUE(*co_await q.schedule("x", "", wall_clock::now()));
    EXPECT_TRUE(*co_await q.schedule("y", "", wall_clock::now()));
    auto handler = [&](const job& j) -> task<result<void>> {
      if (j.id == "y") {
        auto e = co_await q.extend(j, std::chrono::milliseconds::max());
        EXPECT_TRUE(e && *e);
      }
      co_await sleep_for(100ms);
      if (co_await stop_requested()) co_return make_error_code(errc::timed_out);
      co_return result<void>();
    };
    auto w = worker();
    w.visibility = std::chrono::milliseconds::max();
    co_await run_until_reported(q, handler, w, 2);
    EXPECT_EQ(q.stats().acked, 2u);
    EXPECT_EQ(q.stats().failed, 0u);
  }());
}

// schedule_after(milliseconds::max()) is due in 292 million years: Lua formats that time as a
// float ("9.22...e+18"), which the worker read as 9 (ms since the epoch) and so woke for it
// and claimed for nothing, once per such schedule. An announcement that is not an integer is
// ignored now. The job itself waits in the due set.
TEST_F(redis_delay_queue_limits, a_job_due_in_millions_of_years_wakes_no_worker) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    auto handler = [&](const job&) -> task<result<void>> { co_return result<void>(); };
    auto w = worker();
    w.max_wait = 5s;
    auto scenario = [&]() -> task<void> {
      for (int i = 0; i < 300 && q.stats().claims < 1; ++i) co_await sleep_for(10ms);
      co_await sleep_for(100ms);  // asleep, subscribed
      for (int i = 0; i < 5; ++i)
        EXPECT_TRUE(*co_await q.schedule_after("far" + std::to_string(i), "", std::chrono::milliseconds::max()));
      co_await sleep_for(200ms);
      q.stop();
    };
    co_await when_all(q.run(handler, w), scenario());
    EXPECT_EQ(q.stats().woken_by_message, 0u);
    EXPECT_EQ(q.stats().claims, 1u);
    EXPECT_EQ(q.stats().fired, 0u);
    auto d = co_await q.depth();
    CO_ASSERT_OK(d);
    EXPECT_EQ(d->due, 5);
  }());
}

// Before: max_wait 0 made a worker on an empty queue claim in a busy loop (thousands of claim
// scripts a second), and visibility 0 gave every handler a deadline already past (each job cut
// and retried until dead). run() refuses both now, before it connects or claims anything.
TEST_F(redis_delay_queue_limits, a_worker_without_a_wait_or_a_lease_is_refused) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    auto handler = [&](const job&) -> task<result<void>> { co_return result<void>(); };
    for (int bad = 0; bad < 3; ++bad) {
      auto w = worker();
      if (bad == 0) w.max_wait = 0ms;
      if (bad == 1) w.visibility = 0ms;
      if (bad == 2) w.visibility = -1s;
      auto r = co_await with_timeout(q.run(handler, w), 200ms);
      EXPECT_EQ(r.error(), std::make_error_code(errc::invalid_argument)) << bad;
    }
    EXPECT_EQ(q.stats().claims, 0u);
  }());
}

// Held: names with braces and spaces (the keys' hash tag stops at the first '}', the same for
// every key of the queue), ids with NUL and non-UTF-8 bytes, and an empty id and payload go
// through schedule, claim, acknowledgement and cancel unchanged.
TEST_F(redis_delay_queue_limits, odd_names_binary_ids_and_empty_ids_run_and_cancel) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "a} {b c");
    const std::string binary("\0\xff\r\n{x}", 7);
    const std::set<std::string> ids{binary, "", "with space"};
    for (const auto& id : ids) EXPECT_TRUE(*co_await q.schedule(id, id, wall_clock::now()));
    EXPECT_TRUE(*co_await q.schedule_after("cancelled", "", 1h));
    EXPECT_FALSE(*co_await q.schedule("", "again", wall_clock::now()));  // exists
    EXPECT_TRUE(*co_await q.cancel("cancelled"));
    std::set<std::string> ran;
    auto handler = [&](const job& j) -> task<result<void>> {
      EXPECT_EQ(j.id, j.payload);
      ran.insert(j.id);
      co_return result<void>();
    };
    co_await run_until_reported(q, handler, worker(), 3);
    EXPECT_EQ(ran, ids);
    EXPECT_EQ(q.stats().acked, 3u);
    auto d = co_await q.depth();
    CO_ASSERT_OK(d);
    EXPECT_EQ(d->due + d->in_flight + d->dead, 0);
    auto left = co_await c->command("HLEN", "{a} {b c}:job");
    CO_ASSERT_OK(left);
    EXPECT_EQ(left->to_integer().value_or(-1), 0);
  }());
}

}  // namespace
}  // namespace cogwheel::redis_test
