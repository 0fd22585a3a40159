#include <cogwheel/io/tcp.hpp>  // first: the header compiles on its own

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

bool ipv6_loopback_available() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const socket_address a = socket_address::ipv6_loopback(0);
  const bool ok = ::bind(fd, a.data(), a.size()) == 0;
  ::close(fd);
  return ok;
}

int int_option(const tcp_stream& s, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  if (::getsockopt(s.native_handle(), level, name, &v, &len) != 0) return -1;
  return v;
}

task<void> echo(tcp_stream s) {
  (void)s.set_nodelay(true);  // no Nagle/delayed-ACK stalls (40 ms each) in the round trips
  std::byte buf[4096];
  for (;;) {
    auto n = co_await s.read(buf);
    if (!n || *n == 0) co_return;
    if (!co_await s.write_all(std::span(buf, *n))) co_return;
  }
}

// Every socket's local address is a plain socket_address, learnt when it was bound, connected
// or accepted: an accepted stream on a wildcard listener has the IP the client reached.
TEST(tcp, an_accepted_stream_has_the_listeners_port_and_the_ip_the_client_reached) {
  run([]() -> task<void> {
    auto listener = tcp_listener::bind(socket_address::ipv4_any(0));
    CO_ASSERT_OK(listener);
    const std::uint16_t port = listener->local_address().port();
    EXPECT_NE(port, 0);
    auto client = co_await with_timeout(tcp_stream::connect(socket_address::ipv4_loopback(port)), 5s);
    CO_ASSERT_OK(client);
    auto server = co_await with_timeout(listener->accept(), 5s);
    CO_ASSERT_OK(server);
    const socket_address local = server->local_address();
    EXPECT_EQ(local.port(), listener->local_address().port());
    EXPECT_EQ(local, socket_address::ipv4_loopback(port));
    EXPECT_EQ(client->local_address(), server->peer_address().value());
    server->close();
    EXPECT_EQ(server->local_address(), socket_address{});
    listener->close();
    EXPECT_EQ(listener->local_address(), socket_address{});
  }());
}

task<void> echo_round_trip(socket_address at) {
  auto listener = tcp_listener::bind(at);
  CO_ASSERT_OK(listener);
  const socket_address addr = listener->local_address();
  EXPECT_EQ(addr.family(), at.family());
  EXPECT_NE(addr.port(), 0);

  auto client = co_await with_timeout(tcp_stream::connect(addr), 5s);
  CO_ASSERT_OK(client);
  auto server = co_await with_timeout(listener->accept(), 5s);
  CO_ASSERT_OK(server);
  EXPECT_EQ(client->peer_address().value(), addr);
  EXPECT_EQ(server->local_address(), addr);
  EXPECT_EQ(server->peer_address().value(), client->local_address());
  spawn(echo(std::move(*server)));

  const std::string big(100'000, 'x');
  for (const std::string_view msg : {std::string_view("hello"), std::string_view("a second message"),
                                     std::string_view(big)}) {
    CO_ASSERT_OK(co_await client->write_all(bytes_of(msg)));
    std::vector<std::byte> back(msg.size());
    auto n = co_await with_timeout(read_exactly(*client, back), 5s);
    CO_ASSERT_OK(n);
    CO_ASSERT_TRUE(*n == msg.size());
    EXPECT_EQ(text_of(back), msg);
  }
}

TEST(tcp, echoes_over_ipv4_loopback) { run(echo_round_trip(socket_address::ipv4_loopback(0))); }

TEST(tcp, echoes_over_ipv6_loopback) {
  if (!ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback (::1) here";
  run(echo_round_trip(socket_address::ipv6_loopback(0)));
}

TEST(tcp, read_returns_zero_when_peer_closes) {
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(co_await pair->server.write_all(bytes_of("bye")));
    pair->server.close();
    EXPECT_FALSE(pair->server.is_open());

    std::byte buf[16];
    auto n = co_await with_timeout(read_exactly(pair->client, std::span(buf, 3)), 5s);
    CO_ASSERT_OK(n);
    EXPECT_EQ(text_of(std::span(buf, *n)), "bye");
    for (int i = 0; i < 2; ++i) {  // end of stream stays end of stream
      auto eof = co_await with_timeout(pair->client.read(buf), 5s);
      CO_ASSERT_OK(eof);
      EXPECT_EQ(*eof, 0u);
    }
  }());
}

TEST(tcp, write_reports_a_partial_count_when_the_send_buffer_fills) {
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(pair->client.set_send_buffer_size(16 * 1024));
    std::vector<std::byte> data(8 << 20, std::byte{1});
    auto n = co_await with_timeout(pair->client.write(data), 5s);  // the peer reads nothing
    CO_ASSERT_OK(n);
    EXPECT_GT(*n, 0u);
    EXPECT_LT(*n, data.size());
  }());
}

TEST(tcp, write_all_delivers_every_byte_in_order_to_a_slow_reader) {
  static constexpr std::size_t total = 8 << 20;
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    // Small buffers on both sides: the kernel takes a little at a time, so write_all goes
    // through many partial sends.
    CO_ASSERT_OK(pair->client.set_send_buffer_size(32 * 1024));
    CO_ASSERT_OK(pair->server.set_receive_buffer_size(32 * 1024));

    std::vector<std::byte> data(total);
    for (std::size_t i = 0; i < total; ++i) data[i] = pattern_at(i);

    result<void> written = errc::operation_in_progress;
    auto writer = [](tcp_stream& s, std::span<const std::byte> d, result<void>& out) -> task<void> {
      out = co_await s.write_all(d);
      s.close();
    };
    std::size_t received = 0;
    std::size_t first_bad = total;
    bool eof = false;
    auto reader = [](tcp_stream& s, std::size_t& got, std::size_t& bad, bool& end) -> task<void> {
      std::vector<std::byte> buf(16 * 1024);
      for (int reads = 1;; ++reads) {
        auto n = co_await s.read(buf);
        if (!n) {
          ADD_FAILURE() << "read: " << n.error().message();
          co_return;
        }
        if (*n == 0) {
          end = true;
          co_return;
        }
        for (std::size_t i = 0; i < *n; ++i)
          if (buf[i] != pattern_at(got + i) && bad == total) bad = got + i;
        got += *n;
        if (reads % 16 == 0) co_await sleep_for(1ms);  // a slow reader
      }
    };
    auto both = co_await with_timeout(
        together(writer(pair->client, data, written), reader(pair->server, received, first_bad, eof)), 20s);
    CO_ASSERT_OK(both);
    EXPECT_TRUE(written) << written.error().message();
    EXPECT_EQ(received, total);
    EXPECT_EQ(first_bad, total) << "first wrong byte at offset " << first_bad;
    EXPECT_TRUE(eof);
  }());
}

TEST(tcp, shutdown_makes_the_peer_read_zero_and_keeps_the_other_direction) {
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(co_await pair->client.shutdown());
    std::byte buf[32];
    auto n = co_await with_timeout(pair->server.read(buf), 5s);
    CO_ASSERT_OK(n);
    EXPECT_EQ(*n, 0u);

    // Half-closed: the server can still talk to the client.
    CO_ASSERT_OK(co_await pair->server.write_all(bytes_of("still here")));
    auto m = co_await with_timeout(read_exactly(pair->client, std::span(buf, 10)), 5s);
    CO_ASSERT_OK(m);
    EXPECT_EQ(text_of(std::span(buf, *m)), "still here");
    CO_ASSERT_OK(co_await pair->server.shutdown());
    auto eof = co_await with_timeout(pair->client.read(buf), 5s);
    CO_ASSERT_OK(eof);
    EXPECT_EQ(*eof, 0u);
  }());
}

TEST(tcp, socket_options_take_effect) {
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    tcp_stream& s = pair->client;
    CO_ASSERT_OK(s.set_nodelay(true));
    EXPECT_NE(int_option(s, IPPROTO_TCP, TCP_NODELAY), 0);
    CO_ASSERT_OK(s.set_nodelay(false));
    EXPECT_EQ(int_option(s, IPPROTO_TCP, TCP_NODELAY), 0);
    CO_ASSERT_OK(s.set_keepalive(true));
    EXPECT_NE(int_option(s, SOL_SOCKET, SO_KEEPALIVE), 0);
    CO_ASSERT_OK(s.set_keepalive(false));
    EXPECT_EQ(int_option(s, SOL_SOCKET, SO_KEEPALIVE), 0);
    CO_ASSERT_OK(s.set_receive_buffer_size(64 * 1024));
    EXPECT_GE(int_option(s, SOL_SOCKET, SO_RCVBUF), 64 * 1024);  // the kernel doubles it
    CO_ASSERT_OK(s.set_send_buffer_size(64 * 1024));
    EXPECT_GE(int_option(s, SOL_SOCKET, SO_SNDBUF), 64 * 1024);

    CO_ASSERT_OK(s.set_linger(true, 3));
    linger l{};
    socklen_t len = sizeof l;
    CO_ASSERT_TRUE(::getsockopt(s.native_handle(), SOL_SOCKET, SO_LINGER, &l, &len) == 0);
    EXPECT_EQ(l.l_onoff, 1);
    EXPECT_EQ(l.l_linger, 3);
    CO_ASSERT_OK(s.set_linger(false, 0));
    CO_ASSERT_TRUE(::getsockopt(s.native_handle(), SOL_SOCKET, SO_LINGER, &l, &len) == 0);
    EXPECT_EQ(l.l_onoff, 0);

    // Options leave the connection working.
    CO_ASSERT_OK(co_await s.write_all(bytes_of("ok")));
    std::byte buf[2];
    auto n = co_await with_timeout(read_exactly(pair->server, buf), 5s);
    CO_ASSERT_OK(n);
    EXPECT_EQ(text_of(std::span(buf, *n)), "ok");
  }());
}

task<void> expect_refused(socket_address at) {
  socket_address closed;
  {
    auto l = tcp_listener::bind(at);  // a port that was just free; closed again at once
    CO_ASSERT_OK(l);
    closed = l->local_address();
  }
  auto c = co_await with_timeout(tcp_stream::connect(closed), 5s);
  CO_ASSERT_TRUE(!c);
  EXPECT_EQ(c.error(), errc::connection_refused) << c.error().message();
}

TEST(tcp, connect_to_a_closed_port_is_refused) {
  run(expect_refused(socket_address::ipv4_loopback(0)));
  if (ipv6_loopback_available()) run(expect_refused(socket_address::ipv6_loopback(0)));
}

TEST(tcp, operations_on_a_closed_stream_fail_with_ebadf) {
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    tcp_stream closed = std::move(pair->client);
    closed.close();
    closed.close();  // idempotent
    EXPECT_FALSE(closed.is_open());
    EXPECT_EQ(closed.native_handle(), -1);
    tcp_stream never_opened;

    for (tcp_stream* s : {&closed, &never_opened}) {
      std::byte buf[8]{};
      auto r = co_await s->read(buf);
      EXPECT_EQ(r.error(), errc::bad_file_descriptor);
      auto w = co_await s->write(buf);
      EXPECT_EQ(w.error(), errc::bad_file_descriptor);
      auto wa = co_await s->write_all(buf);
      EXPECT_EQ(wa.error(), errc::bad_file_descriptor);
      auto sd = co_await s->shutdown();
      EXPECT_EQ(sd.error(), errc::bad_file_descriptor);
      auto rt = co_await with_timeout(s->read(buf), 1s);  // an error, not a timeout
      EXPECT_EQ(rt.error(), errc::bad_file_descriptor);
      EXPECT_EQ(s->set_nodelay(true).error(), errc::bad_file_descriptor);
      EXPECT_EQ(s->set_linger(true, 0).error(), errc::bad_file_descriptor);
      EXPECT_EQ(s->local_address(), socket_address{});
      EXPECT_EQ(s->peer_address().error(), errc::bad_file_descriptor);
    }
    // The peer saw an orderly close.
    std::byte buf[8];
    auto eof = co_await with_timeout(pair->server.read(buf), 5s);
    CO_ASSERT_OK(eof);
    EXPECT_EQ(*eof, 0u);
  }());
}

TEST(tcp, accept_on_a_closed_listener_fails_with_ebadf) {
  run([]() -> task<void> {
    tcp_listener never_bound;
    auto a = co_await never_bound.accept();
    EXPECT_EQ(a.error(), errc::bad_file_descriptor);
    auto l = tcp_listener::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(l);
    l->close();
    EXPECT_EQ(l->native_handle(), -1);
    auto b = co_await l->accept();
    EXPECT_EQ(b.error(), errc::bad_file_descriptor);
  }());
}

TEST(tcp, multishot_accept_takes_every_connection_made_before_accept) {
  static constexpr int clients = 200;
  run([]() -> task<void> {
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(listener);
    std::vector<tcp_stream> conns;
    std::multiset<std::string> expected;
    for (int i = 0; i < clients; ++i) {  // all complete in the kernel's accept queue
      auto c = co_await with_timeout(tcp_stream::connect(listener->local_address()), 5s);
      CO_ASSERT_OK(c);
      expected.insert(c->local_address().to_string());
      conns.push_back(std::move(*c));
    }
    const auto before = this_core_metrics();
    for (int i = 0; i < clients; ++i) {
      auto s = co_await with_timeout(listener->accept(), 5s);
      CO_ASSERT_OK(s);
      auto it = expected.find(s->peer_address().value().to_string());
      CO_ASSERT_TRUE(it != expected.end());
      expected.erase(it);
    }
    EXPECT_TRUE(expected.empty());
    // One armed multishot SQE, not one submission per connection: the 200 completions arrive
    // in far fewer loop iterations than connections.
    EXPECT_LT(this_core_metrics().iterations - before.iterations, static_cast<std::uint64_t>(clients));
    auto extra = co_await with_timeout(listener->accept(), 20ms);
    EXPECT_EQ(extra.error(), errc::timed_out);
  }());
}

TEST(tcp, waiting_accepts_get_connections_as_they_arrive) {
  run([]() -> task<void> {
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(listener);
    int accepted = 0;
    auto acceptor = [](tcp_listener& l, int& count) -> task<void> {
      for (int i = 0; i < 3; ++i) {
        std::vector<task<result<tcp_stream>>> waits;
        auto one = [](tcp_listener& l) -> task<result<tcp_stream>> { co_return co_await l.accept(); };
        for (int k = 0; k < 4; ++k) waits.push_back(one(l));  // four accept() calls waiting at once
        auto got = co_await when_all(std::move(waits));
        for (auto& r : got) count += r ? 1 : 0;
      }
    };
    auto connector = [](socket_address to) -> task<void> {
      std::vector<tcp_stream> keep;
      for (int i = 0; i < 12; ++i) {
        co_await sleep_for(1ms);
        auto c = co_await tcp_stream::connect(to);
        CO_ASSERT_OK(c);
        keep.push_back(std::move(*c));
      }
      co_await sleep_for(50ms);  // keep them open until accepted
    };
    auto both = co_await with_timeout(together(acceptor(*listener, accepted), connector(listener->local_address())), 10s);
    CO_ASSERT_OK(both);
    EXPECT_EQ(accepted, 12);
  }());
}

TEST(tcp, two_listeners_share_a_port_with_reuse_port) {
  static constexpr int clients = 64;
  run([]() -> task<void> {
    const listen_options shared{.reuse_port = true};
    auto first = tcp_listener::bind(socket_address::ipv4_loopback(0), shared);
    CO_ASSERT_OK(first);
    const socket_address addr = first->local_address();
    auto second = tcp_listener::bind(addr, shared);
    CO_ASSERT_OK(second);
    EXPECT_EQ(second->local_address(), addr);
    auto exclusive = tcp_listener::bind(addr);  // without SO_REUSEPORT the port is taken
    CO_ASSERT_TRUE(!exclusive);
    EXPECT_EQ(exclusive.error(), errc::address_in_use);

    std::vector<tcp_stream> conns;
    for (int i = 0; i < clients; ++i) {
      auto c = co_await with_timeout(tcp_stream::connect(addr), 5s);
      CO_ASSERT_OK(c);
      conns.push_back(std::move(*c));
    }
    // The kernel spreads connections over both by a hash of the 4-tuple: with 64 clients the
    // chance that one listener gets none is 2^-63. Both drain at once until every connection
    // is in; then the one that took the last closes both listeners, cancelling the other's
    // waiting accept().
    int counts[2] = {0, 0};
    int total = 0;
    auto drain = [](tcp_listener& mine, tcp_listener& other, int& count, int& all) -> task<void> {
      while (all < clients) {
        auto s = co_await with_timeout(mine.accept(), 5s);
        if (!s) {
          EXPECT_EQ(s.error(), errc::operation_canceled) << s.error().message();
          co_return;
        }
        ++count;
        if (++all == clients) {
          other.close();
          mine.close();
        }
      }
    };
    CO_ASSERT_OK(co_await with_timeout(together(drain(*first, *second, counts[0], total),
                                                drain(*second, *first, counts[1], total)),
                                       10s));
    EXPECT_EQ(counts[0] + counts[1], clients);
    EXPECT_GT(counts[0], 0);
    EXPECT_GT(counts[1], 0);
  }());
}

TEST(tcp, listener_destroyed_right_after_accept_resumes_is_clean) {
  // The accepting coroutine runs inside the listener's completion handler; destroying the
  // listener there must not leave that handler touching freed memory (checked under ASan).
  run([]() -> task<void> {
    for (int i = 0; i < 20; ++i) {
      auto pair = co_await connect_pair();  // its listener dies as soon as accept() returns
      CO_ASSERT_OK(pair);
      CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("x")));
      std::byte b[1];
      auto n = co_await with_timeout(pair->server.read(b), 5s);
      CO_ASSERT_OK(n);
      EXPECT_EQ(*n, 1u);
    }
  }());
}

TEST(tcp, closing_the_listener_cancels_a_waiting_accept) {
  run([]() -> task<void> {
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(listener);
    result<tcp_stream> outcome = errc::operation_in_progress;
    bool finished = false;
    auto waiter = [](tcp_listener& l, result<tcp_stream>& out, bool& done) -> task<void> {
      out = co_await l.accept();
      done = true;
    };
    spawn(waiter(*listener, outcome, finished));
    co_await sleep_for(5ms);
    EXPECT_FALSE(finished);
    listener->close();
    for (int i = 0; i < 100 && !finished; ++i) co_await sleep_for(1ms);
    CO_ASSERT_TRUE(finished);
    EXPECT_EQ(outcome.error(), errc::operation_canceled);
  }());
}

TEST(tcp, listener_outlives_its_loop_and_accepts_on_the_next) {
  auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(listener) << listener.error().message();
  auto accept_one = [](tcp_listener& l) -> task<void> {
    auto c = co_await with_timeout(tcp_stream::connect(l.local_address()), 5s);
    CO_ASSERT_OK(c);
    auto s = co_await with_timeout(l.accept(), 5s);
    CO_ASSERT_OK(s);
    EXPECT_EQ(s->peer_address().value(), c->local_address());
  };
  run(accept_one(*listener));
  run(accept_one(*listener));  // a new loop: the accept SQE is armed on this one's ring
}

}  // namespace
}  // namespace cogwheel
