// A TLS client and server over loopback, handshaken with each other; and a relay between them
// (raw sockets the test reads and writes) for cutting, dribbling and inspecting ciphertext.
#pragma once

#include "support.hpp"

namespace cogwheel::tls_test {

struct tls_pair {
  tls::stream client;
  tls::stream server;
};

// Both handshakes at once over a fresh loopback connection (each bounded by 5 s). On a
// failure, the error of the side that failed first (the client's when both did).
inline task<result<tls_pair>> handshake_pair(tls::context server_ctx, tls::context client_ctx,
                                             std::string name = "localhost") {
  auto p = co_await connect_pair();
  if (!p) co_return p.error();
  auto [s, c] = co_await when_all(timed(tls::stream::accept(std::move(p->server), server_ctx), 5s),
                                  timed(tls::stream::connect(std::move(p->client), client_ctx, name), 5s));
  if (!c) co_return c.error();
  if (!s) co_return s.error();
  co_return tls_pair{std::move(*c), std::move(*s)};
}

// The two raw ends a relay holds: `to_server` is connected to the TLS server's socket,
// `to_client` to the TLS client's.
struct relay_ends {
  tcp_stream to_server;
  tcp_stream to_client;
};

// Copies from -> to in chunks of at most `chunk` bytes (a yield between chunks) until `stop`
// is set or either side ends.
inline task<void> pump(tcp_stream& from, tcp_stream& to, const bool& stop, std::size_t chunk) {
  std::vector<std::byte> buf(16384);
  while (!stop) {
    auto n = co_await with_timeout(from.read(buf), 5ms);
    if (!n) {
      if (n.error() == errc::timed_out) continue;
      co_return;
    }
    if (*n == 0) co_return;
    for (std::size_t off = 0; off < *n; off += chunk) {
      auto w = co_await to.write_all(std::span(buf).subspan(off, std::min(chunk, *n - off)));
      if (!w) co_return;
      if (chunk < *n) co_await sleep_for(0ms);
    }
  }
}

struct relayed_pair {
  tls::stream client;
  tls::stream server;
  relay_ends relay;
};

// A client and server that handshake through a relay forwarding `chunk` bytes at a time; the
// relay stops forwarding once both handshakes are done (the server should not send session
// tickets, or they may be left unforwarded: set_resumption(false)).
inline task<result<relayed_pair>> relayed_handshake(tls::context server_ctx, tls::context client_ctx,
                                                    std::size_t chunk = 16384) {
  auto to_server = co_await connect_pair();
  if (!to_server) co_return to_server.error();
  auto to_client = co_await connect_pair();
  if (!to_client) co_return to_client.error();
  relay_ends relay{std::move(to_server->client), std::move(to_client->server)};
  bool stop = false;
  int done = 0;
  auto side = [&](auto op) -> task<typename decltype(op)::value_type> {
    auto r = co_await with_timeout(std::move(op), 10s);
    if (++done == 2) stop = true;
    co_return r;
  };
  auto [s, c, a, b] = co_await when_all(
      side(tls::stream::accept(std::move(to_server->server), server_ctx)),
      side(tls::stream::connect(std::move(to_client->client), client_ctx, "localhost")),
      pump(relay.to_server, relay.to_client, stop, chunk), pump(relay.to_client, relay.to_server, stop, chunk));
  (void)a;
  (void)b;
  if (!c) co_return c.error();
  if (!s) co_return s.error();
  co_return relayed_pair{std::move(*c), std::move(*s), std::move(relay)};
}

// Reads what `from` has within `quiet` of silence (ciphertext in flight on loopback).
inline task<std::vector<std::byte>> drain(tcp_stream& from, std::chrono::milliseconds quiet = 50ms) {
  std::vector<std::byte> got;
  std::vector<std::byte> buf(65536);
  for (;;) {
    auto n = co_await with_timeout(from.read(buf), quiet);
    if (!n || *n == 0) co_return got;
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
  }
}

}  // namespace cogwheel::tls_test
