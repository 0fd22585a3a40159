// delay_queue at its edges, against a real redis-server: fencing tokens (a stale report is
// refused, the handler can extend its lease and learns when it lost it), handlers that throw
// anything, run() under a timeout, an oversized payload, max_attempts when leases expire,
// schedule_after on the server's clock, the paused clock, the dead set, lookahead prefetch.
#include <cogwheel/redis/delay_queue.hpp>

#include <cogwheel/cogwheel.hpp>

#include <map>
#include <optional>
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

using redis_delay_queue_safety = queue_test;

// The first run of the job loses its lease while it works (its expiry is forced into the past
// and another claim takes the job): its extension and its success report are refused, and the
// second run holds a greater token.
TEST_F(redis_delay_queue_safety, a_report_from_a_lost_lease_is_refused_and_the_next_claim_holds_a_greater_token) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    std::vector<std::int64_t> tokens;
    std::optional<bool> first_extend;
    auto handler = [&](const job& j) -> task<result<void>> {
      tokens.push_back(j.token);
      if (tokens.size() == 1) {
        auto expired = co_await c->command("ZADD", "{jobs}:inflight", "XX", 0, inflight_member(j));
        EXPECT_TRUE(expired.has_value());
        while (tokens.size() < 2) co_await sleep_for(5ms);  // a claim took it again
        auto e = co_await q.extend(j, 10s);
        if (e) first_extend = *e;
      }
      co_return result<void>();
    };
    auto scenario = [&]() -> task<void> {
      EXPECT_TRUE(*co_await q.schedule("f", "", wall_clock::now()));
      for (int i = 0; i < 500 && q.stats().acked + q.stats().lost_leases < 2; ++i) co_await sleep_for(10ms);
      q.stop();
    };
    auto w = worker();
    w.concurrency = 4;
    co_await when_all(q.run(handler, w), scenario());
    CO_ASSERT_TRUE(tokens.size() == 2u);
    EXPECT_GT(tokens[1], tokens[0]);
    EXPECT_EQ(first_extend, std::optional<bool>(false));
    EXPECT_EQ(q.stats().acked, 1u);
    EXPECT_EQ(q.stats().lost_leases, 2u);  // the refused extension and the refused ack
    auto d = co_await q.depth();
    CO_ASSERT_OK(d);
    EXPECT_EQ(d->due + d->in_flight + d->dead, 0);
  }());
}

// A failure report from a lost lease must not re-queue the job under its new claimant.
TEST_F(redis_delay_queue_safety, a_failure_from_a_lost_lease_does_not_retry_the_job_under_the_new_claim) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    int runs = 0;
    auto handler = [&](const job& j) -> task<result<void>> {
      const int mine = ++runs;
      if (mine == 1) {
        auto expired = co_await c->command("ZADD", "{jobs}:inflight", "XX", 0, inflight_member(j));
        EXPECT_TRUE(expired.has_value());
        while (runs < 2) co_await sleep_for(5ms);
        co_return make_error_code(errc::io_error);  // refused: not retried
      }
      co_await sleep_for(300ms);  // still running when the stale failure arrives
      co_return result<void>();
    };
    auto scenario = [&]() -> task<void> {
      EXPECT_TRUE(*co_await q.schedule("f", "", wall_clock::now()));
      for (int i = 0; i < 500 && q.stats().acked < 1; ++i) co_await sleep_for(10ms);
      co_await sleep_for(300ms);  // a wrongful retry would run now
      q.stop();
    };
    auto w = worker();
    w.concurrency = 4;
    w.retry_initial = 10ms;
    co_await when_all(q.run(handler, w), scenario());
    EXPECT_EQ(runs, 2);
    EXPECT_EQ(q.stats().lost_leases, 1u);
    EXPECT_EQ(q.stats().retries, 0u);
    EXPECT_EQ(q.stats().acked, 1u);
  }());
}

// Cancelling a running job removes its in-flight entry (found by its id alone, the token being
// in the entry): the worker's acknowledgement, riding on a claim, is refused, and the same id
// scheduled again meanwhile keeps its payload and runs.
TEST_F(redis_delay_queue_safety, a_running_job_cancelled_loses_its_lease_and_its_id_can_be_scheduled_again) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    std::vector<std::string> payloads;
    std::optional<std::int64_t> in_flight_after_cancel;
    auto handler = [&](const job& j) -> task<result<void>> {
      payloads.push_back(j.payload);
      if (payloads.size() == 1) {
        auto cancelled = co_await q.cancel("c");
        EXPECT_TRUE(cancelled && *cancelled);
        auto d = co_await q.depth();
        if (d) in_flight_after_cancel = d->in_flight;
        auto again = co_await q.schedule_after("c", "second", 0ms);
        EXPECT_TRUE(again && *again);
      }
      co_return result<void>();
    };
    auto scenario = [&]() -> task<void> {
      EXPECT_TRUE(*co_await q.schedule("c", "first", wall_clock::now()));
      for (int i = 0; i < 500 && q.stats().acked + q.stats().lost_leases < 2; ++i) co_await sleep_for(10ms);
      q.stop();
    };
    auto w = worker();
    w.concurrency = 4;
    w.lookahead = 100ms;
    w.ack_delay = 50ms;
    co_await when_all(q.run(handler, w), scenario());
    EXPECT_EQ(payloads, (std::vector<std::string>{"first", "second"}));
    EXPECT_EQ(in_flight_after_cancel, std::optional<std::int64_t>(0));
    EXPECT_EQ(q.stats().lost_leases, 1u);  // the cancelled run's acknowledgement
    EXPECT_EQ(q.stats().acked, 1u);
    auto d = co_await q.depth();
    CO_ASSERT_OK(d);
    EXPECT_EQ(d->due + d->in_flight + d->dead, 0);
    auto left = co_await c->command("HLEN", "{jobs}:job");
    CO_ASSERT_OK(left);
    EXPECT_EQ(left->integer(), 0);
  }());
}

// A record acknowledged as one range over all its positions, one of whose jobs was cancelled
// while it ran and its id scheduled again: the acknowledgement takes the others out and leaves
// the new job (its payload) alone, though its range names the cancelled job's position too (a
// record with a job taken out is not acknowledged straight from its bytes).
// Runs q with a lookahead worker (4 slots, lookahead 100 ms, acknowledgements gathered for
// 50 ms) until `ended` of its jobs were acknowledged or refused, or 5 s passed.
task<void> run_lookahead(delay_queue& q, delay_queue::handler_type handler, redis::worker_options w, std::uint64_t ended) {
  w.concurrency = 4;
  w.lookahead = 100ms;
  w.ack_delay = 50ms;
  co_await run_until(q, std::move(handler), w, [&] { return q.stats().acked + q.stats().lost_leases >= ended; });
}

// A record acknowledged whole, none of its jobs taken out (the acknowledgement deletes it
// straight from its bytes): its in-flight member, its jobs' payloads and their counts of claims
// (one job claimed before) are gone.
TEST_F(redis_delay_queue_safety, a_record_acknowledged_whole_leaves_no_payload_count_or_member) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    const auto t = wall_clock::now();  // scheduled before the worker starts: one claim, one record
    for (const char* id : {"a", "b", "c"}) EXPECT_TRUE(*co_await q.schedule(id, "p", t));
    CO_ASSERT_OK(co_await c->command("HSET", "{jobs}:attempts", "b", 1));  // b was claimed once before
    std::vector<std::int64_t> attempts;
    auto handler = [&](const job& j) -> task<result<void>> {
      attempts.push_back(j.attempt);
      co_return result<void>();
    };
    co_await run_lookahead(q, handler, worker(), 3);
    EXPECT_EQ(q.stats().acked, 3u);
    EXPECT_EQ(attempts, (std::vector<std::int64_t>{1, 2, 1}));
    for (const char* key : {"{jobs}:job", "{jobs}:payload", "{jobs}:attempts", "{jobs}:claims", "{jobs}:inflight"}) {
      auto left = co_await c->command("EXISTS", key);
      CO_ASSERT_OK(left);
      EXPECT_EQ(left->integer(), 0) << key;
    }
  }());
}

TEST_F(redis_delay_queue_safety, a_record_acknowledged_whole_after_a_cancel_keeps_the_new_job) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    int ran = 0;
    bool rescheduled = false;
    auto handler = [&](const job& j) -> task<result<void>> {
      ++ran;
      if (j.id == "a") {
        auto cancelled = co_await q.cancel("b");
        EXPECT_TRUE(cancelled && *cancelled);
        auto again = co_await q.schedule_after("b", "second", 1h);
        EXPECT_TRUE(again && *again);
        rescheduled = true;
      }
      // The three end together: one acknowledgement, one range over the whole record.
      for (int i = 0; i < 500 && !rescheduled; ++i) co_await sleep_for(1ms);
      co_return result<void>();
    };
    const auto t = wall_clock::now();  // scheduled before the worker starts: one claim, one record
    for (const char* id : {"a", "b", "c"}) EXPECT_TRUE(*co_await q.schedule(id, "first", t));
    co_await run_lookahead(q, handler, worker(), 3);
    EXPECT_EQ(ran, 3);
    EXPECT_EQ(q.stats().acked, 2u);
    EXPECT_EQ(q.stats().lost_leases, 1u);
    auto d = co_await q.depth();
    CO_ASSERT_OK(d);
    EXPECT_EQ(d->due, 1);
    EXPECT_EQ(d->in_flight, 0);
    auto entry = co_await c->command("HGET", "{jobs}:job", "b");  // its due time's stamp, then the payload
    CO_ASSERT_OK(entry);
    EXPECT_EQ(entry->is_string() ? std::string(entry->str()).substr(17) : std::string("(none)"), "second");
    auto left = co_await c->command("HLEN", "{jobs}:job");
    CO_ASSERT_OK(left);
    EXPECT_EQ(left->integer(), 1);
  }());
}

// One claim of three jobs writes one in-flight entry (its record): an acknowledgement of one
// job leaves the others held, and when the record's lease expires the claim after re-queues the
// two unacknowledged jobs (their attempt counted) and not the acknowledged one; their stale
// acknowledgements are refused.
TEST_F(redis_delay_queue_safety, an_expired_claim_record_requeues_only_its_unacknowledged_jobs_with_attempts_counted) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    const auto t = already_due();  // one claim takes all three: one record
    for (const char* id : {"a", "b", "c"}) EXPECT_TRUE(*co_await q.schedule(id, id, t));
    std::map<std::string, std::vector<std::int64_t>> attempts;
    std::optional<std::int64_t> entries;  // ZCARD {jobs}:inflight once "a" is acknowledged
    auto handler = [&](const job& j) -> task<result<void>> {
      auto& mine = attempts[j.id];
      mine.push_back(j.attempt);
      if (j.id == "a" || j.attempt > 1) co_return result<void>();
      for (int i = 0; i < 300 && q.stats().acked < 1; ++i) co_await sleep_for(5ms);
      if (j.id == "b") {
        auto n = co_await c->command("ZCARD", "{jobs}:inflight");
        if (n) entries = n->integer();
        (void)co_await c->command("ZADD", "{jobs}:inflight", "XX", 0, inflight_member(j));
      }
      for (int i = 0; i < 300 && mine.size() < 2; ++i) co_await sleep_for(5ms);
      co_return result<void>();  // refused: the record expired and the job was claimed again
    };
    auto scenario = [&]() -> task<void> {
      for (int i = 0; i < 500 && q.stats().acked + q.stats().lost_leases < 5; ++i) co_await sleep_for(10ms);
      q.stop();
    };
    auto w = worker();
    w.concurrency = 8;
    co_await when_all(q.run(handler, w), scenario());
    EXPECT_EQ(entries, std::optional<std::int64_t>(1));
    EXPECT_EQ(attempts["a"], (std::vector<std::int64_t>{1}));
    EXPECT_EQ(attempts["b"], (std::vector<std::int64_t>{1, 2}));
    EXPECT_EQ(attempts["c"], (std::vector<std::int64_t>{1, 2}));
    EXPECT_EQ(q.stats().acked, 3u);
    EXPECT_EQ(q.stats().lost_leases, 2u);
    auto d = co_await q.depth();
    CO_ASSERT_OK(d);
    EXPECT_EQ(d->due + d->in_flight + d->dead, 0);
  }());
}

// Extending one job of a record prolongs the record (the lease of the jobs claimed with it),
// and a shorter extension never shortens it.
TEST_F(redis_delay_queue_safety, extending_a_job_prolongs_its_claim_record_and_never_shortens_it) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    // Already due, so that the first claim takes both into one record (already_due(); with
    // now() this test failed 2 runs in 8).
    for (const char* id : {"x", "y"}) EXPECT_TRUE(*co_await q.schedule(id, "", already_due()));
    std::vector<std::optional<double>> left_s;  // the record's lease, seconds from now, after each extension
    int started = 0;
    auto handler = [&](const job& j) -> task<result<void>> {
      ++started;
      for (int i = 0; i < 300 && started < 2; ++i) co_await sleep_for(5ms);
      if (j.id == "y") co_await sleep_for(50ms);  // after x's
      auto e = co_await q.extend(j, j.id == "x" ? 60s : 1s);
      EXPECT_TRUE(e && *e);
      auto score = co_await c->command("ZSCORE", "{jobs}:inflight", inflight_member(j));
      auto t = co_await c->command("TIME");
      if (score && t && score->is_string() && t->is_array()) {
        const double now_ms = std::stod(std::string((*t)[0].str())) * 1e3 + std::stod(std::string((*t)[1].str())) / 1e3;
        left_s.push_back((std::stod(std::string(score->str())) - now_ms) / 1e3);
      } else {
        left_s.push_back(std::nullopt);
      }
      co_return result<void>();
    };
    auto scenario = [&]() -> task<void> {
      for (int i = 0; i < 500 && q.stats().acked < 2; ++i) co_await sleep_for(10ms);
      q.stop();
    };
    auto w = worker();
    w.visibility = 5s;
    co_await when_all(q.run(handler, w), scenario());
    CO_ASSERT_TRUE(left_s.size() == 2u);
    for (const auto& s : left_s) {
      CO_ASSERT_TRUE(s.has_value());
      EXPECT_GT(*s, 55.0);
    }
  }());
}

TEST_F(redis_delay_queue_safety, a_handler_runs_under_its_lease_and_can_extend_it) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    std::map<std::string, int> runs;
    auto handler = [&](const job& j) -> task<result<void>> {
      if (++runs[j.id] > 1) co_return result<void>();
      if (j.id == "extended") {
        auto e = co_await q.extend(j, 3s);
        EXPECT_TRUE(e.has_value() && *e);
      }
      co_await sleep_for(700ms);  // past the 400 ms visibility, unless cut short
      if (co_await stop_requested()) co_return make_error_code(errc::timed_out);
      co_return result<void>();
    };
    auto w = worker();
    w.visibility = 400ms;
    w.retry_initial = 10ms;
    auto scenario = [&]() -> task<void> {
      EXPECT_TRUE(*co_await q.schedule("extended", "", wall_clock::now()));
      EXPECT_TRUE(*co_await q.schedule("cut", "", wall_clock::now()));
      for (int i = 0; i < 500 && q.stats().acked < 2; ++i) co_await sleep_for(10ms);
      q.stop();
    };
    co_await when_all(q.run(handler, w), scenario());
    EXPECT_EQ(runs["extended"], 1);  // its lease held: ran once, acknowledged
    EXPECT_EQ(runs["cut"], 2);       // cut at its deadline (a failure), retried
    EXPECT_EQ(q.stats().failed, 1u);
    EXPECT_EQ(q.stats().lost_leases, 0u);
  }());
}

TEST_F(redis_delay_queue_safety, a_handler_that_throws_a_non_exception_neither_wedges_the_worker_nor_its_stop) {
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue q(*c, "jobs");
    std::vector<std::string> ran;
    auto handler = [&](const job& j) -> task<result<void>> {
      ran.push_back(j.id);
      if (j.id == "a") throw 42;
      co_return result<void>();
    };
    auto w = worker();
    w.concurrency = 1;
    w.max_attempts = 1;
    auto scenario = [&]() -> task<void> {
      EXPECT_TRUE(*co_await q.schedule("a", "", wall_clock::now()));
      EXPECT_TRUE(*co_await q.schedule("b", "", wall_clock::now() + 50ms));
      for (int i = 0; i < 300 && ran.size() < 2; ++i) co_await sleep_for(10ms);
      q.stop();
    };
    auto guarded = [&]() -> task<result<void>> { co_return co_await with_timeout(q.run(handler, w), 5s); };
    auto [r, _] = co_await when_all(guarded(), scenario());
    EXPECT_TRUE(r.has_value()) << r.error().message();
    EXPECT_EQ(ran, (std::vector<std::string>{"a", "b"}));
    auto dead = co_await q.list_dead(0, 10);
    CO_ASSERT_OK(dead);
    CO_ASSERT_TRUE(dead->size() == 1u);
    EXPECT_NE((*dead)[0].reason.find("not a std::exception"), std::string::npos) << (*dead)[0].reason;
  }());
}

// A worker that died holding many claim records: the next claim sends back about as many jobs
// as it may take (one record of 128 here), not `limit` whole records (before: 4 of the 8, 512
// jobs, in one script), so no script grows with what a dead worker held; the claims after it
// take the rest.
TEST_F(redis_delay_queue_safety, a_claim_requeues_about_as_many_expired_jobs_as_it_may_take) {
  constexpr int jobs = 1024;  // 8 records of 128 for the worker that hangs
  run([&]() -> task<void> {
    auto c = co_await redis::client::connect(options());
    CO_ASSERT_OK(c);
    delay_queue hung(*c, "dead");
    for (int i = 0; i < jobs; ++i) EXPECT_TRUE(*co_await hung.schedule_after("d" + std::to_string(i), "", 0ms));
    int started = 0;
    auto hang = [&](const job&) -> task<result<void>> {
      ++started;
      co_await sleep_for(1h);  // cut by the stop at the end: its reports are refused by then
      co_return result<void>();
    };
    auto w = worker();
    w.concurrency = jobs;
    w.stop_grace = 0ms;
    auto c2 = co_await redis::client::connect(options());
    CO_ASSERT_OK(c2);
    delay_queue next(*c2, "dead");
    std::optional<std::int64_t> left;  // records of the hung worker in flight after one claim
    auto first = [&](const job&) -> task<result<void>> {
      if (!left) {
        auto n = co_await c->command("ZCARD", "{dead}:inflight");
        if (n) left = n->integer() - 1;  // the next worker's own record is one of them
      }
      co_return result<void>();
    };
    auto scenario = [&]() -> task<void> {
      for (int i = 0; i < 500 && started < jobs; ++i) co_await sleep_for(10ms);
      // The hung worker's leases end now, as if it had died.
      auto members = co_await c->command("ZRANGE", "{dead}:inflight", 0, -1);
      CO_ASSERT_OK(members);
      EXPECT_EQ(members->size(), 8u);
      for (std::size_t i = 0; i < members->size(); ++i)
        (void)co_await c->command("ZADD", "{dead}:inflight", "XX", 0, std::string((*members)[i].str()));
      auto w2 = worker();
      w2.concurrency = 4;
      auto stop_next = [&]() -> task<void> {
        for (int i = 0; i < 1000 && next.stats().acked < static_cast<std::uint64_t>(jobs); ++i) co_await sleep_for(10ms);
        next.stop();
      };
      co_await when_all(next.run(first, w2), stop_next());
      hung.stop();
    };
    co_await when_all(hung.run(hang, w), scenario());
    EXPECT_EQ(left, std::optional<std::int64_t>(7));
    EXPECT_EQ(next.stats().acked, static_cast<std::uint64_t>(jobs));  // the rest came with later claims
    EXPECT_EQ(hung.stats().acked, 0u);
  }());
}

}  // namespace
}  // namespace cogwheel::redis_test
