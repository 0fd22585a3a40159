// udp_socket: datagrams over IPv4 and IPv6, connected and not, with the sender's address; empty
// and oversized datagrams; and under with_timeout / with_deadline: a receive that times out
// consumed nothing, one that raced its timer and won returned its datagram, a frame destroyed
// mid-receive left no receive armed; a request/retry client survives a lossy, reordering peer.
#include <cogwheel/io/udp.hpp>  // first: the header compiles on its own

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <optional>
#include <thread>
#include <vector>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

constexpr std::byte sentinel{0xA5};

bool untouched(std::span<const std::byte> buf) {
  return std::all_of(buf.begin(), buf.end(), [](std::byte b) { return b == sentinel; });
}

bool ipv6_available() {
  return udp_socket::bind(socket_address::ipv6_loopback(0)).has_value();
}

socket_address address_of(const udp_socket& s) { return s.local_address(); }

struct socket_pair {
  udp_socket a;
  udp_socket b;
};

// Two sockets bound to `where` (port 0: each its own free port).
result<socket_pair> bind_pair(socket_address where = socket_address::ipv4_loopback(0)) {
  auto a = udp_socket::bind(where);
  if (!a) return a.error();
  auto b = udp_socket::bind(where);
  if (!b) return b.error();
  return socket_pair{std::move(*a), std::move(*b)};
}

// Two sockets on `where`'s loopback exchange datagrams both ways, unconnected.
void ping_pong_unconnected(socket_address where) {
  run([](socket_address where) -> task<void> {
    auto pair = bind_pair(where);
    CO_ASSERT_OK(pair);
    auto& [a, b] = *pair;
    auto sent = co_await b.send_to(bytes_of("ping"), address_of(a));
    CO_ASSERT_OK(sent);
    EXPECT_EQ(*sent, 4u);
    std::byte buf[64];
    auto got = co_await with_timeout(a.receive_from(buf), 2s);
    CO_ASSERT_OK(got);
    EXPECT_EQ(text_of(std::span(buf, got->first)), "ping");
    EXPECT_EQ(got->second, address_of(b)) << got->second.to_string();
    EXPECT_EQ(got->second.family(), where.family());

    CO_ASSERT_OK(co_await a.send_to(bytes_of("pong"), got->second));  // reply to the sender
    auto reply = co_await with_timeout(b.receive_from(buf), 2s);
    CO_ASSERT_OK(reply);
    EXPECT_EQ(text_of(std::span(buf, reply->first)), "pong");
    EXPECT_EQ(reply->second, address_of(a));
  }(where));
}

TEST(udp, datagrams_reach_their_destination_with_the_senders_ipv4_address) {
  ping_pong_unconnected(socket_address::ipv4_loopback(0));
}

TEST(udp, datagrams_reach_their_destination_with_the_senders_ipv6_address) {
  if (!ipv6_available()) GTEST_SKIP() << "no IPv6 loopback (::1) on this machine";
  ping_pong_unconnected(socket_address::ipv6_loopback(0));
}

// Written the tcp_listener way: local_address() is a plain socket_address, the bound port.
TEST(udp, local_address_is_the_bound_address_as_for_a_listener) {
  auto s = udp_socket::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(s);
  const socket_address at = s->local_address();
  EXPECT_NE(at.port(), 0);
  EXPECT_EQ(at, socket_address::parse("127.0.0.1:" + std::to_string(at.port())).value());
  EXPECT_EQ(at, socket_address::local_of(s->native_handle()).value());
  s->close();
  EXPECT_EQ(s->local_address(), socket_address{});
}

// Bound to 0.0.0.0, a socket has no IP of its own until connect() picks a route.
TEST(udp, connect_learns_the_local_ip_the_route_gave) {
  run([]() -> task<void> {
    auto any = udp_socket::bind(socket_address::ipv4_any(0));
    auto peer = udp_socket::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(any);
    CO_ASSERT_OK(peer);
    const std::uint16_t port = any->local_address().port();
    EXPECT_EQ(any->local_address(), socket_address::ipv4_any(port));
    CO_ASSERT_OK(co_await any->connect(peer->local_address()));
    EXPECT_EQ(any->local_address(), socket_address::ipv4_loopback(port));
    EXPECT_EQ(any->local_address(), socket_address::local_of(any->native_handle()).value());
  }());
}

TEST(udp, connected_sockets_exchange_with_send_and_receive_and_hear_no_stranger) {
  run([]() -> task<void> {
    auto pair = bind_pair();
    auto stranger = udp_socket::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(stranger);
    auto& [a, b] = *pair;
    CO_ASSERT_OK(co_await a.connect(address_of(b)));
    CO_ASSERT_OK(co_await b.connect(address_of(a)));
    CO_ASSERT_OK(co_await stranger->send_to(bytes_of("not for you"), address_of(a)));
    auto n = co_await b.send(bytes_of("hello"));
    CO_ASSERT_OK(n);
    EXPECT_EQ(*n, 5u);
    std::byte buf[64];
    auto got = co_await with_timeout(a.receive(buf), 2s);  // the stranger's datagram was dropped
    CO_ASSERT_OK(got);
    EXPECT_EQ(text_of(std::span(buf, *got)), "hello");
    CO_ASSERT_OK(co_await a.send(bytes_of("back")));
    auto from = co_await with_timeout(b.receive_from(buf), 2s);
    CO_ASSERT_OK(from);
    EXPECT_EQ(text_of(std::span(buf, from->first)), "back");
    EXPECT_EQ(from->second, address_of(a));
  }());
}

TEST(udp, a_connected_socket_reports_connection_refused_when_nobody_listens) {
  run([]() -> task<void> {
    auto bound = udp_socket::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(bound);
    udp_socket& a = *bound;
    socket_address nobody;
    {
      auto gone = udp_socket::bind(socket_address::ipv4_loopback(0));
      CO_ASSERT_OK(gone);
      nobody = address_of(*gone);
    }  // closed: the port is free, loopback answers with ICMP port unreachable
    CO_ASSERT_OK(co_await a.connect(nobody));
    CO_ASSERT_OK(co_await a.send(bytes_of("anyone?")));
    std::byte buf[16];
    auto r = co_await with_timeout(a.receive(buf), 2s);
    CO_ASSERT_TRUE(!r);
    EXPECT_EQ(r.error(), errc::connection_refused) << r.error().message();
  }());
}

TEST(udp, each_receive_returns_one_whole_datagram_and_empty_ones_are_delivered) {
  run([]() -> task<void> {
    auto pair = bind_pair();
    CO_ASSERT_OK(pair);
    auto& [a, b] = *pair;
    const std::vector<std::byte> big = pattern_bytes(1000);
    const std::span<const std::byte> datagrams[] = {bytes_of("a"), {}, big, {}, bytes_of("tail")};
    for (auto d : datagrams) {
      auto n = co_await b.send_to(d, address_of(a));
      CO_ASSERT_OK(n);
      EXPECT_EQ(*n, d.size());
    }
    std::vector<std::byte> buf(2048);
    for (auto d : datagrams) {
      auto got = co_await with_timeout(a.receive_from(buf), 2s);
      CO_ASSERT_OK(got);
      EXPECT_EQ(got->first, d.size());  // 0 for an empty datagram: not an end of stream
      EXPECT_TRUE(std::equal(d.begin(), d.end(), buf.begin()));
      EXPECT_EQ(got->second, address_of(b));
    }
  }());
}

TEST(udp, a_datagram_larger_than_the_buffer_is_reported_as_message_size_not_cut) {
  run([]() -> task<void> {
    auto pair = bind_pair();
    CO_ASSERT_OK(pair);
    auto& [a, b] = *pair;
    const std::vector<std::byte> data = pattern_bytes(100);
    for (int i = 0; i < 3; ++i) CO_ASSERT_OK(co_await b.send_to(data, address_of(a)));
    CO_ASSERT_OK(co_await b.send_to(bytes_of("next"), address_of(a)));

    std::byte small[10];
    auto r = co_await with_timeout(a.receive(small), 2s);
    EXPECT_EQ(r.error(), errc::message_size);
    EXPECT_TRUE(std::equal(std::begin(small), std::end(small), data.begin()));  // the first bytes
    auto from = co_await with_timeout(a.receive_from(small), 2s);
    EXPECT_EQ(from.error(), errc::message_size);
    std::byte exact[100];  // a buffer of exactly the datagram's size is not a truncation
    auto whole = co_await with_timeout(a.receive(exact), 2s);
    CO_ASSERT_OK(whole);
    EXPECT_EQ(*whole, 100u);
    auto next = co_await with_timeout(a.receive(small), 2s);  // the rest of a cut one is gone
    CO_ASSERT_OK(next);
    EXPECT_EQ(text_of(std::span(small, *next)), "next");
  }());
}

TEST(udp, a_datagram_too_large_for_udp_is_refused_with_message_size) {
  run([]() -> task<void> {
    auto bound = udp_socket::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(bound);
    udp_socket& a = *bound;
    const std::vector<std::byte> huge(70000);
    auto r = co_await a.send_to(huge, address_of(a));
    EXPECT_EQ(r.error(), errc::message_size) << r.error().message();
  }());
}

TEST(udp, binding_a_port_in_use_fails_with_address_in_use) {
  auto a = udp_socket::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(a) << a.error().message();
  auto b = udp_socket::bind(address_of(*a));
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error(), errc::address_in_use);
  auto shared = udp_socket::bind(socket_address::ipv4_loopback(0), {.reuse_port = true});
  ASSERT_TRUE(shared);
  EXPECT_TRUE(udp_socket::bind(address_of(*shared), {.reuse_port = true}));  // one per core
}

TEST(udp, receive_under_a_timeout_returns_timed_out_when_nothing_comes_and_consumes_nothing) {
  run(
      []() -> task<void> {
        auto pair = bind_pair();
        CO_ASSERT_OK(pair);
        auto& [a, b] = *pair;
        std::byte buf[16];
        std::fill(std::begin(buf), std::end(buf), sentinel);
        const auto start = loop_now();
        auto r = co_await with_timeout(a.receive_from(buf), 50ms);
        EXPECT_EQ(r.error(), errc::timed_out);
        EXPECT_GE(loop_now() - start, 50ms);  // never early
        EXPECT_TRUE(untouched(buf));
        for (int i = 0; i < 3; ++i) EXPECT_EQ((co_await with_timeout(a.receive(buf), 10ms)).error(), errc::timed_out);
        CO_ASSERT_OK(co_await b.send_to(bytes_of("later"), address_of(a)));  // reaches the next receive
        auto n = co_await with_timeout(a.receive(buf), 1s);
        CO_ASSERT_OK(n);
        EXPECT_EQ(text_of(std::span(buf, *n)), "later");
      }(),
      paused());
}

TEST(udp, a_reply_sent_exactly_at_the_deadline_is_never_lost_on_a_paused_clock) {
  // As the TCP twin in timeout_io_test.cpp: the receive's timeout and the peer's send are due
  // at the same instant and fire in one advance, in either order. Either the receive returns
  // the datagram, or it timed out exactly at the deadline and the datagram waits for the next.
  for (const bool sender_first : {true, false}) {
    for (const timer_kind kind : {timer_kind::wheel, timer_kind::heap}) {
      SCOPED_TRACE(std::string(sender_first ? "sender filed first, " : "receiver filed first, ") +
                   (kind == timer_kind::wheel ? "wheel" : "heap"));
      run(
          [](bool sender_first) -> task<void> {
            auto pair = bind_pair();
            CO_ASSERT_OK(pair);
            auto& [a, b] = *pair;
            const clock::time_point at = std::chrono::ceil<std::chrono::milliseconds>(loop_now() + 10ms);
            auto sender = [](udp_socket& s, socket_address to, clock::time_point at) -> task<void> {
              co_await sleep_until(at);
              CO_ASSERT_OK(co_await s.send_to(bytes_of("x"), to));
            };
            std::byte buf[8];
            std::fill(std::begin(buf), std::end(buf), sentinel);
            result<std::pair<std::size_t, socket_address>> got = errc::operation_in_progress;
            clock::time_point ended{};
            auto receiver = [&](udp_socket& s) -> task<void> {
              got = co_await with_deadline(s.receive_from(buf), at);
              ended = loop_now();
            };
            if (sender_first)
              co_await when_all(sender(b, address_of(a), at), receiver(a));
            else
              co_await when_all(receiver(a), sender(b, address_of(a), at));
            if (got) {
              EXPECT_EQ(got->first, 1u);
              EXPECT_EQ(buf[0], std::byte{'x'});
              EXPECT_EQ(got->second, address_of(b));
            } else {
              EXPECT_EQ(got.error(), errc::timed_out);
              EXPECT_EQ(ended, at);
              EXPECT_TRUE(untouched(buf));
              auto again = co_await with_timeout(a.receive(buf), 1s);
              CO_ASSERT_OK(again);
              EXPECT_EQ(*again, 1u);
              EXPECT_EQ(buf[0], std::byte{'x'});
            }
          }(sender_first),
          runtime_options{.timers = kind, .paused_clock = true});
    }
  }
}

TEST(udp, a_timeout_racing_datagrams_from_another_thread_never_loses_or_duplicates_one) {
  // A plain thread sends datagram i at receive i's deadline give or take 300 us. Whichever
  // wins, datagram i is received exactly once: by the racing receive, or by the next one.
  static const int rounds = scaled(500);
  run(
      []() -> task<void> {
        auto pair = bind_pair();
        CO_ASSERT_OK(pair);
        auto& [a, b] = *pair;
        CO_ASSERT_OK(co_await b.connect(address_of(a)));
        const int fd = b.native_handle();
        std::atomic<int> go{-1};
        std::atomic<clock::rep> go_at{0};
        std::atomic<bool> quit{false};
        std::thread sender([&] {
          std::uint32_t seed = 777;
          for (int i = 0; i < rounds; ++i) {
            while (go.load(std::memory_order_acquire) < i)
              if (quit.load()) return;
            seed = seed * 1664525u + 1013904223u;
            const auto jitter = std::chrono::microseconds(static_cast<int>(seed >> 16) % 601 - 300);
            const clock::time_point when = clock::time_point(clock::duration(go_at.load())) + jitter;
            while (clock::now() < when) {
            }
            if (::send(fd, &i, sizeof i, 0) != sizeof i) ADD_FAILURE() << "send: " << std::strerror(errno);
          }
        });
        int timed_out = 0, raced_in = 0;
        for (int i = 0; i < rounds && !::testing::Test::HasFailure(); ++i) {
          const clock::time_point at = clock::now() + 1ms;
          go_at.store(at.time_since_epoch().count());
          go.store(i, std::memory_order_release);
          int got = -1;
          auto r = co_await with_deadline(a.receive(std::as_writable_bytes(std::span(&got, 1))), at);
          if (!r) {
            EXPECT_EQ(r.error(), errc::timed_out) << r.error().message();
            EXPECT_EQ(got, -1) << "a receive that timed out wrote into the buffer";
            ++timed_out;
            r = co_await with_timeout(a.receive(std::as_writable_bytes(std::span(&got, 1))), 2s);
            if (!r) {
              ADD_FAILURE() << "datagram " << i << " never came: " << r.error().message();
              break;  // not co_return: the sender thread must be joined
            }
          } else {
            ++raced_in;
          }
          EXPECT_EQ(*r, sizeof got);
          EXPECT_EQ(got, i) << "datagram lost, duplicated or out of order";
        }
        quit.store(true);
        sender.join();
        EXPECT_GT(timed_out, 0);
        EXPECT_GT(raced_in, 0);
        std::printf("%d rounds: %d timed out, %d received in the race\n", rounds, timed_out, raced_in);
      }(),
      runtime_options{.tick = 100us});
}

task<void> receive_once_under_timeout(udp_socket& s, bool& finished) {
  std::byte buf[64];  // in the frame, like the msghdr: the kernel must be done before it goes
  (void)co_await with_timeout(s.receive_from(buf), 10s);
  finished = true;
}

TEST(udp, a_frame_destroyed_mid_receive_cancels_and_awaits_it_and_steals_no_datagram) {
  run([]() -> task<void> {
    auto pair = bind_pair();
    CO_ASSERT_OK(pair);
    auto& [a, b] = *pair;
    const std::size_t timers_before = pending_timers();
    bool finished = false;
    frame_holder holder = hold(receive_once_under_timeout(a, finished));
    co_await sleep_for(5ms);  // the receive's SQE is armed in the kernel
    EXPECT_EQ(pending_timers(), timers_before + 1);
    const auto before = this_core_metrics();
    holder.frame.destroy();
    EXPECT_GE(this_core_metrics().completions, before.completions + 1);  // awaited inside destroy()
    EXPECT_EQ(pending_timers(), timers_before);
    EXPECT_FALSE(finished);

    CO_ASSERT_OK(co_await b.send_to(bytes_of("still here"), address_of(a)));
    std::byte buf[32];
    auto n = co_await with_timeout(a.receive(buf), 2s);
    CO_ASSERT_OK(n);
    EXPECT_EQ(text_of(std::span(buf, *n)), "still here");
  }());
}

// The retry pattern of examples/udp_request.cpp against a peer that drops 30% of requests and
// delays some replies past the client's timeout (so late replies to earlier attempts and
// earlier requests arrive out of order). Requests and replies carry the request's id; the
// client ignores replies that are not for the request it waits on.
struct lossy_peer_stats {
  int dropped = 0;
  int delayed = 0;
};

task<void> lossy_echo(udp_socket& s, int requests_expected, lossy_peer_stats& stats) {
  std::uint32_t seed = 2024;
  std::uint32_t id = 0;
  for (;;) {
    auto got = co_await s.receive_from(std::as_writable_bytes(std::span(&id, 1)));
    if (!got) co_return;  // the client is done and closed the socket
    if (id == static_cast<std::uint32_t>(requests_expected)) co_return;  // the client's "bye"
    seed = seed * 1664525u + 1013904223u;
    const unsigned roll = (seed >> 16) % 100;
    if (roll < 30) {
      ++stats.dropped;
      continue;
    }
    const auto delay = roll < 45 ? 35ms : 1ms;  // 35 ms: later than the first two timeouts
    if (roll < 45) ++stats.delayed;
    spawn([](udp_socket& s, std::uint32_t id, socket_address to, clock::duration d) -> task<void> {
      co_await sleep_for(d);
      (void)co_await s.send_to(std::as_bytes(std::span(&id, 1)), to);
    }(s, id, got->second, delay));
  }
}

TEST(udp, retries_with_back_off_get_every_reply_through_loss_and_reordering) {
  static const int requests = scaled(300);
  run(
      []() -> task<void> {
        auto pair = bind_pair();
        CO_ASSERT_OK(pair);
        auto& [server, client] = *pair;
        CO_ASSERT_OK(co_await client.connect(address_of(server)));
        lossy_peer_stats peer;
        spawn(lossy_echo(server, requests, peer));
        int answered = 0, retries = 0, stale = 0;
        for (std::uint32_t id = 0; id < static_cast<std::uint32_t>(requests); ++id) {
          bool done = false;
          for (clock::duration wait = 10ms; !done && wait <= 1280ms; wait *= 2) {
            CO_ASSERT_OK(co_await client.send(std::as_bytes(std::span(&id, 1))));
            const clock::time_point until = loop_now() + wait;
            for (;;) {
              std::uint32_t reply = 0;
              auto n = co_await with_deadline(client.receive(std::as_writable_bytes(std::span(&reply, 1))), until);
              if (!n && n.error() == errc::timed_out) break;
              CO_ASSERT_OK(n);
              CO_ASSERT_TRUE(reply <= id);
              if (reply == id) {
                done = true;
                break;
              }
              ++stale;  // a late reply to an earlier request: ignored
            }
            if (!done) ++retries;
          }
          CO_ASSERT_TRUE(done);
          ++answered;
        }
        const std::uint32_t bye = static_cast<std::uint32_t>(requests);
        CO_ASSERT_OK(co_await client.send(std::as_bytes(std::span(&bye, 1))));
        EXPECT_EQ(answered, requests);
        EXPECT_GT(peer.dropped, 0);
        EXPECT_GT(retries, 0);
        EXPECT_GT(stale, 0) << "reordering was never exercised";
        co_await sleep_for(100ms);  // the last delayed replies go out before the sockets close
      }(),
      paused());
}

}  // namespace
}  // namespace cogwheel

namespace cogwheel {
namespace {

using namespace io_test;

TEST(udp, closing_a_socket_cancels_its_receive_in_flight_at_once) {
  run([]() -> task<void> {
    auto pair = bind_pair();
    CO_ASSERT_OK(pair);
    std::optional<result<std::size_t>> outcome;
    std::uint64_t resumed_at = 0;
    auto receiver = [&]() -> task<void> {
      std::array<std::byte, 64> buf;
      outcome = co_await pair->a.receive(buf);
      resumed_at = this_core_metrics().iterations;
    };
    auto closer = [&]() -> task<void> {
      co_await sleep_for(2ms);
      const std::uint64_t closed_at = this_core_metrics().iterations;
      pair->a.close();
      co_await yield();
      co_await yield();
      EXPECT_LE(resumed_at - closed_at, 1u);
    };
    (void)co_await with_timeout(together(receiver(), closer()), 5s);
    CO_ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->error(), errc::operation_canceled);
  }());
}

}  // namespace
}  // namespace cogwheel
