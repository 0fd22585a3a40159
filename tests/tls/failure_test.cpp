// Handshakes that must fail, and say why: certificate checks (name, expiry, issuer), IP
// literals, protocol mismatches, garbage and silence instead of a ClientHello, and handshakes
// whose frames are destroyed half way.
#include <openssl/ssl.h>

#include <string>

#include "pair.hpp"

namespace cogwheel {
namespace {

using namespace tls_test;

TEST(tls_failure, certificate_checks_name_the_reason) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto wrong_name = co_await handshake_pair(d.server(), d.client(), "other.example");
    CO_ASSERT_TRUE(!wrong_name);
    EXPECT_EQ(wrong_name.error(), tls::error::name_mismatch) << wrong_name.error().message();

    auto expired = co_await handshake_pair(d.server("expired"), d.client());
    CO_ASSERT_TRUE(!expired);
    EXPECT_EQ(expired.error(), tls::error::certificate_expired) << expired.error().message();

    auto self_signed = co_await handshake_pair(d.server("self"), d.client());
    CO_ASSERT_TRUE(!self_signed);
    EXPECT_EQ(self_signed.error(), tls::error::unknown_issuer) << self_signed.error().message();

    // The system store alone does not know the test CA.
    auto system_only = tls::context::client();
    CO_ASSERT_OK(system_only);
    auto unknown = co_await handshake_pair(d.server(), *system_only);
    CO_ASSERT_TRUE(!unknown);
    EXPECT_EQ(unknown.error(), tls::error::unknown_issuer) << unknown.error().message();
  }(certs));
}

TEST(tls_failure, the_server_learns_that_the_client_refused_its_certificate) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto conn = co_await connect_pair();
    CO_ASSERT_OK(conn);
    auto [s, c] = co_await when_all(timed(tls::stream::accept(std::move(conn->server), d.server("self")), 5s),
                                    timed(tls::stream::connect(std::move(conn->client), d.client(), "localhost"), 5s));
    CO_ASSERT_TRUE(!c);
    CO_ASSERT_TRUE(!s);
    EXPECT_EQ(s.error(), tls::error::certificate_rejected) << s.error().message();
  }(certs));
}

TEST(tls_failure, an_ip_literal_is_checked_against_the_certificates_addresses) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto by_ip = co_await handshake_pair(d.server(), d.client(), "127.0.0.1");
    CO_ASSERT_OK(by_ip);
    // No SNI was sent for the address.
    EXPECT_EQ(SSL_get_servername(by_ip->server.native_handle(), TLSEXT_NAMETYPE_host_name), nullptr);
    auto other_ip = co_await handshake_pair(d.server(), d.client(), "127.0.0.2");
    CO_ASSERT_TRUE(!other_ip);
    EXPECT_EQ(other_ip.error(), tls::error::name_mismatch) << other_ip.error().message();
    auto bracketed = co_await handshake_pair(d.server(), d.client(), "[::1]");
    CO_ASSERT_TRUE(!bracketed);
    EXPECT_EQ(bracketed.error(), tls::error::name_mismatch) << bracketed.error().message();
    // A DNS name gets SNI.
    auto by_name = co_await handshake_pair(d.server(), d.client(), "localhost");
    CO_ASSERT_OK(by_name);
    EXPECT_STREQ(SSL_get_servername(by_name->server.native_handle(), TLSEXT_NAMETYPE_host_name), "localhost");
  }(certs));
}

// A name is used whole or not at all: OpenSSL takes C strings, so "localhost\0.evil.example"
// would be sent as SNI and checked as "localhost" (a caller that vetted the name by its suffix
// is fooled). Anything that is not a host name is refused before the handshake.
TEST(tls_failure, a_name_that_is_not_a_host_name_is_refused_before_the_handshake) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    for (const std::string& name : {std::string("localhost\0.evil.example", 23), std::string("localhost\0", 10),
                                   std::string("127.0.0.1\0", 10), std::string("local host"), std::string("localhost.."),
                                   std::string(".localhost"), std::string("localhost/x"), std::string(64, 'a') + ".test"}) {
      auto conn = co_await connect_pair();
      CO_ASSERT_OK(conn);
      auto [s, c] = co_await when_all(timed(tls::stream::accept(std::move(conn->server), d.server()), 5s),
                                      timed(tls::stream::connect(std::move(conn->client), d.client(), name), 5s));
      CO_ASSERT_TRUE(!c);
      EXPECT_EQ(c.error(), errc::invalid_argument) << c.error().message();
      CO_ASSERT_TRUE(!s);  // no ClientHello came: the server saw the connection end
      EXPECT_NE(s.error(), tls::error::name_mismatch);
    }
    // The same names with nothing wrong still connect; a trailing dot is the absolute form.
    CO_ASSERT_OK(co_await handshake_pair(d.server(), d.client(), "localhost"));
    CO_ASSERT_OK(co_await handshake_pair(d.server(), d.client(), "127.0.0.1"));
  }(certs));
}

TEST(tls_failure, no_shared_version_or_cipher_says_so) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto server = d.server();
    CO_ASSERT_OK(server.set_min_version(tls::version::tls1_3));
    auto old_client = d.client();
    SSL_CTX_set_max_proto_version(old_client.native_handle(), TLS1_2_VERSION);
    auto p = co_await handshake_pair(server, old_client);
    CO_ASSERT_TRUE(!p);
    EXPECT_EQ(p.error(), tls::error::no_shared_protocol) << p.error().message();

    auto aes_server = d.server();
    CO_ASSERT_OK(aes_server.set_ciphers("", "TLS_AES_256_GCM_SHA384"));
    auto chacha_client = d.client();
    CO_ASSERT_OK(chacha_client.set_ciphers("", "TLS_CHACHA20_POLY1305_SHA256"));
    auto q = co_await handshake_pair(aes_server, chacha_client);
    CO_ASSERT_TRUE(!q);
    EXPECT_EQ(q.error(), tls::error::no_shared_protocol) << q.error().message();
    EXPECT_EQ(aes_server.set_ciphers("", "NOT_A_SUITE").error(), errc::invalid_argument);
  }(certs));
}

TEST(tls_failure, garbage_instead_of_a_client_hello_is_a_protocol_error) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    for (std::string_view junk : {std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                                  std::string_view("\x16\x03\x01\xff\xff garbage after a handshake header"),
                                  std::string_view("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09", 10)}) {
      auto conn = co_await connect_pair();
      CO_ASSERT_OK(conn);
      CO_ASSERT_OK(co_await conn->client.write_all(bytes_of(junk)));
      (void)co_await conn->client.shutdown();
      auto s = co_await with_timeout(tls::stream::accept(std::move(conn->server), d.server()), 5s);
      CO_ASSERT_TRUE(!s);
      EXPECT_TRUE(s.error() == tls::error::protocol_error || s.error() == tls::error::truncated)
          << s.error().message();
    }
  }(certs));
}

TEST(tls_failure, a_silent_clients_handshake_is_cut_at_its_deadline) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto conn = co_await connect_pair();
    CO_ASSERT_OK(conn);
    const auto start = now();
    deadline header(80ms);
    auto s = co_await with_deadline(tls::stream::accept(std::move(conn->server), d.server()), header);
    const auto took = now() - start;
    CO_ASSERT_TRUE(!s);
    EXPECT_EQ(s.error(), errc::timed_out) << s.error().message();
    EXPECT_GE(took, 80ms);
    EXPECT_LT(took, 2s);
    // The server's side is closed: the silent client reads the end.
    std::byte b[16];
    auto n = co_await with_timeout(conn->client.read(b), 5s);
    EXPECT_TRUE(!n || *n == 0);
  }(certs));
}

TEST(tls_failure, a_peer_that_hangs_up_mid_handshake_is_truncation) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    // A ClientHello's record header, then the client hangs up.
    auto conn2 = co_await connect_pair();
    CO_ASSERT_OK(conn2);
    CO_ASSERT_OK(co_await conn2->client.write_all(bytes_of(std::string_view("\x16\x03\x01\x00\x50", 5))));
    conn2->client.close();
    auto s = co_await with_timeout(tls::stream::accept(std::move(conn2->server), d.server()), 5s);
    CO_ASSERT_TRUE(!s);
    EXPECT_TRUE(s.error() == tls::error::truncated || s.error() == errc::connection_reset) << s.error().message();
  }(certs));
}

// Frames destroyed mid-handshake: a spawned accept and connect, each suspended with half a
// handshake behind it, are destroyed when run() returns. Nothing leaks (ASan) or dangles.
TEST(tls_failure, handshakes_destroyed_half_way_release_everything) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  for (int cut = 0; cut < 3; ++cut) {
    run([](const cert_dir& d, int at) -> task<void> {
      auto conn = co_await connect_pair();
      CO_ASSERT_OK(conn);
      auto accept = [](tcp_stream t, tls::context c) -> task<void> { (void)co_await tls::stream::accept(std::move(t), c); };
      auto connect = [](tcp_stream t, tls::context c) -> task<void> {
        (void)co_await tls::stream::connect(std::move(t), c, "localhost");
      };
      if (at == 0) {  // server waiting for a ClientHello
        spawn(accept(std::move(conn->server), d.server()));
      } else if (at == 1) {  // client waiting for the server's flight
        spawn(connect(std::move(conn->client), d.client()));
      } else {  // both under way: the client's Finished is in flight
        spawn(accept(std::move(conn->server), d.server()));
        spawn(connect(std::move(conn->client), d.client()));
      }
      co_await sleep_for(at == 2 ? 0ms : 10ms);
    }(certs, cut));
  }
}

}  // namespace
}  // namespace cogwheel
