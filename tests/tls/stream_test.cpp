// tls::stream between two cogwheel endpoints over loopback: data both ways with every byte
// checked, close_notify against truncation, ALPN, resumption, certificate reload, client
// certificates, and the one-read-one-write rule.
#include <cogwheel/tls/stream.hpp>  // first: the header compiles on its own

#include "pair.hpp"

namespace cogwheel {
namespace {

using namespace tls_test;

TEST(tls_stream, carries_a_megabyte_each_way_at_once_with_every_byte_in_place) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await handshake_pair(d.server(), d.client());
    CO_ASSERT_OK(p);
    EXPECT_EQ(p->client.protocol_version(), "TLSv1.3");
    const std::size_t size = scaled<std::size_t>(1 << 20, 64 << 10);
    const auto data = pattern_bytes(size);
    std::vector<std::byte> at_server(size), at_client(size);
    auto [w1, w2, r1, r2] = co_await when_all(
        p->client.write_all(data), p->server.write_all(data),
        read_exactly(p->server, at_server), read_exactly(p->client, at_client));
    CO_ASSERT_OK(w1);
    CO_ASSERT_OK(w2);
    CO_ASSERT_OK(r1);
    CO_ASSERT_OK(r2);
    EXPECT_EQ(*r1, size);
    EXPECT_EQ(*r2, size);
    EXPECT_EQ(first_wrong(at_server, 0), -1);
    EXPECT_EQ(first_wrong(at_client, 0), -1);
  }(certs));
}

TEST(tls_stream, shutdown_sends_close_notify_and_the_peer_reads_zero) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await handshake_pair(d.server(), d.client());
    CO_ASSERT_OK(p);
    CO_ASSERT_OK(co_await p->server.write_all(bytes_of("bye")));
    CO_ASSERT_OK(co_await p->server.shutdown());
    auto got = co_await with_timeout(read_to_end(p->client), 5s);
    CO_ASSERT_OK(got);
    EXPECT_EQ(*got, "bye");
    // The other direction still works after one side's close_notify.
    CO_ASSERT_OK(co_await p->client.write_all(bytes_of("late")));
    std::byte buf[4];
    auto n = co_await with_timeout(read_exactly(p->server, buf), 5s);
    CO_ASSERT_OK(n);
    EXPECT_EQ(text_of(std::span(buf, *n)), "late");
  }(certs));
}

TEST(tls_stream, a_peer_closing_without_close_notify_is_truncation_not_end_of_stream) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await handshake_pair(d.server(), d.client());
    CO_ASSERT_OK(p);
    CO_ASSERT_OK(co_await p->server.write_all(bytes_of("partial")));
    p->server.close();  // FIN, no close_notify
    std::byte buf[64];
    auto n = co_await with_timeout(p->client.read(buf), 5s);
    CO_ASSERT_OK(n);  // what arrived before the FIN is delivered
    EXPECT_EQ(text_of(std::span(buf, *n)), "partial");
    auto end = co_await with_timeout(p->client.read(buf), 5s);
    CO_ASSERT_TRUE(!end);
    EXPECT_EQ(end.error(), tls::error::truncated) << end.error().message();
  }(certs));
}

TEST(tls_stream, alpn_picks_the_servers_first_choice_the_client_offers_or_fails_saying_so) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto server = d.server();
    CO_ASSERT_OK(server.set_alpn({"h2", "http/1.1"}));
    auto client = d.client();
    CO_ASSERT_OK(client.set_alpn({"http/1.1", "h2"}));
    auto p = co_await handshake_pair(server, client);
    CO_ASSERT_OK(p);
    EXPECT_EQ(p->client.alpn_protocol(), "h2");
    EXPECT_EQ(p->server.alpn_protocol(), "h2");

    auto other = d.client();
    CO_ASSERT_OK(other.set_alpn({"redis"}));
    auto q = co_await handshake_pair(server, other);
    CO_ASSERT_TRUE(!q);
    EXPECT_TRUE(q.error() == tls::error::no_shared_protocol || q.error() == tls::error::peer_alert)
        << q.error().message();
    EXPECT_EQ(client.set_alpn({}).error(), errc::invalid_argument);
    EXPECT_EQ(client.set_alpn({std::string(256, 'x')}).error(), errc::invalid_argument);
  }(certs));
}

TEST(tls_stream, a_second_connection_resumes_the_session_unless_resumption_is_off) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto server = d.server();
    auto client = d.client();
    for (int i = 0; i < 3; ++i) {
      auto p = co_await handshake_pair(server, client);
      CO_ASSERT_OK(p);
      EXPECT_EQ(p->client.resumed(), i > 0) << "connection " << i;
      // TLS 1.3 tickets arrive after the handshake: a read takes them in.
      CO_ASSERT_OK(co_await p->server.write_all(bytes_of("x")));
      std::byte b[1];
      CO_ASSERT_OK(co_await with_timeout(p->client.read(b), 5s));
    }
    server.set_resumption(false);
    auto p = co_await handshake_pair(server, client);
    CO_ASSERT_OK(p);
    EXPECT_FALSE(p->client.resumed());
  }(certs));
}

TEST(tls_stream, a_reloaded_certificate_is_presented_from_the_next_handshake_on) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto server = d.server();
    server.set_resumption(false);
    auto before = co_await handshake_pair(server, d.client());
    CO_ASSERT_OK(before);
    CO_ASSERT_OK(server.set_certificate(d.pem("other.pem"), d.pem("other.key")));
    auto after = co_await handshake_pair(server, d.client(), "other.example");
    CO_ASSERT_OK(after);
    EXPECT_EQ(after->client.peer_certificate(), d.pem("other.pem"));
    EXPECT_EQ(before->client.peer_certificate(), d.pem("server.pem"));
    // A key that does not match is refused and the certificate in use stays.
    EXPECT_EQ(server.set_certificate(d.pem("server.pem"), d.pem("other.key")).error(),
              tls::error::bad_certificate_or_key);
    auto still = co_await handshake_pair(server, d.client(), "other.example");
    CO_ASSERT_OK(still);
  }(certs));
}

TEST(tls_stream, a_server_requiring_client_certificates_gets_one_or_refuses_the_client) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto server = d.server();
    CO_ASSERT_OK(server.trust(d.pem("ca.pem")));
    server.set_client_certificates(tls::client_certificates::required);
    auto with_cert = d.client();
    CO_ASSERT_OK(with_cert.set_certificate(d.pem("client.pem"), d.pem("client.key")));
    auto p = co_await handshake_pair(server, with_cert);
    CO_ASSERT_OK(p);
    EXPECT_EQ(p->server.peer_certificate(), d.pem("client.pem"));

    // Without one: in TLS 1.3 the client finishes first, then learns of the refusal.
    auto conn = co_await connect_pair();
    CO_ASSERT_OK(conn);
    auto [s, c] = co_await when_all(timed(tls::stream::accept(std::move(conn->server), server), 5s),
                                    timed(tls::stream::connect(std::move(conn->client), d.client(), "localhost"), 5s));
    CO_ASSERT_TRUE(!s);
    EXPECT_EQ(s.error(), tls::error::certificate_required) << s.error().message();
    if (c) {
      std::byte b[1];
      auto r = co_await with_timeout(c->read(b), 5s);
      CO_ASSERT_TRUE(!r);
      EXPECT_TRUE(r.error() == tls::error::certificate_required || r.error() == tls::error::peer_alert)
          << r.error().message();
    }
  }(certs));
}

TEST(tls_stream, a_second_read_or_write_while_one_is_in_flight_is_refused) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await handshake_pair(d.server(), d.client());
    CO_ASSERT_OK(p);
    std::byte a[8], b[8];
    auto [first, second] = co_await when_all(timed(p->client.read(a), 50ms), p->client.read(b));
    EXPECT_EQ(first.error(), errc::timed_out);
    EXPECT_EQ(second.error(), errc::operation_in_progress);
    // Neither disturbed the stream.
    CO_ASSERT_OK(co_await p->server.write_all(bytes_of("ok")));
    auto n = co_await with_timeout(read_exactly(p->client, std::span(a, 2)), 5s);
    CO_ASSERT_OK(n);
    EXPECT_EQ(text_of(std::span(a, 2)), "ok");
  }(certs));
}

TEST(tls_stream, close_cuts_a_read_in_flight_and_later_calls_fail_cleanly) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await handshake_pair(d.server(), d.client());
    CO_ASSERT_OK(p);
    std::byte buf[8];
    auto closer = [](tls::stream& s) -> task<void> {
      co_await sleep_for(20ms);
      s.close();
    };
    auto [r, unused] = co_await when_all(p->client.read(buf), closer(p->client));
    (void)unused;
    CO_ASSERT_TRUE(!r);
    EXPECT_EQ(r.error(), errc::operation_canceled) << r.error().message();
    EXPECT_FALSE(p->client.is_open());
    EXPECT_EQ((co_await p->client.write_all(bytes_of("x"))).error(), errc::bad_file_descriptor);
    tls::stream moved = std::move(p->server);
    auto gone = co_await with_timeout(moved.read(buf), 5s);  // our close reached the server
    EXPECT_FALSE(gone);
  }(certs));
}

TEST(tls_stream, a_stream_destroyed_while_its_read_is_in_flight_leaves_the_read_to_finish) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await handshake_pair(d.server(), d.client());
    CO_ASSERT_OK(p);
    auto owner = std::make_unique<tls::stream>(std::move(p->client));
    std::byte buf[8];
    auto killer = [](std::unique_ptr<tls::stream>& s) -> task<void> {
      co_await sleep_for(10ms);
      s.reset();
    };
    auto [r, unused] = co_await when_all(owner->read(buf), killer(owner));
    (void)unused;
    EXPECT_EQ(r.error(), errc::operation_canceled);
  }(certs));
}

}  // namespace
}  // namespace cogwheel
