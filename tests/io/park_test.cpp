// park(): a stream waits for its next bytes with no coroutine frame, and wake gets it back
// exactly once: with the bytes, with an empty buffer when the peer closes, with timed_out at
// `until` (bytes already there win), and never after the loop has shut down (the stream is
// closed then). Every buffer goes back to the core's pool. Kernels without provided buffer
// rings skip.
#include <cogwheel/io/park.hpp>  // first: the header compiles on its own

#include <optional>
#include <string>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

// What wake saw.
struct woken {
  int calls = 0;
  std::optional<tcp_stream> stream;
  std::optional<result<pooled_buffer>> got;
  clock::time_point at{};
};

auto wake_into(woken& w) {
  return [&w](tcp_stream s, result<pooled_buffer> got) {
    ++w.calls;
    w.stream.emplace(std::move(s));
    w.got.emplace(std::move(got));
    w.at = now();
  };
}

// Sleeps rather than yields: on the paused clock, time moves only when the loop has nothing to do.
task<void> until_woken(woken& w) {
  while (w.calls == 0) co_await sleep_for(std::chrono::milliseconds(1));
}

std::size_t pool_available() {
  auto p = buffer_pool::of_this_core();
  return p ? (*p)->available() : 0;
}
std::size_t pool_capacity() {
  auto p = buffer_pool::of_this_core();
  return p ? (*p)->capacity() : 0;
}

TEST(park, bytes_wake_the_stream_with_them_and_the_stream_goes_on_working) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    woken w;
    park(std::move(pair->server), now() + std::chrono::hours(1), wake_into(w));
    EXPECT_FALSE(pair->server.is_open());
    for (int i = 0; i < 5; ++i) co_await yield();
    EXPECT_EQ(w.calls, 0);  // nothing came: still parked
    EXPECT_EQ(pool_available(), pool_capacity());  // and holding no buffer

    CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("hello")));
    co_await until_woken(w);
    CO_ASSERT_OK(*w.got);
    EXPECT_EQ(text_of((*w.got)->bytes()), "hello");
    w.got.reset();
    EXPECT_EQ(pool_available(), pool_capacity());

    CO_ASSERT_OK(co_await w.stream->write_all(bytes_of("back")));
    std::byte buf[8];
    auto n = co_await read_exactly(pair->client, std::span(buf, 4));
    CO_ASSERT_OK(n);
    EXPECT_EQ(text_of(std::span(buf, 4)), "back");
    for (int i = 0; i < 5; ++i) co_await yield();
    EXPECT_EQ(w.calls, 1);  // once
  }());
}

TEST(park, the_peer_closing_wakes_it_with_an_empty_buffer) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    woken w;
    park(std::move(pair->server), now() + std::chrono::hours(1), wake_into(w));
    pair->client.close();
    co_await until_woken(w);
    CO_ASSERT_OK(*w.got);
    EXPECT_TRUE((*w.got)->empty());
    EXPECT_TRUE(w.stream->is_open());
  }());
}

TEST(park, it_wakes_with_timed_out_at_until_and_not_before) {
  SKIP_WITHOUT_POOLS();
  run(
      []() -> task<void> {
        auto pair = co_await connect_pair();
        CO_ASSERT_OK(pair);
        woken w;
        const clock::time_point until = now() + std::chrono::seconds(30);
        park(std::move(pair->server), until, wake_into(w));
        co_await until_woken(w);
        CO_ASSERT_TRUE(w.got.has_value());
        EXPECT_FALSE(w.got->has_value());
        EXPECT_EQ(w.got->error(), errc::timed_out);
        EXPECT_GE(w.at, until);
        EXPECT_LE(w.at, until + std::chrono::milliseconds(1));  // at most a tick late
        EXPECT_TRUE(w.stream->is_open());  // wake decides: the stream is handed back
        EXPECT_EQ(pool_available(), pool_capacity());
      }(),
      paused());
}

TEST(park, bytes_already_there_win_over_an_until_already_passed) {
  SKIP_WITHOUT_POOLS();
  run(
      []() -> task<void> {
        for (int i = 0; i < 50; ++i) {
          auto pair = co_await connect_pair();
          CO_ASSERT_OK(pair);
          CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("early")));
          for (int k = 0; k < i % 3; ++k) co_await yield();
          woken w;
          park(std::move(pair->server), now() - std::chrono::seconds(1), wake_into(w));
          co_await until_woken(w);
          CO_ASSERT_OK(*w.got);  // the data was there: never timed_out, never lost
          EXPECT_EQ(text_of((*w.got)->bytes()), "early");
        }
      }(),
      paused());
}

TEST(park, many_parked_streams_each_wake_once_with_their_own_bytes) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    constexpr int n = 64;
    std::vector<stream_pair> pairs;
    std::vector<woken> w(n);
    for (int i = 0; i < n; ++i) {
      auto pair = co_await connect_pair();
      CO_ASSERT_OK(pair);
      pairs.push_back(std::move(*pair));
      park(std::move(pairs.back().server), now() + std::chrono::hours(1), wake_into(w[static_cast<std::size_t>(i)]));
    }
    for (int i = n - 1; i >= 0; --i)
      CO_ASSERT_OK(co_await pairs[static_cast<std::size_t>(i)].client.write_all(bytes_of(std::to_string(i))));
    for (auto& one : w) co_await until_woken(one);
    for (int i = 0; i < n; ++i) {
      auto& one = w[static_cast<std::size_t>(i)];
      EXPECT_EQ(one.calls, 1);
      CO_ASSERT_OK(*one.got);
      EXPECT_EQ(text_of((*one.got)->bytes()), std::to_string(i));
    }
  }());
}

TEST(park, a_loop_that_shuts_down_closes_parked_streams_without_waking_them) {
  SKIP_WITHOUT_POOLS();
  const int before = open_descriptors();
  woken w;
  std::vector<tcp_stream> clients;  // kept open: nothing wakes the parked ends
  run([&]() -> task<void> {
    for (int i = 0; i < 8; ++i) {
      auto pair = co_await connect_pair();
      CO_ASSERT_OK(pair);
      park(std::move(pair->server), now() + std::chrono::hours(1), wake_into(w));
      clients.push_back(std::move(pair->client));
    }
    for (int i = 0; i < 5; ++i) co_await yield();
  }());  // the run ends with every stream parked
  EXPECT_EQ(w.calls, 0);
  EXPECT_EQ(open_descriptors(), before + 8);  // only the clients are left
  clients.clear();
  EXPECT_EQ(open_descriptors(), before);
}

// --- Held: hostile peers and a dry pool ----------------------------------------------------

TEST(park, held_a_peer_that_sends_then_half_closes_wakes_with_the_bytes_then_the_end) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("last")));
    CO_ASSERT_OK(co_await pair->client.shutdown());  // FIN right behind the bytes
    woken first;
    park(std::move(pair->server), now() + std::chrono::hours(1), wake_into(first));
    co_await until_woken(first);
    CO_ASSERT_OK(*first.got);
    EXPECT_EQ(text_of((*first.got)->bytes()), "last");
    first.got.reset();
    woken second;  // parked again, as a server does after a request
    park(std::move(*first.stream), now() + std::chrono::hours(1), wake_into(second));
    co_await until_woken(second);
    CO_ASSERT_OK(*second.got);
    EXPECT_TRUE((*second.got)->empty());
    // Our side still writes: the peer only closed its own.
    CO_ASSERT_OK(co_await second.stream->write_all(bytes_of("ok")));
    std::byte buf[2];
    CO_ASSERT_OK(co_await read_exactly(pair->client, std::span(buf, 2)));
    EXPECT_EQ(pool_available(), pool_capacity());
  }());
}

TEST(park, held_bytes_arriving_while_every_buffer_is_held_wake_with_no_buffer_space_and_stay) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto pool = buffer_pool::of_this_core({.buffers = 1, .buffer_size = 64});  // first use: sized here
    CO_ASSERT_OK(pool);
    auto holder = co_await connect_pair();
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(holder);
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(co_await holder->client.write_all(bytes_of("x")));
    auto held = co_await holder->server.read_pooled();  // the pool's only buffer
    CO_ASSERT_OK(held);
    EXPECT_EQ(pool_available(), 0u);
    woken dry;
    park(std::move(pair->server), now() + std::chrono::hours(1), wake_into(dry));
    CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("kept")));
    co_await until_woken(dry);
    CO_ASSERT_TRUE(dry.got.has_value());
    EXPECT_EQ(dry.got->error(), errc::no_buffer_space);
    held->reset();  // a buffer again: the bytes were left in the socket
    woken again;
    park(std::move(*dry.stream), now() + std::chrono::hours(1), wake_into(again));
    co_await until_woken(again);
    CO_ASSERT_OK(*again.got);
    EXPECT_EQ(text_of((*again.got)->bytes()), "kept");
  }());
}

TEST(park, held_wake_may_park_the_stream_again_or_close_it_from_inside_the_completion) {
  SKIP_WITHOUT_POOLS();
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    // Re-parked from inside wake, three times; the fourth wake closes the stream there.
    static int wakes = 0;
    static std::string seen;
    wakes = 0;
    seen.clear();
    struct again {
      void operator()(tcp_stream s, result<pooled_buffer> got) const {
        ++wakes;
        if (got) seen += text_of(got->bytes());
        got = errc::operation_canceled;  // the buffer goes back before the next park
        if (wakes < 4)
          park(std::move(s), now() + std::chrono::hours(1), again{});
        else
          s.close();
      }
    };
    park(std::move(pair->server), now() + std::chrono::hours(1), again{});
    for (const char* part : {"a", "b", "c", "d"}) {
      const int before = wakes;
      CO_ASSERT_OK(co_await pair->client.write_all(bytes_of(part)));
      while (wakes == before) co_await sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(seen, "abcd");
    std::byte buf[1];
    auto end = co_await pair->client.read(std::span(buf, 1));  // the server's end closed
    EXPECT_TRUE(!end || *end == 0);
    EXPECT_EQ(pool_available(), pool_capacity());
  }());
}

}  // namespace
}  // namespace cogwheel
