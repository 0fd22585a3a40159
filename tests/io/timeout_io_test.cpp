// with_timeout / with_deadline on reads and writes: a timeout cancels the SQE and waits for it,
// so a read that timed out consumed nothing and a read that returned data lost nothing, under
// races with the peer and at exactly the deadline. Frames destroyed mid-operation:
// timeout_teardown_test.cpp; accept and connect: timeout_accept_test.cpp.
#include <cogwheel/runtime/timeout.hpp>  // first: the header compiles on its own

#include <dirent.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <coroutine>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

constexpr std::byte sentinel{0xA5};

bool untouched(std::span<const std::byte> buf) {
  for (std::byte b : buf)
    if (b != sentinel) return false;
  return true;
}


TEST(timeout_io, read_without_data_times_out_and_the_connection_still_works) {
  run(
      []() -> task<void> {
        auto pair = co_await connect_pair();
        CO_ASSERT_OK(pair);
        std::byte buf[16];
        std::fill(std::begin(buf), std::end(buf), sentinel);
        const auto start = loop_now();
        auto r = co_await with_timeout(pair->server.read(buf), 50ms);
        CO_ASSERT_TRUE(!r);
        EXPECT_EQ(r.error(), errc::timed_out) << r.error().message();
        EXPECT_GE(loop_now() - start, 50ms);  // never early
        EXPECT_TRUE(untouched(buf));

        // Nothing was consumed, the stream is intact: later data reaches a later read.
        CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("later")));
        auto n = co_await with_timeout(read_exactly(pair->server, std::span(buf, 5)), 1s);
        CO_ASSERT_OK(n);
        EXPECT_EQ(text_of(std::span(buf, *n)), "later");
        for (int i = 0; i < 3; ++i) {  // and again, timing out repeatedly changes nothing
          auto again = co_await with_timeout(pair->server.read(buf), 10ms);
          EXPECT_EQ(again.error(), errc::timed_out);
        }
        CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("more")));
        auto m = co_await with_timeout(read_exactly(pair->server, std::span(buf, 4)), 1s);
        CO_ASSERT_OK(m);
        EXPECT_EQ(text_of(std::span(buf, *m)), "more");
      }(),
      paused());
}

TEST(timeout_io, data_arriving_before_the_timeout_is_returned) {
  run(
      []() -> task<void> {
        auto pair = co_await connect_pair();
        CO_ASSERT_OK(pair);
        auto send_later = [](tcp_stream& s) -> task<void> {
          co_await sleep_for(10ms);
          (void)co_await s.write_all(bytes_of("data"));
        };
        spawn(send_later(pair->client));
        const std::size_t timers_before = pending_timers();
        const auto start = loop_now();
        std::byte buf[16];
        auto n = co_await with_timeout(pair->server.read(buf), 1s);
        CO_ASSERT_OK(n);
        EXPECT_EQ(text_of(std::span(buf, *n)), "data");
        EXPECT_GE(loop_now() - start, 10ms);
        EXPECT_LT(loop_now() - start, 1s);
        EXPECT_LE(pending_timers(), timers_before);  // the timeout's timer is gone with it
      }(),
      paused());
}

TEST(timeout_io, with_deadline_on_an_expired_deadline_reads_nothing) {
  run(
      []() -> task<void> {
        auto pair = co_await connect_pair();
        CO_ASSERT_OK(pair);
        CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("kept")));
        deadline idle(10ms);
        co_await sleep_for(20ms);
        EXPECT_TRUE(idle.expired());
        std::byte buf[8];
        std::fill(std::begin(buf), std::end(buf), sentinel);
        auto r = co_await with_deadline(pair->server.read(buf), idle);
        EXPECT_EQ(r.error(), errc::timed_out);
        EXPECT_TRUE(untouched(buf));
        idle.reset(1s);
        auto n = co_await with_deadline(read_exactly(pair->server, std::span(buf, 4)), idle);
        CO_ASSERT_OK(n);
        EXPECT_EQ(text_of(std::span(buf, *n)), "kept");
      }(),
      paused());
}

// What one idle-kicking connection handler saw.
struct idle_report {
  clock::time_point started{};
  clock::time_point last_message{};
  clock::time_point ended{};
  std::size_t bytes = 0;
  std::error_code error;
  bool finished = false;
};

// The classic idle handler: every message pushes the connection's deadline forward; a
// connection that stays silent past it is closed.
task<void> kick_when_idle(tcp_stream s, clock::duration idle_for, idle_report& report) {
  deadline idle(idle_for);
  report.started = loop_now();
  std::byte buf[64];
  for (;;) {
    auto n = co_await with_deadline(s.read(buf), idle);
    if (!n || *n == 0) {
      report.error = n.error();
      break;
    }
    report.bytes += *n;
    report.last_message = loop_now();
    idle.reset(idle_for);
  }
  report.ended = loop_now();
  report.finished = true;
}  // closes s: the client reads end of stream

TEST(timeout_io, deadline_reset_per_message_keeps_a_chatty_connection_and_kicks_a_silent_one) {
  static constexpr auto idle_for = 100ms;
  static constexpr auto tolerance = 2ms;  // the wheel fires within a tick (1 ms) of a deadline
  static constexpr int messages = 10;
  run(
      []() -> task<void> {
        auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
        CO_ASSERT_OK(listener);
        idle_report reports[2];
        auto chatty = co_await tcp_stream::connect(listener->local_address());
        CO_ASSERT_OK(chatty);
        auto chatty_server = co_await listener->accept();
        CO_ASSERT_OK(chatty_server);
        spawn(kick_when_idle(std::move(*chatty_server), idle_for, reports[0]));
        auto silent = co_await tcp_stream::connect(listener->local_address());
        CO_ASSERT_OK(silent);
        auto silent_server = co_await listener->accept();
        CO_ASSERT_OK(silent_server);
        spawn(kick_when_idle(std::move(*silent_server), idle_for, reports[1]));

        auto talk = [](tcp_stream& s) -> task<void> {
          for (int i = 0; i < messages; ++i) {
            co_await sleep_for(40ms);  // well inside the idle time
            CO_ASSERT_OK(co_await s.write_all(bytes_of("m")));
          }
          std::byte b[1];
          auto eof = co_await with_timeout(s.read(b), 1s);  // then silent: kicked
          CO_ASSERT_OK(eof);
          EXPECT_EQ(*eof, 0u);
        };
        auto listen_only = [](tcp_stream& s) -> task<void> {
          std::byte b[1];
          auto eof = co_await with_timeout(s.read(b), 1s);
          CO_ASSERT_OK(eof);
          EXPECT_EQ(*eof, 0u);
        };
        CO_ASSERT_OK(co_await with_timeout(together(talk(*chatty), listen_only(*silent)), 5s));

        const idle_report& c = reports[0];
        const idle_report& s = reports[1];
        CO_ASSERT_TRUE(c.finished && s.finished);
        EXPECT_EQ(c.bytes, static_cast<std::size_t>(messages));
        EXPECT_EQ(c.error, errc::timed_out);
        EXPECT_GE(c.ended - c.last_message, idle_for);
        EXPECT_LE(c.ended - c.last_message, idle_for + tolerance);
        EXPECT_GE(c.ended - c.started, messages * 40ms);  // alive far beyond one idle period
        EXPECT_EQ(s.bytes, 0u);
        EXPECT_EQ(s.error, errc::timed_out);
        EXPECT_GE(s.ended - s.started, idle_for);
        EXPECT_LE(s.ended - s.started, idle_for + tolerance);
      }(),
      paused());
}

// The bytes of message i of the race tests.
std::array<std::byte, 8> message(std::uint64_t i) {
  std::array<std::byte, 8> m;
  std::memcpy(m.data(), &i, sizeof i);
  return m;
}

// Checks that `received` is exactly messages 0 .. count-1, in order.
void expect_stream_of_messages(const std::vector<std::byte>& received, int count) {
  ASSERT_EQ(received.size(), static_cast<std::size_t>(count) * 8);
  for (int i = 0; i < count; ++i) {
    std::uint64_t v = 0;
    std::memcpy(&v, received.data() + i * 8, 8);
    ASSERT_EQ(v, static_cast<std::uint64_t>(i)) << "message " << i << " lost, duplicated or out of order";
  }
}

// What the real-clock races reach: both outcomes, each checked byte for byte. (A read that
// completes with data after its timer fired is not among them: the loop reaps every completion
// its wait produced before the next advance, and a cancel submitted with the data's arrival
// wins over the read's deferred completion. a_read_that_completes_as_its_timer_fires_returns_
// its_data takes that path on purpose, in every round.)
struct race_counts {
  int timed_out = 0;  // the read timed out: it must have consumed nothing
  int data = 0;       // the read returned data
};

// Reads round `round`'s message, which the sender sends at about `at`, with the read's deadline
// exactly `at`: whichever wins, the message must arrive exactly once.
task<void> race_round(tcp_stream& s, clock::time_point at, std::vector<std::byte>& received, race_counts& counts) {
  std::byte buf[64];
  std::fill(std::begin(buf), std::end(buf), sentinel);
  auto r = co_await with_deadline(s.read(buf), at);
  if (r) {
    CO_ASSERT_TRUE(*r > 0);
    received.insert(received.end(), buf, buf + *r);
    ++counts.data;
  } else {
    EXPECT_EQ(r.error(), errc::timed_out) << r.error().message();
    EXPECT_TRUE(untouched(buf)) << "a read that timed out wrote into the buffer";
    ++counts.timed_out;
  }
}

// Reads until `received` holds `want` bytes (the rest of a round's message).
task<void> catch_up(tcp_stream& s, std::vector<std::byte>& received, std::size_t want) {
  std::byte buf[64];
  while (received.size() < want) {
    auto n = co_await with_timeout(s.read(std::span(buf, std::min(sizeof buf, want - received.size()))), 2s);
    CO_ASSERT_OK(n);
    CO_ASSERT_TRUE(*n > 0);
    received.insert(received.end(), buf, buf + *n);
  }
}

TEST(timeout_io, a_timeout_racing_arriving_data_never_loses_or_duplicates_bytes) {
  // Sender and receiver on the same loop: the message is sent by a sleep that ends at the
  // read's deadline give or take a few ticks, so the two timers often expire in the same
  // wheel advance and the read's cancel and the send reach the kernel in one submission.
  // (With DEFER_TASKRUN the cancel then wins over data that arrived but was not yet read:
  // the read times out having consumed nothing, which is what this checks byte for byte.)
  static const int rounds = scaled(2000);
  run(
      []() -> task<void> {
        auto pair = co_await connect_pair();
        CO_ASSERT_OK(pair);
        CO_ASSERT_OK(pair->client.set_nodelay(true));
        std::vector<std::byte> received;
        race_counts counts;
        static constexpr clock::duration offsets[] = {-200us, -100us, 0us, 0us, 100us, 200us, 0us};
        for (int i = 0; i < rounds; ++i) {
          const clock::time_point at = clock::now() + 1ms;
          bool sent = false;
          auto send_at = [](tcp_stream& s, clock::time_point when, int index, bool& done) -> task<void> {
            co_await sleep_until(when);
            const auto m = message(static_cast<std::uint64_t>(index));
            CO_ASSERT_OK(co_await s.write_all(m));
            done = true;
          };
          spawn(send_at(pair->client, at + offsets[i % std::size(offsets)], i, sent));
          // Every other round the sender files its timer first (it starts during the yield), so
          // that at equal deadlines it fires first in the batch: its send SQE then goes to the
          // kernel ahead of the read's cancel SQE, the other order than in the remaining rounds.
          if (i % 2 == 0) co_await yield();
          co_await race_round(pair->server, at, received, counts);
          while (!sent) co_await sleep_for(100us);
          co_await catch_up(pair->server, received, static_cast<std::size_t>(i + 1) * 8);
          if (::testing::Test::HasFailure()) co_return;
        }
        expect_stream_of_messages(received, rounds);
        EXPECT_GT(counts.timed_out, 0);
        EXPECT_GT(counts.data, 0);
        std::printf("same loop: %d rounds: %d timed out, %d returned data\n", rounds, counts.timed_out, counts.data);
      }(),
      runtime_options{.tick = 100us});
}

TEST(timeout_io, a_timeout_racing_data_from_another_thread_never_loses_or_duplicates_bytes) {
  // The sender is a plain thread doing send(2) at the read's deadline give or take 300 us, so
  // the data lands at any point of the loop's timer, cancel and reap sequence.
  static const int rounds = scaled(1000);
  run(
      []() -> task<void> {
        auto pair = co_await connect_pair();
        CO_ASSERT_OK(pair);
        CO_ASSERT_OK(pair->client.set_nodelay(true));
        const int fd = pair->client.native_handle();
        std::atomic<int> go{-1};
        std::atomic<clock::rep> go_at{0};
        std::atomic<int> sent{-1};
        std::atomic<bool> quit{false};
        std::thread sender([&] {
          std::uint32_t seed = 12345;
          for (int i = 0; i < rounds; ++i) {
            while (go.load(std::memory_order_acquire) < i)
              if (quit.load()) return;
            seed = seed * 1664525u + 1013904223u;
            const auto jitter = std::chrono::microseconds(static_cast<int>(seed >> 16) % 601 - 300);
            const clock::time_point when = clock::time_point(clock::duration(go_at.load())) + jitter;
            while (clock::now() < when) {
            }
            const auto m = message(static_cast<std::uint64_t>(i));
            if (::send(fd, m.data(), m.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(m.size())) {
              ADD_FAILURE() << "send: " << std::strerror(errno);
              sent.store(rounds);
              return;
            }
            sent.store(i, std::memory_order_release);
          }
        });
        std::vector<std::byte> received;
        race_counts counts;
        for (int i = 0; i < rounds; ++i) {
          const clock::time_point at = clock::now() + 1ms;
          go_at.store(at.time_since_epoch().count());
          go.store(i, std::memory_order_release);
          co_await race_round(pair->server, at, received, counts);
          while (sent.load(std::memory_order_acquire) < i) co_await sleep_for(50us);
          co_await catch_up(pair->server, received, static_cast<std::size_t>(i + 1) * 8);
          if (::testing::Test::HasFailure()) break;
        }
        quit.store(true);
        sender.join();
        if (::testing::Test::HasFailure()) co_return;
        expect_stream_of_messages(received, rounds);
        EXPECT_GT(counts.timed_out, 0);
        EXPECT_GT(counts.data, 0);
        std::printf("other thread: %d rounds: %d timed out, %d returned data\n", rounds, counts.timed_out,
                    counts.data);
      }(),
      runtime_options{.tick = 100us});
}

TEST(timeout_io, a_peer_that_sends_exactly_at_the_deadline_loses_no_byte_on_a_paused_clock) {
  // Deterministic: on the paused clock the reader's timeout and the peer's send are due at the
  // same instant, so they fire in the same advance, in either order (the sender's sleep filed
  // before or after the read's timer). The send and the read's cancel then reach the kernel in
  // one submission, and the cancel wins over the read's completion, which would only run after
  // the submission: in all four orders the read times out exactly at the deadline having
  // consumed nothing, and the byte waits for the next read. (Data already there when the
  // deadline is reached wins instead: data_already_there_when_the_deadline_is_reached_wins_on_a_
  // paused_clock.)
  for (const bool sender_first : {true, false}) {
    for (const timer_kind kind : {timer_kind::wheel, timer_kind::heap}) {
      SCOPED_TRACE(std::string(sender_first ? "sender filed first, " : "reader filed first, ") +
                   (kind == timer_kind::wheel ? "wheel" : "heap"));
      run(
          [](bool sender_first) -> task<void> {
            auto pair = co_await connect_pair();
            CO_ASSERT_OK(pair);
            // On a tick boundary (ticks count from the clock's epoch), so both fire exactly there.
            const clock::time_point at = std::chrono::ceil<std::chrono::milliseconds>(loop_now() + 10ms);
            auto sender = [](tcp_stream& s, clock::time_point at) -> task<void> {
              co_await sleep_until(at);
              CO_ASSERT_OK(co_await s.write_all(bytes_of("x")));
            };
            std::byte buf[8];
            std::fill(std::begin(buf), std::end(buf), sentinel);
            auto reader = [](tcp_stream& s, std::span<std::byte> b, clock::time_point at,
                             result<std::size_t>& out, clock::time_point& ended) -> task<void> {
              out = co_await with_deadline(s.read(b), at);
              ended = loop_now();
            };
            result<std::size_t> got = errc::operation_in_progress;
            clock::time_point ended{};
            if (sender_first) {
              co_await when_all(sender(pair->client, at), reader(pair->server, buf, at, got, ended));
            } else {
              co_await when_all(reader(pair->server, buf, at, got, ended), sender(pair->client, at));
            }
            CO_ASSERT_TRUE(!got);
            EXPECT_EQ(got.error(), errc::timed_out);
            EXPECT_EQ(ended, at);  // not a tick early, not a tick late
            EXPECT_TRUE(untouched(buf));
            auto again = co_await with_timeout(pair->server.read(buf), 1s);  // the byte waits
            CO_ASSERT_OK(again);
            EXPECT_EQ(*again, 1u);
            EXPECT_EQ(buf[0], std::byte{'x'});
          }(sender_first),
          runtime_options{.timers = kind, .paused_clock = true});
    }
  }
}

TEST(timeout_io, a_read_that_completes_as_its_timer_fires_returns_its_data) {
  // The read's SQE is queued while completions are dispatched (after this iteration's
  // submit) with a deadline already past: at the next iteration the timer fires first and
  // queues the cancel behind the read's SQE, so the kernel runs the read, then the cancel.
  // With data waiting, the read completes with it although the timer fired: those bytes must
  // be returned, not reported as timed_out (and so lost).
  static const int rounds = scaled(600);
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    std::vector<std::byte> received;
    int sent = 0;
    int fired_but_data = 0;
    for (int i = 0; i < rounds; ++i) {
      const bool send = i % 3 != 0;
      if (send) {
        const auto m = message(static_cast<std::uint64_t>(sent));
        CO_ASSERT_OK(co_await pair->client.write_all(m));  // resumes us from a completion
        ++sent;
      } else {
        CO_ASSERT_OK(co_await pair->client.write(std::span<const std::byte>()));  // likewise, no data
      }
      std::byte buf[64];
      std::fill(std::begin(buf), std::end(buf), sentinel);
      // Already past (by more than a tick, so the wheel's rounding up cannot defer it).
      auto racing = with_deadline(pair->server.read(buf), clock::now() - 2ms);
      auto r = co_await racing;
      if (send) {
        CO_ASSERT_OK(r);
        received.insert(received.end(), buf, buf + *r);
        if (racing.timer_fired()) ++fired_but_data;
        co_await catch_up(pair->server, received, static_cast<std::size_t>(sent) * 8);
      } else {
        CO_ASSERT_TRUE(!r);
        EXPECT_EQ(r.error(), errc::timed_out);
        EXPECT_TRUE(untouched(buf));
      }
    }
    expect_stream_of_messages(received, sent);
    // The point of the test: the read really did complete after its timer had fired, in every
    // round with data (the timer, already due, fires in the advance before the read's SQE is
    // submitted, and the cancel goes in behind it).
    EXPECT_EQ(fired_but_data, sent) << "the race was not exercised in every round";
    std::printf("%d reads found data; %d of them after their timer had fired\n", sent, fired_but_data);
  }());
}

TEST(timeout_io, a_write_that_completes_as_its_timer_fires_reports_its_bytes) {
  // As above for writes: the send runs in the kernel before the cancel, so its bytes went
  // out and the result says so (a count, or success for write_all), not timed_out.
  static const int rounds = scaled(200);
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    int fired = 0;
    std::vector<std::byte> received;
    for (int i = 0; i < rounds; ++i) {
      CO_ASSERT_OK(co_await pair->client.write(std::span<const std::byte>()));  // resume from a completion
      const auto m = message(static_cast<std::uint64_t>(i));
      if (i % 2 == 0) {
        auto racing = with_deadline(pair->client.write(m), clock::now() - 2ms);
        auto n = co_await racing;
        CO_ASSERT_OK(n);
        EXPECT_EQ(*n, m.size());
        fired += racing.timer_fired() ? 1 : 0;
      } else {
        auto racing = with_deadline(pair->client.write_all(m), clock::now() - 2ms);
        CO_ASSERT_OK(co_await racing);
        fired += racing.timer_fired() ? 1 : 0;
      }
      co_await catch_up(pair->server, received, static_cast<std::size_t>(i + 1) * 8);
    }
    expect_stream_of_messages(received, rounds);
    EXPECT_EQ(fired, rounds) << "the race was not exercised in every round";
  }());
}

TEST(timeout_io, data_already_there_when_the_deadline_is_reached_wins_on_a_paused_clock) {
  // The other side of the test above, taken deterministically: the byte is in the socket and
  // the read starts exactly at its deadline, so the deadline's timer and the read's completion
  // are due in the same iteration. The completion is reaped in that iteration's wait, before
  // the next advance could fire the timer: the read returns the byte, never timed_out.
  for (const timer_kind kind : {timer_kind::wheel, timer_kind::heap}) {
    SCOPED_TRACE(kind == timer_kind::wheel ? "wheel" : "heap");
    run(
        []() -> task<void> {
          auto pair = co_await connect_pair();
          CO_ASSERT_OK(pair);
          const clock::time_point at = std::chrono::ceil<std::chrono::milliseconds>(loop_now() + 10ms);
          CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("x")));
          co_await sleep_until(at);
          EXPECT_EQ(loop_now(), at);
          std::byte buf[8];
          std::fill(std::begin(buf), std::end(buf), sentinel);
          auto got = co_await with_deadline(pair->server.read(buf), at);
          CO_ASSERT_OK(got);
          EXPECT_EQ(*got, 1u);
          EXPECT_EQ(buf[0], std::byte{'x'});
        }(),
        runtime_options{.timers = kind, .paused_clock = true});
  }
}

TEST(timeout_io, a_read_inside_a_task_under_a_timeout_completes_with_operation_canceled) {
  // README: a task awaited under a timeout observes cancellation at its next suspension point:
  // what it awaits (here a socket read, in flight when the timer fires, and one started after)
  // completes with operation_canceled, and the caller gets timed_out once the task finished.
  run(
      []() -> task<void> {
        auto pair = co_await connect_pair();
        CO_ASSERT_OK(pair);
        std::vector<std::error_code> seen;
        auto reader = [](tcp_stream& s, std::vector<std::error_code>& seen) -> task<void> {
          std::byte buf[8];
          for (int i = 0; i < 2; ++i) {
            auto n = co_await s.read(buf);
            seen.push_back(n ? std::error_code() : n.error());
          }
        };
        const auto start = loop_now();
        auto r = co_await with_timeout(reader(pair->server, seen), 10ms);
        CO_ASSERT_TRUE(!r);
        EXPECT_EQ(r.error(), errc::timed_out);
        EXPECT_GE(loop_now() - start, 10ms);
        EXPECT_LT(loop_now() - start, 11ms);  // within the tick the deadline rounds up to
        CO_ASSERT_TRUE(seen.size() == 2u);
        EXPECT_EQ(seen[0], errc::operation_canceled);
        EXPECT_EQ(seen[1], errc::operation_canceled);
        // Nothing of the reader is left armed: the next byte reaches the next read.
        CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("z")));
        std::byte b[1];
        auto n = co_await with_timeout(pair->server.read(b), 1s);
        CO_ASSERT_OK(n);
        EXPECT_EQ(*n, 1u);
      }(),
      paused());
}

TEST(timeout_io, write_all_cut_by_its_timeout_reports_exactly_the_bytes_sent) {
  // A timeout never loses bytes written: with_timeout can only say timed_out, so write_all's
  // counter tells the caller how far it got, and the peer receives exactly that prefix.
  static constexpr std::size_t total = 8 << 20;
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(pair->client.set_send_buffer_size(32 * 1024));
    const std::vector<std::byte> data = pattern_bytes(total);
    std::size_t sent = 12345;  // reset by write_all
    auto r = co_await with_timeout(pair->client.write_all(data, sent), 20ms);  // nobody reads yet
    CO_ASSERT_TRUE(!r);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_GT(sent, 0u);
    EXPECT_LT(sent, total);
    CO_ASSERT_OK(co_await pair->client.shutdown());
    auto received = co_await read_to_eof(pair->server);
    CO_ASSERT_OK(received);
    const std::vector<std::byte>& got = *received;
    EXPECT_EQ(got.size(), sent);
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i] != pattern_at(i)) {
        ADD_FAILURE() << "byte " << i << " is wrong";
        break;
      }
    }
    std::size_t all = 0;  // and the counter reads the whole length when it completes
    CO_ASSERT_OK(co_await pair->server.write_all(bytes_of("fine"), all));
    EXPECT_EQ(all, 4u);
  }());
}

}  // namespace
}  // namespace cogwheel
