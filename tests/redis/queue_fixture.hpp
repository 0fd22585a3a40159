// A test fixture with a fresh redis-server (skipped when there is none) and the options of a
// client and a worker pointed at it: shared by the delay queue tests.
#pragma once

#include <cogwheel/redis/delay_queue.hpp>

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "redis_server.hpp"

namespace cogwheel::redis_test {

// A claimed job's entry in {name}:inflight: its claim record, named by the record's token (the
// jobs of one record share it; the record's ids are in {name}:claims).
inline std::string inflight_member(const redis::job& j) { return std::to_string(j.token); }

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
    return w;
  }
  std::unique_ptr<redis_server> server_;
};

}  // namespace cogwheel::redis_test
