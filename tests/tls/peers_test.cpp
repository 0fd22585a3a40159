// Against real TLS implementations: our client with `openssl s_server`, our server with
// `openssl s_client` and `curl --cacert` (both skipped when the tool is missing). Each peer is
// a child process on a free loopback port with the test's certificates.
#include "pair.hpp"

namespace cogwheel {
namespace {

using namespace tls_test;

// Serves one connection: reads until `until` appears, answers `reply`, then close_notify.
task<result<std::string>> serve_one(tcp_listener& l, tls::context ctx, std::string until, std::string reply) {
  auto tcp = co_await with_timeout(l.accept(), 10s);
  if (!tcp) co_return tcp.error();
  auto s = co_await with_timeout(tls::stream::accept(std::move(*tcp), ctx), 10s);
  if (!s) co_return s.error();
  std::string got;
  char buf[4096];
  while (got.find(until) == std::string::npos) {
    auto n = co_await with_timeout(s->read(std::as_writable_bytes(std::span(buf))), 10s);
    if (!n) co_return n.error();
    if (*n == 0) break;
    got.append(buf, *n);
  }
  auto w = co_await s->write_all(bytes_of(reply));
  if (!w) co_return w.error();
  // A client that has its whole answer may hang up at once (curl does, on Connection: close):
  // the socket's shutdown after our close_notify then finds it gone (ENOTCONN).
  auto sd = co_await s->shutdown();
  if (!sd && sd.error() != errc::not_connected) co_return sd.error();
  co_return got;
}

// openssl s_server's command line: it prints what it receives and sends its stdin; it answers
// our close_notify with its own and, with -naccept 1, exits.
std::vector<std::string> s_server_argv(const cert_dir& certs, std::uint16_t port) {
  return {"openssl", "s_server", "-accept", "127.0.0.1:" + std::to_string(port), "-cert", certs.file("server.pem"), "-key",
          certs.file("server.key"), "-naccept", "1", "-quiet"};
}

// The harness itself: a port another process listens on (it accepts and never answers, as a
// parallel test's server may) is not taken for s_server's. There s_server cannot bind and exits;
// on a port of its own it listens, and it is this child that listens.
TEST(tls_peers, a_port_another_process_holds_is_not_taken_for_s_server) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  auto stranger = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(stranger);
  const std::uint16_t taken = stranger->local_address().port();
  const auto argv = [&](std::uint16_t port) { return s_server_argv(certs, port); };
  listening_child on_taken(argv, certs.file("taken.out"), taken);
  EXPECT_FALSE(on_taken.listening()) << on_taken.process().output();
  listening_child own(argv, certs.file("own.out"));
  ASSERT_TRUE(own.listening());
  EXPECT_NE(own.port(), taken);
}

TEST(tls_peers, our_client_talks_to_openssl_s_server) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  listening_child s_server([&](std::uint16_t port) { return s_server_argv(certs, port); }, certs.file("s_server.out"));
  ASSERT_TRUE(s_server.listening()) << "openssl s_server never listened";
  const std::uint16_t port = s_server.port();
  child& server = s_server.process();
  run([](const cert_dir& d, std::uint16_t at, child& peer) -> task<void> {
    auto tcp = co_await with_timeout(tcp_stream::connect(socket_address::ipv4_loopback(at)), 5s);
    CO_ASSERT_OK(tcp);
    auto s = co_await with_timeout(tls::stream::connect(std::move(*tcp), d.client(), "localhost"), 10s);
    CO_ASSERT_OK(s);
    EXPECT_EQ(s->protocol_version(), "TLSv1.3");
    CO_ASSERT_OK(co_await s->write_all(bytes_of("hello s_server\n")));
    peer.input("hello cogwheel\n");
    std::string got;
    char buf[256];
    while (got.find("hello cogwheel\n") == std::string::npos) {
      auto n = co_await with_timeout(s->read(std::as_writable_bytes(std::span(buf))), 10s);
      CO_ASSERT_OK(n);
      CO_ASSERT_TRUE(*n > 0);
      got.append(buf, *n);
    }
    EXPECT_EQ(got, "hello cogwheel\n");
    CO_ASSERT_OK(co_await s->shutdown());
    auto end = co_await with_timeout(s->read(std::as_writable_bytes(std::span(buf))), 10s);
    CO_ASSERT_OK(end);
    EXPECT_EQ(*end, 0u);  // its close_notify
    EXPECT_EQ(co_await exit_of(peer), 0) << peer.output();
    EXPECT_NE(peer.output().find("hello s_server"), std::string::npos) << peer.output();
  }(certs, port, server));
}

TEST(tls_peers, openssl_s_client_talks_to_our_server_and_verifies_it) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(listener);
  const std::uint16_t port = listener->local_address().port();
  child client({"openssl", "s_client", "-connect", "127.0.0.1:" + std::to_string(port), "-servername", "localhost",
                "-verify_hostname", "localhost", "-CAfile", certs.file("ca.pem"), "-verify_return_error", "-quiet"},
               certs.file("s_client.out"));
  ASSERT_TRUE(client.started());
  client.input("ping from s_client\n");
  run([](const cert_dir& d, tcp_listener& l, child& c) -> task<void> {
    auto got = co_await serve_one(l, d.server(), "\n", "pong from cogwheel\n");
    CO_ASSERT_OK(got);
    EXPECT_EQ(*got, "ping from s_client\n");
    c.close_input();
    EXPECT_EQ(co_await exit_of(c), 0) << c.output();
    EXPECT_NE(c.output().find("pong from cogwheel"), std::string::npos) << c.output();
  }(certs, *listener, client));
}

TEST(tls_peers, curl_fetches_over_https_from_our_server) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  if (!have_tool("curl")) GTEST_SKIP() << "curl is not installed";
  auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(listener);
  const std::string port = std::to_string(listener->local_address().port());
  const std::string resolve = "localhost:" + port + ":127.0.0.1";
  const std::string url = "https://localhost:" + port;
  child curl({"curl", "-sS", "--http1.1", "--cacert", certs.file("ca.pem"), "--resolve", resolve, url + "/hello"},
             certs.file("curl.out"));
  ASSERT_TRUE(curl.started());
  run([](const cert_dir& d, tcp_listener& l, child& c) -> task<void> {
    auto ctx = d.server();
    CO_ASSERT_OK(ctx.set_alpn({"http/1.1"}));
    auto got = co_await serve_one(l, ctx, "\r\n\r\n",
                                  "HTTP/1.1 200 OK\r\nContent-Length: 14\r\nConnection: close\r\n\r\nhello, curl!\r\n");
    CO_ASSERT_OK(got);
    EXPECT_EQ(got->rfind("GET /hello HTTP/1.1\r\n", 0), 0u) << *got;
    EXPECT_EQ(co_await exit_of(c), 0) << c.output();
    EXPECT_EQ(c.output(), "hello, curl!\r\n");
  }(certs, *listener, curl));
}

TEST(tls_peers, curl_refuses_our_server_when_it_does_not_trust_the_ca) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  if (!have_tool("curl")) GTEST_SKIP() << "curl is not installed";
  auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(listener);
  const std::string port = std::to_string(listener->local_address().port());
  const std::string resolve = "localhost:" + port + ":127.0.0.1";
  const std::string url = "https://localhost:" + port;
  child curl({"curl", "-sS", "--resolve", resolve, url + "/"}, certs.file("curl.out"));
  ASSERT_TRUE(curl.started());
  run([](const cert_dir& d, tcp_listener& l, child& c) -> task<void> {
    auto tcp = co_await with_timeout(l.accept(), 10s);
    CO_ASSERT_OK(tcp);
    auto s = co_await with_timeout(tls::stream::accept(std::move(*tcp), d.server()), 10s);
    CO_ASSERT_TRUE(!s);
    EXPECT_EQ(s.error(), tls::error::certificate_rejected) << s.error().message();
    EXPECT_EQ(co_await exit_of(c), 60) << c.output();  // curl: peer certificate cannot be authenticated
  }(certs, *listener, curl));
}

}  // namespace
}  // namespace cogwheel
