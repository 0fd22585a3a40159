// link: one connection's transport, plain TCP or TLS, and how it is established (by address or
// by name, then the TLS handshake). TLS is there only when the library is built with
// cogwheel::tls (COGWHEEL_REDIS_TLS, a private definition: no public header changes with it).
#pragma once

#include <cogwheel/io/tcp.hpp>
#include <cogwheel/redis/client.hpp>
#include <cogwheel/runtime/task.hpp>

#if COGWHEEL_REDIS_TLS
#include <cogwheel/tls/stream.hpp>
#endif

namespace cogwheel::redis::detail {

// Exactly one of the two is open after a successful establish(): `plain`, or `secure`, which
// then owns the socket.
struct link {
  tcp_stream plain;
#if COGWHEEL_REDIS_TLS
  tls::stream secure;
#endif

  bool is_open() const noexcept;
  // The socket's descriptor (-1 when closed): for ::shutdown(2), which stops the reader and
  // the writer without closing the descriptor under their operations.
  int socket() noexcept;
  void set_nodelay() noexcept;
  void close() noexcept;
};

// Resolves (when options.host is set) and connects, then handshakes (when options.tls is set).
// Unbounded: the caller's with_timeout bounds the whole. Cut short, nothing is left open.
// errc::not_supported for options.tls in a build without cogwheel::tls; errc::invalid_argument
// for a TLS option without a context.
task<result<link>> establish(const client_options& options);

}  // namespace cogwheel::redis::detail
