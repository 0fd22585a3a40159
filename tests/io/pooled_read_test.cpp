// Reads from a shared pool (tcp_stream::read_pooled, buffer_pool): a waiting read holds no
// buffer; a buffer a handle holds is never read into; a dry pool reports no_buffer_space and
// recovers; timeouts, closes and destroyed frames lose neither data nor buffers. Every test
// ends with every buffer back in its pool. Kernels without provided buffer rings (before
// 5.19) skip.
#include <cogwheel/io/buffer_pool.hpp>  // first: the header compiles on its own

#include <algorithm>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

struct fixture {
  buffer_pool pool;
  stream_pair pair;
};

// A pool of `buffers` buffers of `size` bytes and a connected pair.
task<result<fixture>> make_fixture(std::uint32_t buffers, std::uint32_t size = 64) {
  auto pool = buffer_pool::create({.buffers = buffers, .buffer_size = size});
  if (!pool) co_return pool.error();
  auto pair = co_await connect_pair();
  if (!pair) co_return pair.error();
  co_return fixture{std::move(*pool), std::move(*pair)};
}

std::string text_of(const pooled_buffer& b) { return std::string(io_test::text_of(b.bytes())); }

TEST(pooled_read, a_waiting_read_holds_no_buffer_and_takes_one_when_data_arrives) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto f = co_await make_fixture(4);
    CO_ASSERT_OK(f);
    EXPECT_EQ(f->pool.capacity(), 4u);
    EXPECT_EQ(f->pool.buffer_size(), 64u);
    std::optional<result<pooled_buffer>> got;
    spawn([](fixture& f, std::optional<result<pooled_buffer>>& got) -> task<void> {
      got.emplace(co_await f.pair.server.read_pooled(f.pool));
    }(*f, got));
    for (int i = 0; i < 5; ++i) co_await yield();
    EXPECT_FALSE(got.has_value());
    EXPECT_EQ(f->pool.available(), 4u);  // waiting costs no buffer

    CO_ASSERT_OK(co_await f->pair.client.write_all(bytes_of("hello")));
    while (!got) co_await yield();
    CO_ASSERT_OK(*got);
    EXPECT_EQ(text_of(**got), "hello");
    EXPECT_EQ(f->pool.available(), 3u);
    got.reset();  // dropping the handle returns the buffer
    EXPECT_EQ(f->pool.available(), 4u);
  }());
}

TEST(pooled_read, end_of_stream_is_an_empty_handle_that_holds_no_buffer) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto f = co_await make_fixture(2);
    CO_ASSERT_OK(f);
    CO_ASSERT_OK(co_await f->pair.client.shutdown());
    auto r = co_await with_timeout(f->pair.server.read_pooled(f->pool), 2s);
    CO_ASSERT_OK(r);
    EXPECT_TRUE(r->empty());
    EXPECT_EQ(f->pool.available(), 2u);
  }());
}

TEST(pooled_read, a_held_buffer_is_never_read_into) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto f = co_await make_fixture(2, 16);
    CO_ASSERT_OK(f);
    // Two buffers cycle through many messages while the previous message's handle is held:
    // each message must survive the next read intact.
    std::optional<pooled_buffer> held;
    std::string held_text;
    const int rounds = scaled(200);
    for (int i = 0; i < rounds; ++i) {
      char text[16];
      std::snprintf(text, sizeof text, "m%d", i);
      const std::string msg = text;
      CO_ASSERT_OK(co_await f->pair.client.write_all(bytes_of(msg)));
      auto r = co_await with_timeout(f->pair.server.read_pooled(f->pool), 2s);
      CO_ASSERT_OK(r);
      EXPECT_EQ(text_of(*r), msg);
      if (held) {
        EXPECT_EQ(text_of(*held), held_text) << "a held buffer changed at round " << i;
      }
      EXPECT_EQ(f->pool.available(), held ? 0u : 1u);
      held = std::move(*r);
      held_text = msg;
    }
    held.reset();
    EXPECT_EQ(f->pool.available(), 2u);
  }());
}

TEST(pooled_read, a_dry_pool_reports_no_buffer_space_keeps_the_data_and_recovers) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto f = co_await make_fixture(1);
    CO_ASSERT_OK(f);
    CO_ASSERT_OK(co_await f->pair.client.write_all(bytes_of("first")));
    auto first = co_await with_timeout(f->pair.server.read_pooled(f->pool), 2s);
    CO_ASSERT_OK(first);
    EXPECT_EQ(f->pool.available(), 0u);

    // Dry, and no data: the read waits like any other (it does not fail for lack of buffers).
    auto idle = co_await with_timeout(f->pair.server.read_pooled(f->pool), 20ms);
    EXPECT_EQ(idle.error(), errc::timed_out) << idle.error().message();

    // Dry, and data arrives: reported, and the data stays in the socket.
    CO_ASSERT_OK(co_await f->pair.client.write_all(bytes_of("second")));
    auto dry = co_await with_timeout(f->pair.server.read_pooled(f->pool), 2s);
    CO_ASSERT_TRUE(!dry);
    EXPECT_EQ(dry.error(), errc::no_buffer_space) << dry.error().message();

    first->reset();  // a buffer comes back: the next read gets the data
    auto second = co_await with_timeout(f->pair.server.read_pooled(f->pool), 2s);
    CO_ASSERT_OK(second);
    EXPECT_EQ(text_of(*second), "second");
    second->reset();
    EXPECT_EQ(f->pool.available(), 1u);
  }());
}

TEST(pooled_read, a_timed_out_read_consumed_nothing_and_held_no_buffer) {
  SKIP_WITHOUT_POOLS();
  run(
      []() -> task<void> {
        auto f = co_await make_fixture(2);
        CO_ASSERT_OK(f);
        const auto start = loop_now();
        auto r = co_await with_timeout(f->pair.server.read_pooled(f->pool), 50ms);
        EXPECT_EQ(r.error(), errc::timed_out) << r.error().message();
        EXPECT_GE(loop_now() - start, 50ms);
        EXPECT_EQ(f->pool.available(), 2u);
        CO_ASSERT_OK(co_await f->pair.client.write_all(bytes_of("later")));
        auto later = co_await with_timeout(f->pair.server.read_pooled(f->pool), 1s);
        CO_ASSERT_OK(later);
        EXPECT_EQ(text_of(*later), "later");
      }(),
      paused());
}

// A stream of pattern bytes read with timeouts short enough to race the writer all the time:
// every byte arrives exactly once and in order (a read cancelled after its data came in
// returns the data), and every buffer is back at the end.
TEST(pooled_read, data_racing_the_timeout_is_returned_never_lost) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto f = co_await make_fixture(8, 512);
    CO_ASSERT_OK(f);
    const std::size_t total = static_cast<std::size_t>(scaled(400)) * 1000;
    std::uint64_t timeouts = 0;
    auto writer = [](tcp_stream& s, std::size_t total) -> task<void> {
      const std::vector<std::byte> data = pattern_bytes(total);
      std::minstd_rand rng(7);
      for (std::size_t at = 0; at < total;) {
        const std::size_t n = std::min<std::size_t>(1 + rng() % 1500, total - at);
        CO_ASSERT_OK(co_await s.write_all(std::span(data).subspan(at, n)));
        at += n;
        if (rng() % 4 == 0) co_await sleep_for(std::chrono::microseconds(rng() % 300));
      }
    };
    auto reader = [](fixture& f, std::size_t total, std::uint64_t& timeouts) -> task<void> {
      std::size_t at = 0;
      std::minstd_rand rng(11);
      while (at < total) {
        auto r = co_await with_timeout(f.pair.server.read_pooled(f.pool), std::chrono::microseconds(rng() % 200));
        if (!r) {
          CO_ASSERT_TRUE(r.error() == errc::timed_out);
          ++timeouts;
          continue;
        }
        CO_ASSERT_TRUE(!r->empty());
        for (std::byte b : r->bytes()) {
          if (b != pattern_at(at)) {
            ADD_FAILURE() << "byte " << at << " lost, duplicated or out of order";
            co_return;
          }
          ++at;
        }
      }
    };
    auto done = co_await with_timeout(together(writer(f->pair.client, total), reader(*f, total, timeouts)), 20s);
    EXPECT_TRUE(done) << done.error().message();
    EXPECT_EQ(f->pool.available(), 8u);
    RecordProperty("timeouts", static_cast<int>(timeouts));
  }());
}

task<void> read_and_hold(tcp_stream& s, buffer_pool& pool, bool& finished) {
  auto r = co_await with_timeout(s.read_pooled(pool), 10s);
  finished = true;
  co_await sleep_for(10s);  // holds the buffer (if any) in the frame
}

TEST(pooled_read, frames_destroyed_mid_read_or_holding_a_buffer_give_every_buffer_back) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto f = co_await make_fixture(4);
    CO_ASSERT_OK(f);
    bool finished = false;
    // Destroyed while waiting: the read is withdrawn; the next data goes to the next read.
    frame_holder waiting = hold(read_and_hold(f->pair.server, f->pool, finished));
    co_await sleep_for(2ms);
    waiting.frame.destroy();
    EXPECT_FALSE(finished);
    EXPECT_EQ(f->pool.available(), 4u);

    // Destroyed with the data sent but the completion not yet dispatched: the buffer the
    // kernel filled goes back with the frame.
    for (int i = 0; i < scaled(50); ++i) {
      frame_holder racing = hold(read_and_hold(f->pair.server, f->pool, finished));
      CO_ASSERT_OK(co_await f->pair.client.write_all(bytes_of("x")));
      racing.frame.destroy();
      EXPECT_EQ(f->pool.available(), 4u);
      // Drain what a destroyed read may not have taken.
      while (true) {
        auto r = co_await with_timeout(f->pair.server.read_pooled(f->pool), 1ms);
        if (!r) break;
      }
    }

    // Destroyed while holding a buffer.
    finished = false;
    frame_holder holding = hold(read_and_hold(f->pair.server, f->pool, finished));
    CO_ASSERT_OK(co_await f->pair.client.write_all(bytes_of("held")));
    while (!finished) co_await yield();
    EXPECT_EQ(f->pool.available(), 3u);
    holding.frame.destroy();
    EXPECT_EQ(f->pool.available(), 4u);
  }());
}

TEST(pooled_read, spawned_readers_destroyed_at_shutdown_leave_nothing_behind) {
  SKIP_WITHOUT_POOLS();
  auto pair = run([]() -> task<result<stream_pair>> { co_return co_await connect_pair(); }());
  ASSERT_TRUE(pair) << pair.error().message();
  run([](stream_pair& p) -> task<void> {
    auto pool = buffer_pool::create({.buffers = 2, .buffer_size = 64});
    CO_ASSERT_OK(pool);
    auto shared = buffer_pool::of_this_core();
    CO_ASSERT_OK(shared);
    bool a = false;
    spawn(read_and_hold(p.server, *pool, a));
    spawn([](tcp_stream& s) -> task<void> { (void)co_await s.read_pooled(); }(p.client));
    co_await sleep_for(5ms);
    // This task ends first (the pool object goes), then the loop destroys the readers still
    // waiting: their reads are withdrawn, and ASan checks nothing is touched afterwards.
  }(*pair));
  run([](stream_pair& p) -> task<void> {  // a new loop, the same sockets: nothing stole data
    CO_ASSERT_OK(co_await p.client.write_all(bytes_of("after")));
    auto r = co_await with_timeout(p.server.read_pooled(), 2s);
    CO_ASSERT_OK(r);
    EXPECT_EQ(text_of(*r), "after");
  }(*pair));
}

TEST(pooled_read, closing_the_stream_cancels_a_waiting_read) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto f = co_await make_fixture(2);
    CO_ASSERT_OK(f);
    std::optional<result<pooled_buffer>> got;
    spawn([](fixture& f, std::optional<result<pooled_buffer>>& got) -> task<void> {
      got.emplace(co_await f.pair.server.read_pooled(f.pool));
    }(*f, got));
    co_await sleep_for(2ms);  // the read is in the kernel
    f->pair.server.close();
    while (!got) co_await yield();
    EXPECT_EQ(got->error(), errc::operation_canceled) << got->error().message();
    EXPECT_EQ(f->pool.available(), 2u);
  }());
}

TEST(pooled_read, a_pool_let_go_of_while_a_read_waits_ends_that_read_without_harm) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    std::optional<result<pooled_buffer>> got;
    {
      auto pool = buffer_pool::create({.buffers = 2, .buffer_size = 64});
      CO_ASSERT_OK(pool);
      spawn([](tcp_stream& s, buffer_pool& pool, std::optional<result<pooled_buffer>>& got) -> task<void> {
        got.emplace(co_await s.read_pooled(pool));
      }(pair->server, *pool, got));
      co_await yield();
    }  // the pool object goes; its ring is withdrawn, its memory stays until the read ends
    auto other = buffer_pool::create({.buffers = 2, .buffer_size = 64});  // may not take its place
    CO_ASSERT_OK(other);
    CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("data")));
    while (!got) co_await yield();
    EXPECT_EQ(got->error(), errc::no_buffer_space) << got->error().message();
    EXPECT_EQ(other->available(), 2u);
    auto r = co_await with_timeout(pair->server.read_pooled(*other), 2s);
    CO_ASSERT_OK(r);
    EXPECT_EQ(text_of(*r), "data");
  }());
}

TEST(pooled_read, a_handle_may_outlive_its_pool_object) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto f = co_await make_fixture(2);
    CO_ASSERT_OK(f);
    CO_ASSERT_OK(co_await f->pair.client.write_all(bytes_of("kept")));
    auto r = co_await with_timeout(f->pair.server.read_pooled(f->pool), 2s);
    CO_ASSERT_OK(r);
    f->pool = buffer_pool();  // the pool object goes first
    EXPECT_EQ(text_of(*r), "kept");
    r->reset();
  }());
}

TEST(pooled_read, the_shared_pool_is_one_per_core_and_serves_read_pooled_without_a_pool) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto a = buffer_pool::of_this_core();
    auto b = buffer_pool::of_this_core({.buffers = 2});
    CO_ASSERT_OK(a);
    CO_ASSERT_OK(b);
    EXPECT_EQ(*a, *b);
    const std::size_t capacity = (*a)->capacity();
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("shared")));
    auto r = co_await with_timeout(pair->server.read_pooled(), 2s);
    CO_ASSERT_OK(r);
    EXPECT_EQ(text_of(*r), "shared");
    EXPECT_EQ((*a)->available(), capacity - 1);
    r->reset();
    EXPECT_EQ((*a)->available(), capacity);
  }());
}

TEST(pooled_read, options_out_of_range_are_refused) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    EXPECT_EQ(buffer_pool::create({.buffers = 0}).error(), errc::invalid_argument);
    EXPECT_EQ(buffer_pool::create({.buffers = 65536}).error(), errc::invalid_argument);
    EXPECT_EQ(buffer_pool::create({.buffer_size = 0}).error(), errc::invalid_argument);
    auto p = buffer_pool::create({.buffers = 3, .buffer_size = 32});
    CO_ASSERT_OK(p);
    EXPECT_EQ(p->capacity(), 4u);  // rounded up to a power of two
    buffer_pool none;
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    EXPECT_EQ((co_await pair->server.read_pooled(none)).error(), errc::invalid_argument);
    co_return;
  }());
}

}  // namespace
}  // namespace cogwheel

namespace cogwheel::io_test {
namespace {

// A handle outliving its loop on another thread: the pool was made on core 1, the handle is
// dropped on the main thread after run() returned (its loop, and core 1's thread, are gone).
TEST(pooled_read, a_buffer_filled_on_another_core_is_dropped_safely_after_run_returns) {
  std::optional<pooled_buffer> kept;
  runtime rt(runtime_options{.cores = 2, .pin_threads = false});
  rt.run([&](unsigned core) -> task<void> {
    if (core != 1) co_return;
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("filled on core 1")));
    auto got = co_await with_timeout(pair->server.read_pooled(), 5s);
    CO_ASSERT_OK(got);
    kept = std::move(*got);
  });
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(text_of(kept->bytes()), "filled on core 1");
  kept.reset();
  // The main thread's own pools are untouched: a pool made here afterwards works as usual.
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("main")));
    auto got = co_await with_timeout(pair->server.read_pooled(), 5s);
    CO_ASSERT_OK(got);
    EXPECT_EQ(text_of(got->bytes()), "main");
  }());
}

}  // namespace
}  // namespace cogwheel::io_test
