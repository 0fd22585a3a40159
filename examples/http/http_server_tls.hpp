// HTTPS for the example server (--tls-cert/--tls-key): the TLS handshake runs under the
// header timeout, as in nginx (client_header_timeout covers it), so a client that dribbles or
// withholds its ClientHello is cut when the first request's head would be.
#pragma once

#include <string>

#include <cogwheel/tls/context.hpp>

#include "http_server.hpp"

namespace http_example {

// A server context from PEM files (the chain, leaf first, and its key), ALPN http/1.1;
// resumption false: no session tickets (every handshake a full one, for benchmarks).
cogwheel::result<cogwheel::tls::context> tls_context_from_files(const std::string& cert_path,
                                                                const std::string& key_path, bool resumption = true);

// Handshakes on an accepted connection within cfg.header_timeout, then serves it (spawned,
// with what is left of the header timeout for the first request's head). A timed-out
// handshake counts as a header timeout; a failed one just closes the connection.
cogwheel::task<void> serve_tls_connection(cogwheel::tcp_stream s, cogwheel::tls::context ctx, const server_config& cfg,
                                          server_stats& stats);

}  // namespace http_example
