// tls::context: the configuration TLS streams are made from (certificates, trusted CAs, ALPN,
// versions, session resumption), around one OpenSSL SSL_CTX.
//
// A context is a cheap reference-counted handle: copies share one configuration, and every
// core may start streams from the same context at once. Configure it (trust, set_alpn,
// set_min_version, set_ciphers, ...) before streams use it from other cores; only
// set_certificate() may be called while streams are being made anywhere (a certificate reload
// without a restart: handshakes that start afterwards present the new one).
//
// Session resumption: a server issues TLS 1.3 session tickets sealed with keys that every core
// shares (one context) and that rotate every ticket_rotation (tickets of the previous key are
// still accepted, then renewed); no server-side session cache. A client keeps the last session
// per server name and offers it on the next connect to that name. set_resumption(false) turns
// both off (every handshake is a full one).
//
// Debugging: when the environment variable SSLKEYLOGFILE names a file at the first context's
// creation, the traffic secrets of every connection are appended to it (NSS key log format,
// what Wireshark reads).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <cogwheel/runtime/result.hpp>

struct ssl_ctx_st;

namespace cogwheel::tls {

namespace detail {
struct context_state;  // tls/src/context_state.hpp
}

/// The lowest protocol version a context accepts.
enum class version {
  tls1_2,  ///< TLS 1.2 and 1.3 (the default)
  tls1_3,  ///< TLS 1.3 only
};

/// Which client certificates a server context asks for.
enum class client_certificates {
  none,      ///< asks for none (the default)
  optional,  ///< asks; verifies one against trust()ed CAs when sent, accepts none
  required,  ///< asks and fails the handshake (error::certificate_required) without a valid one
};

/// A TLS configuration shared by the streams made from it; see the file comment.
class context {
 public:
  /// An empty handle: streams cannot be made from it.
  context() noexcept = default;

  /// A server context presenting `cert_chain_pem` (the leaf first, then intermediates) with the
  /// private key `key_pem`. Errors: error::bad_certificate_or_key when either does not parse
  /// or they do not match.
  static result<context> server(std::string_view cert_chain_pem, std::string_view key_pem);
  /// A client context that verifies servers against the system's CA store
  /// (/etc/ssl/certs, Debian's ca-certificates) and checks the name given to connect().
  static result<context> client();

  /// Also trusts the CA certificates in `ca_pem` (one or more PEM blocks): a private PKI, or
  /// tests. On a server context these verify client certificates.
  result<void> trust(std::string_view ca_pem);
  /// ALPN, in order of preference (e.g. {"h2", "http/1.1"}): a client offers them, a server
  /// picks its first one the client offered and fails the handshake with
  /// error::no_shared_protocol when there is none. Errors: errc::invalid_argument for an empty
  /// list or a name that is empty or longer than 255 bytes.
  result<void> set_alpn(std::vector<std::string> protocols);
  /// The lowest version accepted (default: TLS 1.2).
  result<void> set_min_version(version v);
  /// Cipher suites in OpenSSL's syntax: `tls12` for TLS 1.2 (e.g. "ECDHE-ECDSA-AES128-GCM-SHA256"),
  /// `tls13` for TLS 1.3 (e.g. "TLS_AES_128_GCM_SHA256"); an empty string keeps the default.
  /// Errors: errc::invalid_argument when a list names no suite OpenSSL knows.
  result<void> set_ciphers(std::string_view tls12, std::string_view tls13);
  /// Key exchange groups, OpenSSL's syntax (e.g. "X25519:P-256"). Errors: errc::invalid_argument.
  result<void> set_groups(std::string_view groups);
  /// Server: which client certificates to ask for (verified against trust()ed CAs).
  void set_client_certificates(client_certificates mode);
  /// Session resumption on or off (default on); see the file comment.
  void set_resumption(bool on);
  /// How often a server's ticket key rotates (default 1 hour; a ticket lives two periods).
  void set_ticket_rotation(std::chrono::seconds period);

  /// Replaces the certificate and key presented from the next handshake on: a server's
  /// certificate (a reload without restarting), or a client's certificate for servers that ask
  /// for one. Thread-safe: may run while streams are being made on every core. Errors:
  /// error::bad_certificate_or_key; the previous certificate then stays in use.
  result<void> set_certificate(std::string_view cert_chain_pem, std::string_view key_pem);

  /// Whether this handle holds a context.
  explicit operator bool() const noexcept { return state_ != nullptr; }
  /// Whether streams from this context are servers.
  bool is_server() const noexcept;
  /// The underlying SSL_CTX, for settings this class has no method for (before sharing).
  ssl_ctx_st* native_handle() const noexcept;
  /// The shared state (for tls::stream).
  const std::shared_ptr<detail::context_state>& state() const noexcept { return state_; }

 private:
  explicit context(std::shared_ptr<detail::context_state> s) noexcept : state_(std::move(s)) {}
  std::shared_ptr<detail::context_state> state_;
};

}  // namespace cogwheel::tls
