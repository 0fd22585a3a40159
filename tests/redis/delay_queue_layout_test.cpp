// delay_queue's job entries against a real redis-server: each job's scheduled time is stamped
// on its payload in {name}:job (so a claim lists the due set without scores). The stamp follows
// the score where the producer or an operator moves the job (a reschedule, a requeue from the
// dead set); where the server makes a claimed job due again (a retry, an expired lease) the
// stamp keeps the scheduled time and the score is the next attempt's due time, which the claim
// reads for those jobs: job::scheduled_ms and job::attempt_due_ms. A prefetching worker starts
// a job at its attempt's due time, so a wrong one would start it early. Jobs of the layout
// before ({name}:payload, the bare payload, the due time only the score) still run at their
// score, are refused as duplicates and are drained.
#include <cogwheel/redis/delay_queue.hpp>

#include <cogwheel/cogwheel.hpp>

#include <algorithm>
#include <cstdio>
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

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(wall_clock::now().time_since_epoch()).count();
}

using redis_delay_queue_layout = queue_test;

// Every job of {jobs}:due has an entry in {jobs}:job with a stamp (16 digits, ':'), which is its
// score (or 0 for a score before 1970) unless the job has a count in {jobs}:attempts (claimed
// before: its score is then its next attempt's due time).
task<void> expect_stamps_are_scores(redis::client& c) {
  auto due = co_await c.command("ZRANGE", "{jobs}:due", 0, -1, "WITHSCORES");
  CO_ASSERT_OK(due);
  for (std::size_t i = 0; i + 1 < due->size(); i += 2) {
    const std::string id(due->elements()[i].str());
    auto counted = co_await c.command("HEXISTS", "{jobs}:attempts", id);
    CO_ASSERT_OK(counted);
    if (counted->integer() == 1) continue;
    auto entry = co_await c.command("HGET", "{jobs}:job", id);
    CO_ASSERT_OK(entry);
    CO_ASSERT_TRUE(entry->is_string());
    const std::string e(entry->str());
    CO_ASSERT_TRUE(e.size() >= 17 && e[16] == ':');
    EXPECT_EQ(std::stoll(e.substr(0, 16)), std::max(0LL, static_cast<long long>(*due->elements()[i + 1].to_double()))) << id;
  }
}

// Runs q with a lookahead (every job below is claimed well before it is due) until `jobs` have
// been acknowledged, at most 5 s.
task<void> run_prefetching(delay_queue& q, delay_queue::handler_type handler, redis::worker_options w, std::uint64_t jobs) {
  w.lookahead = 2s;
  w.ack_delay = 10ms;
  co_await run_until(q, std::move(handler), w, [&] { return q.stats().acked >= jobs; });
}

TEST_F(redis_delay_queue_layout, a_job_is_stored_with_its_due_time_stamped_on_its_payload) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    const auto due = wall_clock::time_point(std::chrono::milliseconds(1764614400123));
    EXPECT_TRUE(*co_await q.schedule("a", "the: payload", due));
    auto entry = co_await c->command("HGET", "{jobs}:job", "a");
    CO_ASSERT_OK(entry);
    EXPECT_EQ(entry->str(), "0001764614400123:the: payload");
    // A due time before 1970 is stamped 0 (started at once, as its score says).
    EXPECT_TRUE(*co_await q.schedule("old", "", wall_clock::time_point(-5s)));
    entry = co_await c->command("HGET", "{jobs}:job", "old");
    CO_ASSERT_OK(entry);
    EXPECT_EQ(entry->str(), "0000000000000000:");
    EXPECT_TRUE(*co_await q.reschedule("a", due + 1s));
    co_await expect_stamps_are_scores(*c);
    auto dead = co_await q.list_dead(0, 10);
    CO_ASSERT_OK(dead);
    EXPECT_TRUE(dead->empty());
  }());
}

TEST_F(redis_delay_queue_layout, a_rescheduled_job_prefetched_starts_at_its_new_time) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    const auto t = wall_clock::now();
    EXPECT_TRUE(*co_await q.schedule("moved", "m", t + 100ms));
    EXPECT_TRUE(*co_await q.reschedule("moved", t + 700ms));
    co_await expect_stamps_are_scores(*c);
    std::int64_t started = 0, due = 0;
    auto handler = [&](const job& j) -> task<result<void>> {
      started = wall_ms();
      due = j.attempt_due_ms;
      EXPECT_EQ(j.scheduled_ms, j.attempt_due_ms);  // the producer moved it: both are the new time
      EXPECT_EQ(j.payload, "m");
      co_return result<void>();
    };
    co_await run_prefetching(q, handler, worker(), 1);
    EXPECT_EQ(due, std::chrono::ceil<std::chrono::milliseconds>((t + 700ms).time_since_epoch()).count());
    EXPECT_GE(started, due);  // at its new time, not at the 100 ms it was first due
  }());
}

TEST_F(redis_delay_queue_layout, a_retry_prefetched_waits_for_its_back_off) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    EXPECT_TRUE(*co_await q.schedule("r", "retried", wall_clock::now()));
    std::vector<std::int64_t> at;
    auto handler = [&](const job& j) -> task<result<void>> {
      at.push_back(wall_ms());
      EXPECT_EQ(j.payload, "retried");
      if (j.attempt == 1) co_return make_error_code(errc::io_error);
      co_return result<void>();
    };
    auto w = worker();
    w.retry_initial = 400ms;
    co_await run_prefetching(q, handler, w, 1);
    CO_ASSERT_TRUE(at.size() == 2u);
    EXPECT_GE(at[1] - at[0], 400 - 1);  // ms granularity of Redis TIME
  }());
}

// An expired lease, reaped and requeued by the worker's own next claim: the first attempt's
// handler makes its claim record's lease end now (as if its worker had stopped for the whole
// visibility) and hangs; the claim that follows requeues the job, due at once, and claims it
// again. The second attempt keeps the time the producer asked for and is due at the reaping;
// the stats tell the two latenesses apart. (The first attempt's report is refused.)
TEST_F(redis_delay_queue_layout, a_job_claimed_again_after_its_lease_expired_keeps_its_scheduled_time) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    const auto due = wall_clock::now() + 50ms;
    const std::int64_t scheduled = std::chrono::ceil<std::chrono::milliseconds>(due.time_since_epoch()).count();
    EXPECT_TRUE(*co_await q.schedule("slow", "s", due));
    struct seen {
      std::int64_t attempt, scheduled_ms, attempt_due_ms;
    };
    std::vector<seen> runs;
    std::int64_t expired_at = 0;
    auto handler = [&](const job& j) -> task<result<void>> {
      runs.push_back({j.attempt, j.scheduled_ms, j.attempt_due_ms});
      if (j.attempt == 1) {
        co_await sleep_for(200ms);
        expired_at = wall_ms();
        (void)co_await c->command("ZADD", "{jobs}:inflight", "XX", 0, inflight_member(j));
        co_await sleep_for(1h);  // cut by its lease's deadline
      }
      co_return result<void>();
    };
    auto w = worker();
    w.visibility = 1s;
    w.max_wait = 20ms;
    co_await run_until(q, handler, w, [&] { return q.stats().acked >= 1 && q.stats().lost_leases >= 1; });
    CO_ASSERT_TRUE(runs.size() == 2u);
    EXPECT_EQ(runs[0].attempt, 1);
    EXPECT_EQ(runs[0].scheduled_ms, scheduled);
    EXPECT_EQ(runs[0].attempt_due_ms, scheduled);
    EXPECT_EQ(runs[1].attempt, 2);
    EXPECT_EQ(runs[1].scheduled_ms, scheduled);  // as the producer asked, not the requeue time
    EXPECT_GE(runs[1].attempt_due_ms, expired_at - 1);  // due at the reaping (ms of Redis TIME)
    const auto& s = q.stats();
    EXPECT_EQ(s.scheduled_lateness.count, 2u);
    EXPECT_EQ(s.attempt_lateness.count, 2u);
    EXPECT_GE(s.scheduled_lateness.max_us, 200'000u);  // the second start, 200 ms and more after its schedule
    EXPECT_LT(s.attempt_lateness.max_us, s.scheduled_lateness.max_us);
  }());
}

TEST_F(redis_delay_queue_layout, a_job_whose_lease_expired_keeps_its_stamp_and_a_requeued_dead_job_is_stamped_anew) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    // "lost": held by claim record 7, whose worker died; its lease ended a second ago, and its
    // stamp is the scheduled time of an hour ago. The next claim re-queues it, due now, and
    // claims it with its scheduled time kept.
    const std::int64_t before = wall_ms();
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "%016lld:", static_cast<long long>(before - 3'600'000));
    CO_ASSERT_OK(co_await c->command("HSET", "{jobs}:job", "lost", std::string(stamp) + "l"));
    CO_ASSERT_OK(co_await c->command("HSET", "{jobs}:claims", "7", std::string("\x91\xa4lost")));
    CO_ASSERT_OK(co_await c->command("ZADD", "{jobs}:inflight", before - 1000, "7"));
    CO_ASSERT_OK(co_await c->command("SET", "{jobs}:token", 7));
    EXPECT_TRUE(*co_await q.schedule("dead", "d", wall_clock::now()));
    std::int64_t lost_due = 0, lost_scheduled = 0;
    auto handler = [&](const job& j) -> task<result<void>> {
      if (j.id == "dead") co_return make_error_code(errc::io_error);
      EXPECT_EQ(j.payload, "l");
      EXPECT_EQ(j.attempt, 2);
      lost_due = j.attempt_due_ms;
      lost_scheduled = j.scheduled_ms;
      co_return result<void>();
    };
    auto w = worker();
    w.max_attempts = 2;
    w.retry_initial = 10ms;
    co_await run_until(q, handler, w, [&] { return q.stats().dead >= 1 && lost_due != 0; }, 300);
    EXPECT_GE(lost_due, before);  // this attempt: due when it was re-queued, not an hour ago
    EXPECT_EQ(lost_scheduled, before - 3'600'000);  // as its producer asked
    auto dead = co_await q.list_dead(0, 10);
    CO_ASSERT_OK(dead);
    CO_ASSERT_TRUE(dead->size() == 1u);
    EXPECT_EQ((*dead)[0].payload, "d");  // listed without its stamp
    EXPECT_EQ((*dead)[0].payload_bytes, 1u);
    EXPECT_TRUE(*co_await q.requeue_dead("dead", 500ms));
    co_await expect_stamps_are_scores(*c);
  }());
}

// Entries another program wrote into {jobs}:job without a stamp, or with a broken one: each runs
// with its bytes whole as its payload, never before the latest time its claim could have taken
// it (the claim's now + lookahead), whatever its score.
TEST_F(redis_delay_queue_layout, an_entry_without_a_well_formed_stamp_runs_whole_and_never_early) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    const std::int64_t now = wall_ms();
    const std::vector<std::string> bad = {"short", "000000000000000x:digits", "-000000000000001:negative",
                                          std::string(17, ':'), "00000000000000001234"};
    for (std::size_t i = 0; i < bad.size(); ++i) {
      const std::string id = "bad" + std::to_string(i);
      CO_ASSERT_OK(co_await c->command("ZADD", "{jobs}:due", now + 400, id));
      CO_ASSERT_OK(co_await c->command("HSET", "{jobs}:job", id, bad[i]));
    }
    delay_queue q(*c, "jobs");
    std::vector<std::string> payloads;
    bool early = false;
    auto handler = [&](const job& j) -> task<result<void>> {
      payloads.push_back(j.payload);
      early = early || wall_ms() < now + 400 || j.attempt_due_ms < now + 400 || j.scheduled_ms != j.attempt_due_ms;
      co_return result<void>();
    };
    co_await run_prefetching(q, handler, worker(), bad.size());
    std::sort(payloads.begin(), payloads.end());
    auto expected = bad;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(payloads, expected);
    EXPECT_FALSE(early);
  }());
}

TEST_F(redis_delay_queue_layout, jobs_of_the_layout_before_run_at_their_score_and_are_drained) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    // Written as the version before wrote them: the bare payload in {jobs}:payload.
    const std::int64_t now = wall_ms();
    for (int i = 0; i < 3; ++i) {
      const std::string id = "old" + std::to_string(i);
      CO_ASSERT_OK(co_await c->command("ZADD", "{jobs}:due", now + 300 + 100 * i, id));
      CO_ASSERT_OK(co_await c->command("HSET", "{jobs}:payload", id, "bare " + id));
    }
    delay_queue q(*c, "jobs");
    EXPECT_FALSE(*co_await q.schedule("old1", "again", wall_clock::now()));  // it exists
    EXPECT_TRUE(*co_await q.schedule("new", "stamped", wall_clock::now() + 200ms));
    std::vector<std::string> ran;
    bool on_time = true;
    auto handler = [&](const job& j) -> task<result<void>> {
      ran.push_back(j.id + "=" + j.payload);
      on_time = on_time && wall_ms() >= j.attempt_due_ms;
      if (j.id != "new") {
        EXPECT_EQ(j.attempt_due_ms, now + 300 + 100 * (j.id.back() - '0')) << j.id;
        EXPECT_EQ(j.scheduled_ms, j.attempt_due_ms) << j.id;
      }
      co_return result<void>();
    };
    co_await run_prefetching(q, handler, worker(), 4);
    EXPECT_EQ(ran, (std::vector<std::string>{"new=stamped", "old0=bare old0", "old1=bare old1", "old2=bare old2"}));
    EXPECT_TRUE(on_time);
    for (const char* key : {"{jobs}:payload", "{jobs}:job", "{jobs}:due", "{jobs}:inflight", "{jobs}:claims"}) {
      auto left = co_await c->command("EXISTS", key);
      CO_ASSERT_OK(left);
      EXPECT_EQ(left->integer(), 0) << key;
    }
  }());
}

}  // namespace
}  // namespace cogwheel::redis_test
