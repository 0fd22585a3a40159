// Session resumption (server ticket keys shared by the cores and rotated; the client's session
// per server name), the ex_data slots that lead OpenSSL's callbacks back to our state, and
// SSLKEYLOGFILE.
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "context_state.hpp"

namespace cogwheel::tls::detail {

namespace {

int context_index() noexcept {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

void fill_random(ticket_key& k) noexcept {
  RAND_bytes(k.name.data(), static_cast<int>(k.name.size()));
  RAND_bytes(k.aes.data(), static_cast<int>(k.aes.size()));
  RAND_bytes(k.hmac.data(), static_cast<int>(k.hmac.size()));
}

// Under ticket_mutex: retires the current key once it has sealed tickets for a whole period.
void rotate_if_due(context_state& s) noexcept {
  const auto now = std::chrono::steady_clock::now();
  if (now - s.rotated_at < s.rotation) return;
  s.previous = s.current;
  s.has_previous = true;
  fill_random(s.current);
  s.rotated_at = now;
}

int set_keys(const ticket_key& k, unsigned char* iv, EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int enc) noexcept {
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, const_cast<unsigned char*>(k.hmac.data()), k.hmac.size()),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end(),
  };
  if (EVP_MAC_CTX_set_params(mac, params) != 1) return -1;
  const int ok = enc != 0 ? EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, k.aes.data(), iv)
                          : EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, k.aes.data(), iv);
  return ok == 1 ? 1 : -1;
}

// OpenSSL's ticket callback: seal with the current key; open with the current or the previous
// one, answering 2 (renew) so that the client always gets a fresh ticket (a TLS 1.3 client
// offers each ticket once; with 1 OpenSSL sends none after a resumption); 0 for an unknown key
// (a full handshake).
int on_ticket(SSL* ssl, unsigned char key_name[16], unsigned char* iv, EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac,
              int enc) {
  context_state* s = state_of(SSL_get_SSL_CTX(ssl));
  if (s == nullptr) return -1;
  std::lock_guard lock(s->ticket_mutex);
  rotate_if_due(*s);
  if (enc != 0) {
    if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(EVP_aes_256_cbc())) != 1) return -1;
    std::memcpy(key_name, s->current.name.data(), s->current.name.size());
    return set_keys(s->current, iv, cipher, mac, 1);
  }
  if (std::memcmp(key_name, s->current.name.data(), 16) == 0)
    return set_keys(s->current, iv, cipher, mac, 0) == 1 ? 2 : -1;
  if (s->has_previous && std::memcmp(key_name, s->previous.name.data(), 16) == 0)
    return set_keys(s->previous, iv, cipher, mac, 0) == 1 ? 2 : -1;
  return 0;
}

constexpr std::size_t max_cached_sessions = 4096;

// Client: keeps the newest session per server name. A copy: OpenSSL marks the session it
// hands us unresumable when its connection ends without close_notify (SSL_free of an SSL not
// shut down), which must not cost the next connection its resumption.
int on_new_session(SSL* ssl, SSL_SESSION* session) {
  context_state* s = state_of(SSL_get_SSL_CTX(ssl));
  const auto* name = static_cast<const std::string*>(SSL_get_ex_data(ssl, session_name_index()));
  if (s == nullptr || name == nullptr || !s->resumption) return 0;
  SSL_SESSION* copy = SSL_SESSION_dup(session);
  if (copy == nullptr) return 0;
  std::lock_guard lock(s->session_mutex);
  auto it = s->sessions.find(*name);
  if (it != s->sessions.end()) {
    SSL_SESSION_free(it->second);
    it->second = copy;
    return 0;
  }
  if (s->sessions.size() >= max_cached_sessions) {
    SSL_SESSION_free(s->sessions.begin()->second);
    s->sessions.erase(s->sessions.begin());
  }
  s->sessions.emplace(*name, copy);
  return 0;  // OpenSSL keeps its reference to `session`
}

std::mutex keylog_mutex;
std::FILE* keylog_file = nullptr;

void on_keylog(const SSL*, const char* line) {
  std::lock_guard lock(keylog_mutex);
  if (keylog_file == nullptr) return;
  std::fputs(line, keylog_file);
  std::fputc('\n', keylog_file);
  std::fflush(keylog_file);
}

}  // namespace

context_state* state_of(const SSL_CTX* ctx) noexcept {
  return static_cast<context_state*>(SSL_CTX_get_ex_data(ctx, context_index()));
}

void attach_state(context_state* s) noexcept { SSL_CTX_set_ex_data(s->ctx, context_index(), s); }

int session_name_index() noexcept {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

void context_state::init_resumption() {
  if (server) {
    fill_random(current);
    rotated_at = std::chrono::steady_clock::now();
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, &on_ticket);
    // Tickets carry the sessions: no server-side cache to lock and to grow.
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  } else {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, &on_new_session);
  }
}

SSL_SESSION* context_state::take_session(const std::string& name) {
  if (!resumption) return nullptr;
  std::lock_guard lock(session_mutex);
  auto it = sessions.find(name);
  if (it == sessions.end()) return nullptr;
  SSL_SESSION* s = it->second;
  if (SSL_SESSION_get_protocol_version(s) < TLS1_3_VERSION) {
    SSL_SESSION_up_ref(s);  // a TLS 1.2 session resumes many times: keep it cached
    return s;
  }
  sessions.erase(it);  // a TLS 1.3 ticket is offered once; the server sends fresh ones
  return s;
}

void install_keylog(SSL_CTX* ctx) noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* path = std::getenv("SSLKEYLOGFILE");
    if (path != nullptr && *path != '\0') keylog_file = std::fopen(path, "a");
  });
  if (keylog_file != nullptr) SSL_CTX_set_keylog_callback(ctx, &on_keylog);
}

}  // namespace cogwheel::tls::detail
