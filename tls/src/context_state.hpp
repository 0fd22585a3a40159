// What a tls::context handle shares: the SSL_CTX and what OpenSSL's callbacks need (the
// reloadable certificate, the ticket keys, the client session cache). Private to tls/src.
#pragma once

#include <openssl/ssl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <cogwheel/runtime/result.hpp>

namespace cogwheel::tls::detail {

// A parsed certificate chain and its key (immutable once made; shared by handshakes).
struct cert_key {
  X509* leaf = nullptr;
  STACK_OF(X509)* chain = nullptr;  // intermediates, may be null
  EVP_PKEY* key = nullptr;
  cert_key() = default;
  cert_key(const cert_key&) = delete;
  cert_key& operator=(const cert_key&) = delete;
  ~cert_key();
};

// Parses a PEM chain (leaf first) and key and checks that they match.
cogwheel::result<std::shared_ptr<const cert_key>> parse_cert_key(std::string_view chain_pem, std::string_view key_pem);

// One session-ticket key: a name the ticket carries, an AES-256 key and an HMAC-SHA256 key.
struct ticket_key {
  std::array<unsigned char, 16> name{};
  std::array<unsigned char, 32> aes{};
  std::array<unsigned char, 32> hmac{};
};

struct context_state {
  SSL_CTX* ctx = nullptr;
  bool server = false;

  // A certificate set by set_certificate(): handshakes use it (the cert callback) once
  // cert_generation is non-zero; until then the one loaded into ctx at creation.
  std::atomic<std::uint64_t> cert_generation{0};
  std::mutex cert_mutex;
  std::shared_ptr<const cert_key> cert;

  // Server ALPN preference list in wire format (length-prefixed names).
  std::vector<unsigned char> alpn;

  // Ticket keys: `current` seals new tickets, `previous` still opens old ones.
  std::mutex ticket_mutex;
  ticket_key current{};
  ticket_key previous{};
  bool has_previous = false;
  std::chrono::steady_clock::time_point rotated_at{};
  std::chrono::seconds rotation{3600};

  // Client: the last session per server name (a TLS 1.3 ticket is offered once, then dropped).
  std::mutex session_mutex;
  std::unordered_map<std::string, SSL_SESSION*> sessions;
  bool resumption = true;

  context_state() = default;
  context_state(const context_state&) = delete;
  context_state& operator=(const context_state&) = delete;
  ~context_state();

  // Sets up ticket keys and callbacks (server) or the session cache (client).
  void init_resumption();
  // Client: takes the cached session for `name` (null when none); the caller owns it.
  SSL_SESSION* take_session(const std::string& name);
};

// The context_state an SSL_CTX belongs to (its ex_data).
context_state* state_of(const SSL_CTX* ctx) noexcept;
// Registers `s` as the state of s->ctx.
void attach_state(context_state* s) noexcept;
// The SSL ex_data slot a client stream stores its session cache key in (a std::string*).
int session_name_index() noexcept;
// Installs the SSLKEYLOGFILE callback when that variable is set.
void install_keylog(SSL_CTX* ctx) noexcept;

}  // namespace cogwheel::tls::detail
