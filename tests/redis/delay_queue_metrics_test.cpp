// The delay queue's counts as registered metrics: on known work (jobs that succeed, jobs retried
// once, jobs that die, a job whose lease is lost) snapshot_metrics() holds exactly what was
// done, to_prometheus() writes them as cogwheel_delay_queue_* with the core and queue labels,
// and `promtool check metrics` accepts the exposition (skipped, and said, without promtool).
#include <cogwheel/redis/delay_queue.hpp>

#include <cogwheel/cogwheel.hpp>
#include <cogwheel/runtime/metrics.hpp>
#include <cogwheel/runtime/prometheus.hpp>

#include <string>

#include <gtest/gtest.h>

#include "../support/co_assert.hpp"
#include "../support/promtool.hpp"
#include "queue_fixture.hpp"

namespace cogwheel::redis_test {
namespace {

using namespace std::chrono_literals;
using redis::delay_queue;
using redis::job;
using redis::wall_clock;

using redis_delay_queue_metrics = queue_test;

// What the worker did, and the snapshot and exposition taken after it.
struct outcome {
  redis::worker_stats stats;
  metrics_snapshot snapshot;
  std::string text;
};

// 10 jobs succeed; 3 fail once then succeed (3 retries); 2 always fail and die at their second
// attempt (2 retries, 2 dead); 1 is cancelled by its own handler, so its acknowledgement is
// refused (1 lost lease). 10 + 6 + 4 + 1 = 21 handlers started.
outcome known_work(const redis::client_options& co, redis::worker_options w) {
  w.max_attempts = 2;
  w.retry_initial = 10ms;
  return run([&]() -> task<outcome> {
    outcome out;
    auto c = co_await redis::client::connect(co);
    if (!c) {
      ADD_FAILURE() << c.error().message();
      co_return out;
    }
    delay_queue q(*c, "metered \"jobs\"");
    auto schedule = [&](const std::string& id) -> task<void> {
      auto r = co_await q.schedule_after(id, "p", 0ms);
      EXPECT_TRUE(r && *r) << id;
    };
    for (int i = 0; i < 10; ++i) co_await schedule("ok" + std::to_string(i));
    for (int i = 0; i < 3; ++i) co_await schedule("retry" + std::to_string(i));
    for (int i = 0; i < 2; ++i) co_await schedule("dead" + std::to_string(i));
    co_await schedule("lost");
    auto handler = [&](const job& j) -> task<result<void>> {
      if (j.id.rfind("retry", 0) == 0 && j.attempt == 1) co_return std::make_error_code(errc::io_error);
      if (j.id.rfind("dead", 0) == 0) co_return std::make_error_code(errc::io_error);
      if (j.id == "lost") (void)co_await q.cancel(j.id);
      co_return result<void>();
    };
    auto until_done = [&]() -> task<void> {
      for (int i = 0; i < 500; ++i) {
        const redis::worker_stats& s = q.stats();
        if (s.fired == 21 && s.acked + s.lost_leases == 14 && s.dead == 2 && s.failed == 7) break;
        co_await sleep_for(10ms);
      }
      q.stop();
    };
    co_await when_all(q.run(handler, w), until_done());
    out.stats = q.stats();
    out.snapshot = snapshot_metrics();  // the queue is still registered
    out.text = to_prometheus(out.snapshot);
    co_return out;
  }());
}

double value_of(const metrics_snapshot& s, const std::string& name) {
  for (const registered_value& v : s.values)
    if (v.name == name && v.labels == "queue=\"metered \\\"jobs\\\"\"") return v.value;
  ADD_FAILURE() << name << " is not registered";
  return -1;
}

TEST_F(redis_delay_queue_metrics, the_counts_of_known_work_are_exact) {
  const outcome o = known_work(options(), worker());
  EXPECT_EQ(o.stats.fired, 21u);
  EXPECT_EQ(o.stats.retries, 5u);
  EXPECT_EQ(o.stats.dead, 2u);
  EXPECT_EQ(o.stats.lost_leases, 1u);
  EXPECT_EQ(value_of(o.snapshot, "cogwheel_delay_queue_jobs_fired"), 21);
  EXPECT_EQ(value_of(o.snapshot, "cogwheel_delay_queue_retries"), 5);
  EXPECT_EQ(value_of(o.snapshot, "cogwheel_delay_queue_dead_jobs"), 2);
  EXPECT_EQ(value_of(o.snapshot, "cogwheel_delay_queue_lost_leases"), 1);
  // Claims depend on timing: exactly the worker's own count, at least one per attempt round.
  EXPECT_EQ(value_of(o.snapshot, "cogwheel_delay_queue_claims"), static_cast<double>(o.stats.claims));
  EXPECT_GE(o.stats.claims, 2u);
  bool found = false, found_scheduled = false;
  for (const registered_histogram& h : o.snapshot.histograms) {
    if (h.name == "cogwheel_delay_queue_scheduled_lateness_seconds") {
      found_scheduled = true;
      EXPECT_EQ(h.values.count(), 21u);
      EXPECT_EQ(h.values.max() / 1000, o.stats.scheduled_lateness.max_us);
    }
    if (h.name != "cogwheel_delay_queue_lateness_seconds") continue;
    found = true;
    EXPECT_EQ(h.core, 0);
    EXPECT_EQ(h.values.count(), 21u);
    EXPECT_EQ(h.values.max() / 1000, o.stats.attempt_lateness.max_us);  // the same starts, in ns
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(found_scheduled);
  // Retries start after their back-off: late for their producer, not for their attempt.
  EXPECT_GE(o.stats.scheduled_lateness.max_us, o.stats.attempt_lateness.max_us);
  // The exposition: conventions' names, the core label first, the queue name escaped.
  const std::string labels = "{core=\"0\",queue=\"metered \\\"jobs\\\"\"}";
  EXPECT_NE(o.text.find("# TYPE cogwheel_delay_queue_jobs_fired_total counter\n"), std::string::npos);
  EXPECT_NE(o.text.find("cogwheel_delay_queue_jobs_fired_total" + labels + " 21\n"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("cogwheel_delay_queue_retries_total" + labels + " 5\n"), std::string::npos);
  EXPECT_NE(o.text.find("cogwheel_delay_queue_dead_jobs_total" + labels + " 2\n"), std::string::npos);
  EXPECT_NE(o.text.find("cogwheel_delay_queue_lost_leases_total" + labels + " 1\n"), std::string::npos);
  EXPECT_NE(o.text.find("# TYPE cogwheel_delay_queue_lateness_seconds histogram\n"), std::string::npos);
  EXPECT_NE(o.text.find("cogwheel_delay_queue_lateness_seconds_count" + labels + " 21\n"), std::string::npos);
}

TEST_F(redis_delay_queue_metrics, the_exposition_passes_promtool_check_metrics) {
  if (!test_support::promtool_available()) GTEST_SKIP() << "promtool not found (Debian package prometheus)";
  const outcome o = known_work(options(), worker());
  const test_support::promtool_verdict v = test_support::promtool_check(o.text);
  EXPECT_TRUE(v.passed) << v.report;
  EXPECT_EQ(v.report, "") << "promtool's lint found problems";
}

}  // namespace
}  // namespace cogwheel::redis_test
