// Timeouts in the middle of TLS: reads cut with half a record received (many times over, every
// byte checked after), a ClientHello dribbled a byte at a time, a record cut by a reset, and
// writes cut with the socket full, whose sealed records the next write completes.
#include <cogwheel/runtime/timeout.hpp>

#include "pair.hpp"

namespace cogwheel {
namespace {

using namespace tls_test;

tls::context no_tickets(tls::context c) {
  c.set_resumption(false);
  return c;
}

// A pair whose client -> server sockets hold little (16 KiB each way), so writes stall soon.
task<result<tls_pair>> small_buffered_pair(const cert_dir& d) {
  auto p = co_await handshake_pair(d.server(), d.client());
  if (!p) co_return p.error();
  if (auto r = p->client.lower().set_send_buffer_size(16384); !r) co_return r.error();
  if (auto r = p->server.lower().set_receive_buffer_size(16384); !r) co_return r.error();
  co_return p;
}

TEST(tls_timeout, reads_cut_with_half_a_record_received_lose_nothing) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await relayed_handshake(no_tickets(d.server()), d.client());
    CO_ASSERT_OK(p);
    const std::size_t size = 10000;  // one record
    const auto data = pattern_bytes(size);
    CO_ASSERT_OK(co_await p->server.write_all(data));
    const auto ciphertext = co_await drain(p->relay.to_server);
    CO_ASSERT_TRUE(ciphertext.size() > size);
    std::vector<std::byte> got(size);
    std::size_t fed = 0;
    int cuts = 0;
    // The first 40 bytes one at a time (the header, then the record's start), then in halves,
    // with a read cut by its timeout after every piece but the last.
    while (fed < ciphertext.size()) {
      const std::size_t piece = fed < 40 ? 1 : std::max<std::size_t>(1, (ciphertext.size() - fed) / 2);
      CO_ASSERT_OK(co_await p->relay.to_client.write_all(std::span(ciphertext).subspan(fed, piece)));
      fed += piece;
      if (fed == ciphertext.size()) break;
      co_await sleep_for(1ms);  // let it reach the client's socket
      auto r = co_await with_timeout(p->client.read(got), 2ms);
      CO_ASSERT_TRUE(!r);
      CO_ASSERT_TRUE(r.error() == errc::timed_out);
      ++cuts;
    }
    EXPECT_GT(cuts, 40);
    auto n = co_await with_timeout(read_exactly(p->client, got), 5s);
    CO_ASSERT_OK(n);
    EXPECT_EQ(*n, size);
    EXPECT_EQ(first_wrong(got, 0), -1);
  }(certs));
}

TEST(tls_timeout, a_client_hello_dribbled_a_byte_at_a_time_still_completes_the_handshake) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await relayed_handshake(no_tickets(d.server()), d.client(), 1);
    CO_ASSERT_OK(p);
    EXPECT_EQ(p->server.protocol_version(), "TLSv1.3");
  }(certs));
}

TEST(tls_timeout, a_record_cut_by_a_reset_is_an_error_never_data_or_end_of_stream) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await relayed_handshake(no_tickets(d.server()), d.client());
    CO_ASSERT_OK(p);
    CO_ASSERT_OK(co_await p->server.write_all(pattern_bytes(10000)));
    const auto ciphertext = co_await drain(p->relay.to_server);
    CO_ASSERT_OK(co_await p->relay.to_client.write_all(std::span(ciphertext).first(ciphertext.size() / 2)));
    CO_ASSERT_OK(p->relay.to_client.set_linger(true, 0));
    p->relay.to_client.close();  // RST
    std::byte buf[16384];
    auto r = co_await with_timeout(p->client.read(buf), 5s);
    CO_ASSERT_TRUE(!r);
    EXPECT_TRUE(r.error() == errc::connection_reset || r.error() == tls::error::truncated) << r.error().message();
  }(certs));
}

// The client writes far more than the sockets hold while the server does not read: the write
// is cut by its timeout, `written` says how much plaintext was sealed, and writing the rest
// afterwards delivers exactly the whole buffer, once, in order.
TEST(tls_timeout, a_write_cut_by_its_timeout_is_completed_byte_exact_by_the_next_write) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await small_buffered_pair(d);
    CO_ASSERT_OK(p);
    const std::size_t size = 8 << 20;
    const auto data = pattern_bytes(size);
    std::size_t written = 0;
    auto cut = co_await with_timeout(p->client.write_all(data, written), 30ms);
    CO_ASSERT_TRUE(!cut);
    EXPECT_EQ(cut.error(), errc::timed_out);
    EXPECT_GT(written, 0u);
    EXPECT_LT(written, size);
    // write() cut the same way reports what it sealed, or timed_out when it sealed nothing.
    auto some = co_await with_timeout(p->client.write(std::span(data).subspan(written)), 10ms);
    std::size_t total = written + (some ? *some : 0);
    if (!some) {
      EXPECT_EQ(some.error(), errc::timed_out);
    }

    std::vector<std::byte> got(size);
    auto rest = [&]() -> task<result<void>> {
      auto r = co_await p->client.write_all(std::span(data).subspan(total));
      if (!r) co_return r;
      co_return co_await p->client.shutdown();
    };
    auto [w, r] = co_await when_all(timed(rest(), 20s), timed(read_exactly(p->server, got), 20s));
    CO_ASSERT_OK(w);
    CO_ASSERT_OK(r);
    EXPECT_EQ(*r, size);
    EXPECT_EQ(first_wrong(got, 0), -1);
    std::byte more[1];
    auto end = co_await with_timeout(p->server.read(more), 5s);
    CO_ASSERT_OK(end);
    EXPECT_EQ(*end, 0u);  // close_notify, after exactly `size` bytes
  }(certs));
}

TEST(tls_timeout, a_shutdown_sends_the_records_a_cut_write_left_queued) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await small_buffered_pair(d);
    CO_ASSERT_OK(p);
    const auto data = pattern_bytes(4 << 20);
    std::size_t written = 0;
    auto cut = co_await with_timeout(p->client.write_all(data, written), 20ms);
    CO_ASSERT_TRUE(!cut);
    std::vector<std::byte> got(data.size());
    auto [s, r] = co_await when_all(timed(p->client.shutdown(), 20s), timed(read_exactly(p->server, got), 20s));
    CO_ASSERT_OK(s);
    CO_ASSERT_OK(r);
    EXPECT_EQ(*r, written);  // exactly what was reported sealed, then close_notify
    EXPECT_EQ(first_wrong(std::span(got).first(*r), 0), -1);
  }(certs));
}

TEST(tls_timeout, a_deadline_that_flows_bounds_the_handshake_and_the_reads_under_it) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await handshake_pair(d.server(), d.client());
    CO_ASSERT_OK(p);
    auto request = [&]() -> task<result<std::size_t>> {
      auto sent = co_await p->client.write_all(bytes_of("ping"));
      if (!sent) co_return sent.error();
      std::byte buf[4];
      co_return co_await p->client.read(buf);  // the server never answers
    };
    const auto start = now();
    auto r = co_await with_timeout(request(), 60ms);
    CO_ASSERT_TRUE(!r);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_GE(now() - start, 60ms);
    // The session is intact: the server's late answer reaches the next read.
    std::byte ping[4];
    CO_ASSERT_OK(co_await with_timeout(read_exactly(p->server, ping), 5s));
    CO_ASSERT_OK(co_await p->server.write_all(bytes_of("pong")));
    std::byte pong[4];
    auto n = co_await with_timeout(read_exactly(p->client, pong), 5s);
    CO_ASSERT_OK(n);
    EXPECT_EQ(text_of(std::span(pong, *n)), "pong");
  }(certs));
}

}  // namespace
}  // namespace cogwheel
