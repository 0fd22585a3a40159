// The errors of cogwheel::tls, as std::error_codes of their own category ("cogwheel.tls"): what
// went wrong in TLS itself, named precisely enough to act on. Transport failures keep their
// errno (ECONNRESET, EPIPE...), timeouts stay errc::timed_out and cancellation
// errc::operation_canceled.
#pragma once

#include <system_error>

namespace cogwheel::tls {

/// A TLS failure (category tls::error_category(), name "cogwheel.tls").
enum class error {
  /// The peer's certificate has expired (or is not valid yet).
  certificate_expired = 1,
  /// The peer's chain leads to no trusted certificate authority (self-signed included).
  unknown_issuer,
  /// The peer's certificate is not for the name (or IP address) connected to.
  name_mismatch,
  /// The peer's certificate failed verification for another reason (signature, purpose...).
  certificate_invalid,
  /// The peer refused our certificate (it sent a bad_certificate / unknown_ca / expired alert).
  certificate_rejected,
  /// A client certificate is required and the client sent none.
  certificate_required,
  /// No protocol version, cipher suite, group or ALPN protocol both sides accept.
  no_shared_protocol,
  /// The peer closed the connection without close_notify: the data may have been cut short.
  truncated,
  /// The peer sent bytes that are not valid TLS (garbage, a plain HTTP request, a bad record).
  protocol_error,
  /// The peer ended the handshake with a fatal alert not listed above.
  peer_alert,
  /// A PEM certificate chain, key or CA that cannot be parsed, or a key that does not match.
  bad_certificate_or_key,
  /// A write after a write failed: the stream's record stream is broken, only close() is left.
  stream_broken,
};

/// The category of tls::error codes.
const std::error_category& error_category() noexcept;

/// Makes tls::error usable as a std::error_code.
inline std::error_code make_error_code(error e) noexcept { return {static_cast<int>(e), error_category()}; }

}  // namespace cogwheel::tls

/// tls::error converts to std::error_code implicitly.
template <>
struct std::is_error_code_enum<cogwheel::tls::error> : std::true_type {};
