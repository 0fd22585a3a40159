#include <cogwheel/tls/error.hpp>

#include <string>

namespace cogwheel::tls {

namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cogwheel.tls"; }
  std::string message(int ev) const override {
    switch (static_cast<error>(ev)) {
      case error::certificate_expired: return "the peer's certificate has expired or is not yet valid";
      case error::unknown_issuer: return "the peer's certificate is not issued by a trusted authority (self-signed or unknown issuer)";
      case error::name_mismatch: return "the peer's certificate does not match the name connected to";
      case error::certificate_invalid: return "the peer's certificate failed verification";
      case error::certificate_rejected: return "the peer rejected our certificate";
      case error::certificate_required: return "the peer sent no certificate but one is required";
      case error::no_shared_protocol: return "no TLS version, cipher suite or ALPN protocol is shared with the peer";
      case error::truncated: return "the peer closed the connection without close_notify (truncated)";
      case error::protocol_error: return "the peer sent bytes that are not valid TLS";
      case error::peer_alert: return "the peer ended the handshake with a fatal alert";
      case error::bad_certificate_or_key: return "the certificate, key or CA (PEM) cannot be used";
      case error::stream_broken: return "an earlier write on this TLS stream failed; only close() is left";
    }
    return "unknown cogwheel.tls error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const category c;
  return c;
}

}  // namespace cogwheel::tls
