// Turning what OpenSSL reports into an error_code that says what went wrong: which
// certificate check failed, which side refused whose certificate, a missing close_notify.
#include <openssl/err.h>
#include <openssl/x509_vfy.h>

#include <cogwheel/tls/error.hpp>

#include "stream_state.hpp"

namespace cogwheel::tls::detail {

namespace {

error of_verify_result(long v) noexcept {
  switch (v) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return error::certificate_expired;
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      return error::unknown_issuer;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
    case X509_V_ERR_EMAIL_MISMATCH:
      return error::name_mismatch;
    default:
      return error::certificate_invalid;
  }
}

std::error_code of_reason(stream_state& s, int reason) noexcept {
  switch (reason) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      return of_verify_result(SSL_get_verify_result(s.ssl));
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
      return error::truncated;
    case SSL_R_NO_SHARED_CIPHER:
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
    case SSL_R_NO_APPLICATION_PROTOCOL:
    case SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_NO_SUITABLE_KEY_SHARE:
    case SSL_R_NO_SHARED_GROUPS:
    case SSL_R_TLSV1_ALERT_INSUFFICIENT_SECURITY:
    case SSL_R_VERSION_TOO_LOW:
      return error::no_shared_protocol;
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return error::certificate_required;
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
      return error::certificate_rejected;
    default:
      // Alerts received from the peer have reasons SSL_AD_REASON_OFFSET + the alert number.
      if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256) return error::peer_alert;
      return error::protocol_error;
  }
}

}  // namespace

std::error_code ssl_failure(stream_state& s, int ret) noexcept {
  const int kind = SSL_get_error(s.ssl, ret);
  std::error_code ec;
  if (kind == SSL_ERROR_SSL) {
    const unsigned long e = ERR_peek_error();
    ec = ERR_GET_LIB(e) == ERR_LIB_SSL ? of_reason(s, ERR_GET_REASON(e)) : std::error_code(error::protocol_error);
  } else if (kind == SSL_ERROR_SYSCALL) {
    ec = s.in_eof ? error::truncated : error::protocol_error;
  } else if (kind == SSL_ERROR_ZERO_RETURN) {
    ec = error::truncated;  // the caller treats close_notify itself; here it cut a handshake
  } else {
    ec = error::protocol_error;
  }
  ERR_clear_error();
  return ec;
}

}  // namespace cogwheel::tls::detail
