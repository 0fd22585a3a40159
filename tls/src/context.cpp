// tls::context: building the SSL_CTX, its settings, and the certificate reload.
#include <cogwheel/tls/context.hpp>
#include <cogwheel/tls/error.hpp>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "context_state.hpp"

namespace cogwheel::tls {

namespace detail {

cert_key::~cert_key() {
  X509_free(leaf);
  if (chain != nullptr) sk_X509_pop_free(chain, X509_free);
  EVP_PKEY_free(key);
}

namespace {

struct bio_deleter {
  void operator()(BIO* b) const noexcept { BIO_free(b); }
};
using bio_ptr = std::unique_ptr<BIO, bio_deleter>;

bio_ptr memory_bio(std::string_view pem) {
  return bio_ptr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

}  // namespace

cogwheel::result<std::shared_ptr<const cert_key>> parse_cert_key(std::string_view chain_pem, std::string_view key_pem) {
  auto ck = std::make_shared<cert_key>();
  ERR_clear_error();
  bio_ptr certs = memory_bio(chain_pem);
  bio_ptr key = memory_bio(key_pem);
  if (!certs || !key) return errc::not_enough_memory;
  ck->leaf = PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr);
  if (ck->leaf == nullptr) return make_error_code(error::bad_certificate_or_key);
  ck->chain = sk_X509_new_null();
  if (ck->chain == nullptr) return errc::not_enough_memory;
  while (X509* x = PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr)) {
    if (sk_X509_push(ck->chain, x) == 0) {
      X509_free(x);
      return errc::not_enough_memory;
    }
  }
  ck->key = PEM_read_bio_PrivateKey(key.get(), nullptr, nullptr, nullptr);
  ERR_clear_error();  // the end of the chain reads as an error
  if (ck->key == nullptr || X509_check_private_key(ck->leaf, ck->key) != 1) {
    ERR_clear_error();
    return make_error_code(error::bad_certificate_or_key);
  }
  return std::shared_ptr<const cert_key>(std::move(ck));
}

context_state::~context_state() {
  for (auto& [name, session] : sessions) SSL_SESSION_free(session);
  SSL_CTX_free(ctx);
}

namespace {

// Presents the certificate of the last set_certificate() (once there was one).
int on_certificate(SSL* ssl, void* arg) {
  auto* s = static_cast<context_state*>(arg);
  if (s->cert_generation.load(std::memory_order_acquire) == 0) return 1;
  std::shared_ptr<const cert_key> ck;
  {
    std::lock_guard lock(s->cert_mutex);
    ck = s->cert;
  }
  if (!ck) return 1;
  return SSL_use_cert_and_key(ssl, ck->leaf, ck->key, ck->chain, 1) == 1 ? 1 : 0;
}

// Server ALPN: the first of our protocols that the client offered.
int on_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen, void* arg) {
  auto* s = static_cast<context_state*>(arg);
  unsigned char* chosen = nullptr;
  unsigned char chosen_len = 0;
  if (SSL_select_next_proto(&chosen, &chosen_len, s->alpn.data(), static_cast<unsigned>(s->alpn.size()), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
  *out = chosen;
  *outlen = chosen_len;
  return SSL_TLSEXT_ERR_OK;
}

cogwheel::result<std::shared_ptr<detail::context_state>> make_state(bool server) {
  auto s = std::make_shared<detail::context_state>();
  s->server = server;
  s->ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (s->ctx == nullptr) return errc::not_enough_memory;
  SSL_CTX_set_min_proto_version(s->ctx, TLS1_2_VERSION);
  // Reads are fed from the loop's buffers and writes collected whole (tls/src/bio.cpp): no
  // partial writes, no renegotiation, and OpenSSL's own buffers freed while a stream is idle.
  SSL_CTX_set_mode(s->ctx, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_options(s->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_cert_cb(s->ctx, &on_certificate, s.get());
  detail::attach_state(s.get());
  detail::install_keylog(s->ctx);
  s->init_resumption();
  return s;
}

}  // namespace

}  // namespace detail

result<context> context::server(std::string_view cert_chain_pem, std::string_view key_pem) {
  auto ck = detail::parse_cert_key(cert_chain_pem, key_pem);
  if (!ck) return ck.error();
  auto s = detail::make_state(true);
  if (!s) return s.error();
  const detail::cert_key& c = **ck;
  if (SSL_CTX_use_cert_and_key((*s)->ctx, c.leaf, c.key, c.chain, 1) != 1) {
    ERR_clear_error();
    return make_error_code(error::bad_certificate_or_key);
  }
  return context(std::move(*s));
}

result<context> context::client() {
  auto s = detail::make_state(false);
  if (!s) return s.error();
  SSL_CTX_set_verify((*s)->ctx, SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_set_default_verify_paths((*s)->ctx) != 1) ERR_clear_error();  // no store: trust() only
  return context(std::move(*s));
}

result<void> context::trust(std::string_view ca_pem) {
  if (!state_) return errc::invalid_argument;
  X509_STORE* store = SSL_CTX_get_cert_store(state_->ctx);
  detail::bio_ptr in(BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())));
  if (!in) return errc::not_enough_memory;
  int added = 0;
  while (X509* x = PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr)) {
    const int ok = X509_STORE_add_cert(store, x);
    X509_free(x);
    if (ok != 1) break;
    ++added;
  }
  ERR_clear_error();
  if (added == 0) return make_error_code(error::bad_certificate_or_key);
  return {};
}

result<void> context::set_alpn(std::vector<std::string> protocols) {
  if (!state_ || protocols.empty()) return errc::invalid_argument;
  std::vector<unsigned char> wire;
  for (const std::string& p : protocols) {
    if (p.empty() || p.size() > 255) return errc::invalid_argument;
    wire.push_back(static_cast<unsigned char>(p.size()));
    wire.insert(wire.end(), p.begin(), p.end());
  }
  if (state_->server) {
    state_->alpn = std::move(wire);
    SSL_CTX_set_alpn_select_cb(state_->ctx, &detail::on_alpn, state_.get());
  } else if (SSL_CTX_set_alpn_protos(state_->ctx, wire.data(), static_cast<unsigned>(wire.size())) != 0) {
    return errc::not_enough_memory;
  }
  return {};
}

result<void> context::set_min_version(version v) {
  if (!state_) return errc::invalid_argument;
  SSL_CTX_set_min_proto_version(state_->ctx, v == version::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
  return {};
}

result<void> context::set_ciphers(std::string_view tls12, std::string_view tls13) {
  if (!state_) return errc::invalid_argument;
  if (!tls12.empty() && SSL_CTX_set_cipher_list(state_->ctx, std::string(tls12).c_str()) != 1) {
    ERR_clear_error();
    return errc::invalid_argument;
  }
  if (!tls13.empty() && SSL_CTX_set_ciphersuites(state_->ctx, std::string(tls13).c_str()) != 1) {
    ERR_clear_error();
    return errc::invalid_argument;
  }
  return {};
}

result<void> context::set_groups(std::string_view groups) {
  if (!state_) return errc::invalid_argument;
  if (SSL_CTX_set1_groups_list(state_->ctx, std::string(groups).c_str()) != 1) {
    ERR_clear_error();
    return errc::invalid_argument;
  }
  return {};
}

void context::set_client_certificates(client_certificates mode) {
  if (!state_ || !state_->server) return;
  int flags = SSL_VERIFY_NONE;
  if (mode == client_certificates::optional) flags = SSL_VERIFY_PEER;
  if (mode == client_certificates::required) flags = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  SSL_CTX_set_verify(state_->ctx, flags, nullptr);
}

void context::set_resumption(bool on) {
  if (!state_) return;
  state_->resumption = on;
  if (state_->server) {
    SSL_CTX_set_num_tickets(state_->ctx, on ? 2 : 0);
    if (on)
      SSL_CTX_clear_options(state_->ctx, SSL_OP_NO_TICKET);
    else
      SSL_CTX_set_options(state_->ctx, SSL_OP_NO_TICKET);
  } else {
    SSL_CTX_set_session_cache_mode(state_->ctx, on ? SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE
                                                   : SSL_SESS_CACHE_OFF);
  }
}

void context::set_ticket_rotation(std::chrono::seconds period) {
  if (!state_ || period.count() <= 0) return;
  std::lock_guard lock(state_->ticket_mutex);
  state_->rotation = period;
}

result<void> context::set_certificate(std::string_view cert_chain_pem, std::string_view key_pem) {
  if (!state_) return errc::invalid_argument;
  auto ck = detail::parse_cert_key(cert_chain_pem, key_pem);
  if (!ck) return ck.error();
  {
    std::lock_guard lock(state_->cert_mutex);
    state_->cert = std::move(*ck);
  }
  state_->cert_generation.fetch_add(1, std::memory_order_release);
  return {};
}

bool context::is_server() const noexcept { return state_ && state_->server; }

ssl_ctx_st* context::native_handle() const noexcept { return state_ ? state_->ctx : nullptr; }

}  // namespace cogwheel::tls
