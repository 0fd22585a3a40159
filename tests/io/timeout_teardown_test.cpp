// Frames destroyed while an operation under a timeout is in flight: the operation is cancelled
// and awaited, so no read stays armed in the kernel (it would steal the next data into freed
// memory) and no write is re-submitted after its owner has gone.
#include <cogwheel/io/tcp.hpp>  // first: the header compiles on its own

#include <cstddef>
#include <string_view>
#include <vector>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

task<void> read_once(tcp_stream& s, bool& finished) {
  std::byte buf[64];  // in the frame: the kernel must be done with it before the frame goes
  (void)co_await s.read(buf);
  finished = true;
}

task<void> read_once_under_timeout(tcp_stream& s, bool& finished) {
  std::byte buf[64];
  (void)co_await with_timeout(s.read(buf), 10s);
  finished = true;
}

// After the reader is gone, data the peer sends goes to the next read: no read of the old
// frame is still armed in the kernel to steal it (into freed memory).
task<void> expect_next_read_gets(tcp_stream& client, tcp_stream& server, std::string_view text) {
  CO_ASSERT_OK(co_await client.write_all(bytes_of(text)));
  std::vector<std::byte> buf(text.size());
  auto n = co_await with_timeout(read_exactly(server, buf), 2s);
  CO_ASSERT_OK(n);
  EXPECT_EQ(text_of(std::span(buf.data(), *n)), text);
}

TEST(timeout_io, spawned_reader_destroyed_at_shutdown_leaves_no_read_in_flight) {
  auto pair = run([]() -> task<result<stream_pair>> { co_return co_await connect_pair(); }());
  ASSERT_TRUE(pair) << pair.error().message();
  bool finished = false;
  run([](stream_pair& p, bool& done) -> task<void> {
    spawn(read_once(p.server, done));
    spawn(read_once_under_timeout(p.client, done));
    co_await sleep_for(10ms);  // both suspended on their reads when run() returns
  }(*pair, finished));
  EXPECT_FALSE(finished);
  run([](stream_pair& p) -> task<void> {  // a new loop, the same sockets
    co_await expect_next_read_gets(p.client, p.server, "after the first loop");
    co_await expect_next_read_gets(p.server, p.client, "and the other way");
  }(*pair));
}

TEST(timeout_io, task_destroyed_while_suspended_on_a_read_cancels_it_at_once) {
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    const std::size_t timers_before = pending_timers();
    bool finished = false;
    frame_holder holder = hold(read_once_under_timeout(pair->server, finished));
    co_await sleep_for(5ms);  // the read's SQE is in the kernel now
    EXPECT_FALSE(finished);
    EXPECT_EQ(pending_timers(), timers_before + 1);  // the with_timeout timer

    const auto before = this_core_metrics();
    holder.frame.destroy();  // destroys the task<void> in it, and the suspended reader
    // The cancelled read's completion was waited for before destroy() returned, and the
    // timer was unlinked: nothing of the frame is left in the ring or the wheel.
    EXPECT_GE(this_core_metrics().completions, before.completions + 1);
    EXPECT_EQ(pending_timers(), timers_before);
    EXPECT_FALSE(finished);

    co_await expect_next_read_gets(pair->client, pair->server, "still works");
    // A plain read (no timeout) destroyed the same way.
    frame_holder plain = hold(read_once(pair->server, finished));
    co_await yield();
    plain.frame.destroy();
    co_await expect_next_read_gets(pair->client, pair->server, "and again");
  }());
}

TEST(timeout_io, write_all_destroyed_mid_transfer_stops_after_what_was_sent) {
  static constexpr std::size_t total = 8 << 20;
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(pair->client.set_send_buffer_size(32 * 1024));
    const std::vector<std::byte> data = pattern_bytes(total);
    auto writer = [](tcp_stream& s, std::span<const std::byte> d) -> task<void> {
      (void)co_await s.write_all(d);
      ADD_FAILURE() << "write_all finished although nobody reads";
    };
    frame_holder holder = hold(writer(pair->client, data));
    co_await sleep_for(5ms);  // a partial send done, the next one waiting for room
    holder.frame.destroy();

    // The peer gets a prefix of the pattern, then whatever is written next: no send of the
    // destroyed write_all was still queued or re-submitted after it.
    CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("tail")));
    CO_ASSERT_OK(co_await pair->client.shutdown());
    auto received = co_await read_to_eof(pair->server);
    CO_ASSERT_OK(received);
    const std::vector<std::byte>& got = *received;
    CO_ASSERT_TRUE(got.size() >= 4);
    const std::size_t prefix = got.size() - 4;
    EXPECT_GT(prefix, 0u);
    EXPECT_LT(prefix, total);
    for (std::size_t i = 0; i < prefix; ++i) {
      if (got[i] != pattern_at(i)) {
        ADD_FAILURE() << "byte " << i << " of the prefix is wrong";
        break;
      }
    }
    EXPECT_EQ(text_of(std::span(got).subspan(prefix)), "tail");
  }());
}

}  // namespace
}  // namespace cogwheel
