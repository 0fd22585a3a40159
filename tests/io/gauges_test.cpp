// io's gauges in the core's metrics: open_sockets (tcp_stream and udp_socket, listeners not
// included) and pooled_buffers_in_use (buffers lent out of this core's pools: held by handles,
// or taken by a read whose completion is not yet handed over). Exact on the counting core;
// a socket moved to another core is counted there from its first operation on.
#include <cogwheel/cogwheel.hpp>  // first: the umbrella header compiles on its own

#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>
#include <optional>
#include <vector>

#include <cogwheel/runtime/prometheus.hpp>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

std::int64_t open_sockets() { return this_core_metrics().open_sockets; }
std::int64_t pooled_in_use() { return this_core_metrics().pooled_buffers_in_use; }

TEST(io_gauges, open_sockets_counts_every_stream_and_udp_socket_until_it_closes) {
  run([]() -> task<void> {
    const std::int64_t before = open_sockets();
    constexpr int pairs = 50;
    std::vector<stream_pair> held;
    for (int i = 0; i < pairs; ++i) {
      auto p = co_await connect_pair();
      CO_ASSERT_OK(p);
      held.push_back(std::move(*p));  // moves of a stream count nothing
    }
    EXPECT_EQ(open_sockets() - before, 2 * pairs);
    auto udp = udp_socket::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(udp);
    EXPECT_EQ(open_sockets() - before, 2 * pairs + 1);
    udp->close();
    EXPECT_EQ(open_sockets() - before, 2 * pairs);
    std::vector<int> released;
    for (auto& p : held) {
      p.client.close();
      released.push_back(p.server.release());  // handed out: no longer cogwheel's
    }
    EXPECT_EQ(open_sockets(), before);
    for (int fd : released) ::close(fd);
  }());
}

TEST(io_gauges, a_socket_moved_to_another_core_is_counted_there_from_its_first_operation) {
  runtime rt(runtime_options{.cores = 2, .pin_threads = false});
  bool checked = false;
  rt.run([&](unsigned core) -> task<void> {
    if (core != 0) co_return;
    auto p = co_await connect_pair();
    CO_ASSERT_OK(p);
    const std::int64_t here = open_sockets();
    auto read_there = [s = std::move(p->server)]() mutable -> task<std::int64_t> {
      std::array<std::byte, 8> buf;
      (void)co_await with_timeout(s.read(buf), 2s);  // the peer has written: at once
      const std::int64_t there = open_sockets();
      s.close();
      co_return there - open_sockets();
    };
    (void)co_await p->client.write_all(bytes_of("x"));
    const std::int64_t counted_there = co_await submit_to(1, std::move(read_there));
    EXPECT_EQ(counted_there, 1);
    EXPECT_EQ(open_sockets(), here - 1);  // left this core when it arrived there
    checked = true;
  });
  EXPECT_TRUE(checked);
}

TEST(io_gauges, pooled_buffers_in_use_counts_the_buffers_handles_hold) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto pool = buffer_pool::create({.buffers = 8, .buffer_size = 64});
    CO_ASSERT_OK(pool);
    constexpr int readers = 5;
    std::vector<stream_pair> pairs;
    for (int i = 0; i < readers; ++i) {
      auto p = co_await connect_pair();
      CO_ASSERT_OK(p);
      pairs.push_back(std::move(*p));
    }
    EXPECT_EQ(pooled_in_use(), 0);
    std::vector<pooled_buffer> held;
    for (auto& p : pairs) {
      (void)co_await p.client.write_all(bytes_of("data"));
      auto b = co_await with_timeout(p.server.read_pooled(*pool), 2s);
      CO_ASSERT_OK(b);
      held.push_back(std::move(*b));
      EXPECT_EQ(pooled_in_use(), static_cast<std::int64_t>(held.size()));
    }
    EXPECT_EQ(pooled_in_use(), readers);
    EXPECT_EQ(pool->available(), 8u - readers);
    held.pop_back();
    EXPECT_EQ(pooled_in_use(), readers - 1);
    held.clear();
    EXPECT_EQ(pooled_in_use(), 0);
  }());
}

TEST(io_gauges, the_gauges_are_exported) {
  run([]() -> task<void> {
    auto p = co_await connect_pair();
    CO_ASSERT_OK(p);
    const std::string text = to_prometheus(snapshot_metrics());
    EXPECT_NE(text.find("cogwheel_open_sockets{core=\"0\"} 2"), std::string::npos) << text;
    EXPECT_NE(text.find("cogwheel_pooled_buffers_in_use{core=\"0\"} 0"), std::string::npos);
  }());
}

}  // namespace
}  // namespace cogwheel
