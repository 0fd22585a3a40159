// A test fixture with a fresh redis-server (skipped when there is none) and the options of a
// client and a worker pointed at it: shared by the delay queue tests.
#pragma once

#include <cogwheel/redis/delay_queue.hpp>

#include <cogwheel/cogwheel.hpp>

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "redis_server.hpp"

namespace cogwheel::redis_test {

// A claimed job's entry in {name}:inflight: its claim record, named by the record's token (the
// jobs of one record share it; the record's ids are in {name}:claims).
inline std::string inflight_member(const redis::job& j) { return std::to_string(j.token); }

// A due time every claim sees as due: a second before now. A due time is rounded up to the
// millisecond and the server's TIME down, so jobs scheduled at now() one after another can
// straddle a claim (some due, the last not yet) and land in separate claim records; a test that
// counts records or claims schedules at one time already past (two tests were flaky without).
inline redis::wall_clock::time_point already_due() { return redis::wall_clock::now() - std::chrono::seconds(1); }

// Runs q's worker (`handler`, `w`) until done() holds, checked every 10 ms at most `checks`
// times, then stops it and returns when run() has.
template <class Done>
task<void> run_until(redis::delay_queue& q, redis::delay_queue::handler_type handler, redis::worker_options w, Done done,
                     int checks = 500) {
  auto until_done = [&]() -> task<void> {
    for (int i = 0; i < checks && !done(); ++i) co_await sleep_for(std::chrono::milliseconds(10));
    q.stop();
  };
  co_await when_all(q.run(std::move(handler), w), until_done());
}

class queue_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed";
    server_ = std::make_unique<redis_server>();
    ASSERT_TRUE(server_->running());
  }
  redis::client_options options() const {
    redis::client_options o;
    o.address = socket_address::ipv4_loopback(server_->port());
    return o;
  }
  redis::worker_options worker() const {
    redis::worker_options w;
    w.address = socket_address::ipv4_loopback(server_->port());
    w.max_wait = std::chrono::milliseconds(100);
    // A claim at each due instant and an acknowledgement as soon as a job ends (not the
    // defaults): the tests count claims, wake-ups, acknowledgements and leases of a worker that
    // takes a job only once it is due; those that prefetch or gather say so.
    w.lookahead = std::chrono::milliseconds(0);
    w.ack_delay = std::chrono::milliseconds(0);
    return w;
  }
  std::unique_ptr<redis_server> server_;
};

}  // namespace cogwheel::redis_test
