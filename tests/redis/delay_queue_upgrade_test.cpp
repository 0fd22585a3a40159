// delay_queue on a queue written by the version before the pending set (main e2f7e93 and
// earlier): its jobs sat in {name}:due as plain ids with their payloads in {name}:payload, and an
// old worker's claim record may be in flight. The keys are written here exactly as that version's
// scripts wrote them; this version's worker must run every one of those jobs once, with its
// payload, never before its due time, and producers' and operators' calls must reach them.
#include <cogwheel/redis/delay_queue.hpp>

#include <cogwheel/cogwheel.hpp>

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "../io/support.hpp"
#include "queue_fixture.hpp"

namespace cogwheel::redis_test {
namespace {

using namespace std::chrono_literals;
using redis::delay_queue;
using redis::job;
using redis::wall_clock;

using redis_delay_queue_upgrade = queue_test;

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(wall_clock::now().time_since_epoch()).count();
}

TEST_F(redis_delay_queue_upgrade, jobs_scheduled_by_the_layout_before_run_once_with_their_payloads_never_early) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    // The layout before: ZADD {up}:due <due ms> <id>, HSET {up}:payload <id> <payload>.
    const std::int64_t t0 = wall_ms();
    std::map<std::string, std::int64_t> due;
    for (int i = 0; i < 20; ++i) {
      const std::string id = "old" + std::to_string(i);
      due[id] = t0 + 300 + 10 * i;
      CO_ASSERT_OK(co_await c->command("ZADD", "{up}:due", due[id], id));
      CO_ASSERT_OK(co_await c->command("HSET", "{up}:payload", id, "p-" + id));
    }
    CO_ASSERT_OK(co_await c->command("ZADD", "{up}:due", t0 + 3'600'000, "later"));
    CO_ASSERT_OK(co_await c->command("HSET", "{up}:payload", "later", "p-later"));
    // An old worker's claim record of one job whose lease expired: token 5, the MessagePack
    // array ["stale"].
    CO_ASSERT_OK(co_await c->command("SET", "{up}:token", 5));
    CO_ASSERT_OK(co_await c->command("ZADD", "{up}:inflight", 0, "5"));
    CO_ASSERT_OK(co_await c->command("HSET", "{up}:claims", "5", std::string("\x91\xa5stale", 7)));
    CO_ASSERT_OK(co_await c->command("HSET", "{up}:payload", "stale", "p-stale"));
    due["stale"] = 0;

    delay_queue q(*c, "up");
    // A job of the layout before is a job: its id cannot be scheduled again.
    EXPECT_FALSE(*co_await q.schedule("old3", "again", wall_clock::now()));
    auto depth = co_await q.depth();
    CO_ASSERT_OK(depth);
    EXPECT_EQ(depth->due, 21);
    std::map<std::string, int> runs;
    std::map<std::string, std::int64_t> attempts;
    bool early = false, payloads_ok = true;
    auto handler = [&](const job& j) -> task<result<void>> {
      ++runs[j.id];
      attempts[j.id] = j.attempt;
      if (wall_ms() < j.due_ms || j.due_ms < due[j.id]) early = true;
      if (j.payload != "p-" + j.id) payloads_ok = false;
      co_return result<void>();
    };
    auto scenario = [&]() -> task<void> {
      for (int i = 0; i < 300 && q.stats().acked < 21; ++i) co_await sleep_for(10ms);
      q.stop();
    };
    auto w = worker();
    w.lookahead = 100ms;
    co_await when_all(q.run(handler, w), scenario());
    EXPECT_EQ(runs.size(), 21u);
    for (const auto& [id, n] : runs) EXPECT_EQ(n, 1) << id;
    EXPECT_FALSE(early);
    EXPECT_TRUE(payloads_ok);
    EXPECT_EQ(attempts["stale"], 2);  // the expired claim counted, as before
    EXPECT_EQ(attempts["old0"], 1);

    // The far one is still pending, and reached by reschedule, depth and cancel.
    depth = co_await q.depth();
    CO_ASSERT_OK(depth);
    EXPECT_EQ(depth->due, 1);
    EXPECT_EQ(depth->in_flight, 0);
    EXPECT_TRUE(*co_await q.reschedule("later", wall_clock::now() + 2h));
    EXPECT_TRUE(*co_await q.cancel("later"));
    EXPECT_FALSE(*co_await q.cancel("later"));
    depth = co_await q.depth();
    CO_ASSERT_OK(depth);
    EXPECT_EQ(depth->due, 0);
    auto left = co_await c->command("HLEN", "{up}:payload");
    CO_ASSERT_OK(left);
    EXPECT_EQ(left->integer(), 0);
  }());
}

// A job of the layout before that fails is retried (in this version's pending set) and its
// attempts count on, up to max_attempts, then it is dead with its reason.
TEST_F(redis_delay_queue_upgrade, a_job_of_the_layout_before_keeps_max_attempts_and_dies_with_its_reason) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    CO_ASSERT_OK(co_await c->command("ZADD", "{up}:due", wall_ms(), "f"));
    CO_ASSERT_OK(co_await c->command("HSET", "{up}:payload", "f", "pf"));
    CO_ASSERT_OK(co_await c->command("HSET", "{up}:attempts", "f", 1));  // claimed once before
    delay_queue q(*c, "up");
    int ran = 0;
    auto handler = [&](const job& j) -> task<result<void>> {
      ++ran;
      EXPECT_EQ(j.payload, "pf");
      co_return std::make_error_code(std::errc::io_error);
    };
    auto scenario = [&]() -> task<void> {
      for (int i = 0; i < 300 && q.stats().dead == 0; ++i) co_await sleep_for(10ms);
      q.stop();
    };
    auto w = worker();
    w.max_attempts = 3;
    w.retry_initial = 1ms;
    co_await when_all(q.run(handler, w), scenario());
    EXPECT_EQ(ran, 2);
    auto dead = co_await q.list_dead(0, 10);
    CO_ASSERT_OK(dead);
    CO_ASSERT_TRUE(dead->size() == 1u);
    EXPECT_EQ((*dead)[0].id, "f");
    EXPECT_EQ((*dead)[0].payload, "pf");
    EXPECT_EQ((*dead)[0].attempts, 3);
    EXPECT_NE((*dead)[0].reason.find("failed on attempt 3"), std::string::npos) << (*dead)[0].reason;
  }());
}

}  // namespace
}  // namespace cogwheel::redis_test
