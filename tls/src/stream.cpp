// tls::stream: making streams (accept, connect) and what a stream says about its session.
#include <cogwheel/tls/stream.hpp>

#include <cogwheel/io/resolve.hpp>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "context_state.hpp"
#include "stream_state.hpp"

namespace cogwheel::tls {

namespace detail {

stream_state::~stream_state() { SSL_free(ssl); }

namespace {

cogwheel::result<void> make_ssl(stream_state& s) noexcept {
  s.ssl = SSL_new(s.ctx.native_handle());
  if (s.ssl == nullptr) {
    ERR_clear_error();
    return errc::not_enough_memory;
  }
  return attach_bio(s);
}

bool is_ip_literal(const std::string& name) noexcept {
  unsigned char addr[16];
  return inet_pton(AF_INET, name.c_str(), addr) == 1 || inet_pton(AF_INET6, name.c_str(), addr) == 1;
}

// The handshake holds both directions: nothing else may run on the stream meanwhile.
task<result<void>> exclusive_handshake(stream_state& s) {
  s.reading = s.writing = true;
  auto r = co_await handshake(s);
  s.reading = s.writing = false;
  co_return r;
}

}  // namespace

}  // namespace detail

task<result<stream>> stream::accept(tcp_stream tcp, context ctx) {
  if (!ctx || !ctx.is_server() || !tcp.is_open()) co_return errc::invalid_argument;
  detail::state_ref s(new detail::stream_state(std::move(tcp), std::move(ctx)));
  auto made = detail::make_ssl(*s);
  if (!made) co_return made.error();
  SSL_set_accept_state(s->ssl);
  auto done = co_await detail::exclusive_handshake(*s);
  if (!done) co_return done.error();
  co_return stream(s.release());
}

task<result<stream>> stream::connect(tcp_stream tcp, context ctx, std::string server_name) {
  // The whole name or none: OpenSSL takes C strings, which end at a NUL.
  if (!ctx || ctx.is_server() || !tcp.is_open() || !is_valid_host_name(server_name)) co_return errc::invalid_argument;
  if (server_name.size() > 2 && server_name.front() == '[' && server_name.back() == ']')
    server_name = server_name.substr(1, server_name.size() - 2);  // "[::1]"
  detail::state_ref s(new detail::stream_state(std::move(tcp), std::move(ctx)));
  auto made = detail::make_ssl(*s);
  if (!made) co_return made.error();
  s->name = std::move(server_name);
  SSL* ssl = s->ssl;
  if (detail::is_ip_literal(s->name)) {
    // RFC 6066: no SNI for an address; the certificate must name it as an IP address.
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), s->name.c_str()) != 1) co_return errc::invalid_argument;
  } else if (SSL_set_tlsext_host_name(ssl, s->name.c_str()) != 1 || SSL_set1_host(ssl, s->name.c_str()) != 1) {
    ERR_clear_error();
    co_return errc::invalid_argument;
  }
  SSL_set_ex_data(ssl, detail::session_name_index(), &s->name);
  if (SSL_SESSION* cached = s->ctx.state()->take_session(s->name)) {
    SSL_set_session(ssl, cached);
    SSL_SESSION_free(cached);
  }
  SSL_set_connect_state(ssl);
  auto done = co_await detail::exclusive_handshake(*s);
  if (!done) co_return done.error();
  co_return stream(s.release());
}

stream& stream::operator=(stream&& o) noexcept {
  if (this != &o) {
    close();
    detail::stream_state* old = std::exchange(state_, std::exchange(o.state_, nullptr));
    if (old != nullptr && --old->refs == 0) delete old;
  }
  return *this;
}

stream::~stream() {
  close();
  if (state_ != nullptr && --state_->refs == 0) delete state_;
}

void stream::close() noexcept {
  if (state_ == nullptr || state_->closed) return;
  state_->closed = true;
  state_->tcp.close();
}

bool stream::is_open() const noexcept { return state_ != nullptr && !state_->closed; }

std::string_view stream::alpn_protocol() const noexcept {
  if (state_ == nullptr) return {};
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(state_->ssl, &p, &len);
  return {reinterpret_cast<const char*>(p), len};
}

std::string stream::peer_certificate() const {
  if (state_ == nullptr) return {};
  X509* cert = SSL_get1_peer_certificate(state_->ssl);
  if (cert == nullptr) return {};
  std::string pem;
  if (BIO* b = BIO_new(BIO_s_mem())) {
    if (PEM_write_bio_X509(b, cert) == 1) {
      char* data = nullptr;
      const long len = BIO_get_mem_data(b, &data);
      if (len > 0) pem.assign(data, static_cast<std::size_t>(len));
    }
    BIO_free(b);
  }
  X509_free(cert);
  return pem;
}

bool stream::resumed() const noexcept { return state_ != nullptr && SSL_session_reused(state_->ssl) == 1; }

std::string_view stream::protocol_version() const noexcept {
  return state_ != nullptr ? SSL_get_version(state_->ssl) : std::string_view();
}

std::string_view stream::cipher() const noexcept {
  return state_ != nullptr ? SSL_get_cipher_name(state_->ssl) : std::string_view();
}

tcp_stream& stream::lower() noexcept { return state_->tcp; }

ssl_st* stream::native_handle() const noexcept { return state_ != nullptr ? state_->ssl : nullptr; }

}  // namespace cogwheel::tls
