// to_prometheus(): the exposition of a running two-core runtime plus registered metrics
// passes `promtool check metrics` (Debian's prometheus package; the test is skipped, and says
// so, where promtool is missing), names follow the conventions, histogram buckets are
// cumulative and end in +Inf == _count, and the counters in the text are the snapshot's.
#include <cogwheel/runtime/prometheus.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include <cogwheel/runtime/runtime.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/task.hpp>

#include "../support/promtool.hpp"

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

// A snapshot of a two-core runtime that did some timer work, taken on core 0 while core 1 runs,
// with a registered counter, gauge and histogram.
std::string exposition(metrics_snapshot* out = nullptr) {
  counter claims;
  gauge depth;
  histogram waits;
  claims += 7;
  depth.set(3);
  for (std::uint64_t v : {500u, 20'000u, 3'000'000u}) waits.record(v);
  const metric_registration r1 = register_counter("cogwheel_test_claims", "Claims made.", claims, "queue=\"jobs\"");
  const metric_registration r2 = register_gauge("cogwheel_test_depth", "Queue depth.", depth);
  const metric_registration r3 = register_histogram("cogwheel_test_wait_seconds", "Waits.", waits);
  runtime rt(runtime_options{.cores = 2, .pin_threads = false});
  std::string text;
  std::atomic<bool> taken{false};
  rt.run([&](unsigned core) -> task<void> {
    for (int i = 0; i < 5; ++i) co_await sleep_for(1ms);
    if (core == 0) {
      co_await sleep_for(5ms);  // core 1 is done with its sleeps, still running
      metrics_snapshot s = snapshot_metrics();
      text = to_prometheus(s);
      if (out != nullptr) *out = std::move(s);
      taken = true;
    } else {
      while (!taken) co_await sleep_for(1ms);
    }
  });
  return text;
}

TEST(prometheus, the_exposition_passes_promtool_check_metrics) {
  if (!test_support::promtool_available())
    GTEST_SKIP() << "promtool not found (Debian package prometheus; tests/deps.sh installs it)";
  const std::string text = exposition();
  const test_support::promtool_verdict v = test_support::promtool_check(text);
  EXPECT_TRUE(v.passed) << v.report << "\n--- exposition ---\n" << text.substr(0, 4000);
  EXPECT_EQ(v.report, "") << "promtool's lint found problems";
}

TEST(prometheus, counters_carry_the_snapshots_values_and_the_conventions_labels) {
  metrics_snapshot s;
  const std::string text = exposition(&s);
  ASSERT_EQ(s.cores.size(), 2u);
  for (const core_metrics& c : s.cores) {
    const std::string labels = "{core=\"" + std::to_string(c.core) + "\",timer_kind=\"wheel\"}";
    EXPECT_NE(text.find("cogwheel_timers_fired_total" + labels + " " + std::to_string(c.timers_fired) + "\n"), std::string::npos)
        << labels;
    EXPECT_NE(text.find("cogwheel_timer_lateness_seconds_count" + labels + " " + std::to_string(c.timer_lateness.count()) + "\n"),
              std::string::npos);
  }
  EXPECT_NE(text.find("# TYPE cogwheel_timer_lateness_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("cogwheel_loop_phase_seconds_count{core=\"1\",phase=\"kernel_wait\"}"), std::string::npos);
  // Registered outside any loop: no core label.
  EXPECT_NE(text.find("cogwheel_test_claims_total{queue=\"jobs\"} 7\n"), std::string::npos);
  EXPECT_NE(text.find("cogwheel_test_depth 3\n"), std::string::npos);
}

TEST(prometheus, histogram_buckets_are_cumulative_at_most_twenty_and_end_at_the_count) {
  histogram h;
  for (std::uint64_t v = 1; v < 3'000'000'000u; v = v * 3 + 1) h.record(v);
  const metric_registration r = register_histogram("cogwheel_test_spread_seconds", "Spread.", h);
  metrics_snapshot s = snapshot_metrics();
  const std::string text = to_prometheus(s);
  std::istringstream lines(text);
  std::string line;
  std::vector<std::uint64_t> counts;
  std::string inf;
  while (std::getline(lines, line)) {
    if (line.rfind("cogwheel_test_spread_seconds_bucket", 0) != 0) continue;
    counts.push_back(std::stoull(line.substr(line.rfind(' ') + 1)));
    if (line.find("le=\"+Inf\"") != std::string::npos) inf = line;
  }
  ASSERT_LE(counts.size(), 20u);
  ASSERT_GE(counts.size(), 10u);
  for (std::size_t i = 1; i < counts.size(); ++i) EXPECT_LE(counts[i - 1], counts[i]);
  EXPECT_FALSE(inf.empty());
  EXPECT_EQ(counts.back(), h.count());
  EXPECT_NE(text.find("cogwheel_test_spread_seconds_count " + std::to_string(h.count()) + "\n"), std::string::npos);
  // le="0.001": values <= 1 ms are 1, 4, 13, ... 797161 (13 of them); the next is 2391484.
  EXPECT_NE(text.find("cogwheel_test_spread_seconds_bucket{le=\"0.001\"} 13\n"), std::string::npos) << text;
}

// One registration with a malformed label set would make the whole exposition unparseable (a
// scraper then loses every metric of the process): it is refused when registered.
TEST(prometheus, registering_malformed_labels_throws) {
  counter c;
  histogram h;
  for (const char* bad : {"queue=\"a\"b\"", "queue=jobs", "9x=\"a\"", "queue=\"a\nb\"", "queue=\"a\\\"",
                          "queue=\"a\\x\"", "queue=\"a\",", ",queue=\"a\"", "queue=\"a\" x=\"b\"", "__name__=\"a\"",
                          "core=\"1\"", "queue=\"a\",queue=\"b\""})
    EXPECT_THROW((void)register_counter("cogwheel_test_bad_total", "Bad.", c, bad), std::invalid_argument) << bad;
  EXPECT_THROW((void)register_histogram("cogwheel_test_bad_seconds", "Bad.", h, "le=\"1\""), std::invalid_argument);
  for (const char* good : {"", "queue=\"a\\\"b\"", "queue=\"a\\nb\",route=\"/x y\"", "queue=\"\"", "_q=\"\\\\\""})
    EXPECT_NO_THROW((void)register_counter("cogwheel_test_good_total", "Good.", c, good)) << good;
}

// Help text is free text: its backslashes and newlines are escaped in the HELP line.
TEST(prometheus, help_text_is_escaped) {
  counter c;
  c += 1;
  const metric_registration r = register_counter("cogwheel_test_helpful", "Two lines:\nand a \\ backslash.", c);
  const std::string text = to_prometheus(snapshot_metrics());
  EXPECT_NE(text.find("# HELP cogwheel_test_helpful_total Two lines:\\nand a \\\\ backslash.\n"), std::string::npos) << text;
  if (!test_support::promtool_available()) GTEST_SKIP() << "promtool not found: the escaping is checked, promtool is not run";
  const test_support::promtool_verdict v = test_support::promtool_check(text);
  EXPECT_TRUE(v.passed) << v.report;
}

}  // namespace
}  // namespace cogwheel
