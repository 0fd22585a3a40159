// A TLS 1.2 peer that asks to renegotiate after the handshake, again and again. The server
// refuses (SSL_OP_NO_RENEGOTIATION): OpenSSL answers each ClientHello with a warning alert,
// sealed into the stream's outgoing buffer from inside SSL_read, and goes on reading. Those
// alerts must reach the peer (a read sends what reading sealed), and a peer that sends
// ClientHellos without reading the answers must be stopped by the socket buffers, not make the
// server hold an alert for every record it sent.
//
// The client's own OpenSSL would not send a second ClientHello before the first is answered,
// so the test seals the records itself: the session's keys (TLS 1.2 PRF over the master
// secret), AES-128-GCM, a 4-byte ClientHello header as the record's plaintext (all OpenSSL
// needs to see the message type), the client's sequence numbers from 1 on (its Finished was 0).
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <array>
#include <cstring>

#include "pair.hpp"

namespace cogwheel {
namespace {

using namespace tls_test;

// Seals records of the client's write direction of a TLS 1.2 AES-128-GCM session.
class record_sealer {
 public:
  explicit record_sealer(SSL* client) {
    unsigned char master[64];
    const std::size_t master_len = SSL_SESSION_get_master_key(SSL_get_session(client), master, sizeof master);
    std::string seed = "key expansion";
    unsigned char random[32];
    SSL_get_server_random(client, random, sizeof random);
    seed.append(reinterpret_cast<char*>(random), sizeof random);
    SSL_get_client_random(client, random, sizeof random);
    seed.append(reinterpret_cast<char*>(random), sizeof random);
    EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "TLS1-PRF", nullptr);
    EVP_KDF_CTX* kctx = EVP_KDF_CTX_new(kdf);
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                           OSSL_PARAM_construct_octet_string("secret", master, master_len),
                           OSSL_PARAM_construct_octet_string("seed", seed.data(), seed.size()),
                           OSSL_PARAM_construct_end()};
    unsigned char block[40];  // client key 16, server key 16, client IV 4, server IV 4
    ok_ = EVP_KDF_derive(kctx, block, sizeof block, params) == 1;
    EVP_KDF_CTX_free(kctx);
    EVP_KDF_free(kdf);
    std::memcpy(key_.data(), block, 16);
    std::memcpy(salt_.data(), block + 32, 4);
    ctx_ = EVP_CIPHER_CTX_new();
    ok_ = ok_ && EVP_EncryptInit_ex(ctx_, EVP_aes_128_gcm(), nullptr, key_.data(), nullptr) == 1;
  }
  record_sealer(const record_sealer&) = delete;
  record_sealer& operator=(const record_sealer&) = delete;
  ~record_sealer() { EVP_CIPHER_CTX_free(ctx_); }
  bool ok() const { return ok_; }

  // Appends one sealed record of `type` holding `plain` (at most 255 bytes) to `out`.
  void seal(unsigned char type, std::span<const unsigned char> plain, std::vector<std::byte>& out) {
    unsigned char explicit_nonce[8], nonce[12], aad[13];
    for (int i = 0; i < 8; ++i) explicit_nonce[i] = static_cast<unsigned char>(seq_ >> (56 - 8 * i));
    ++seq_;
    std::memcpy(nonce, salt_.data(), 4);
    std::memcpy(nonce + 4, explicit_nonce, 8);
    std::memcpy(aad, explicit_nonce, 8);
    aad[8] = type, aad[9] = 3, aad[10] = 3, aad[11] = 0, aad[12] = static_cast<unsigned char>(plain.size());
    unsigned char sealed[255 + 16];
    int len = 0, tail = 0;
    EVP_EncryptInit_ex(ctx_, nullptr, nullptr, nullptr, nonce);  // the key stays, a fresh nonce
    EVP_EncryptUpdate(ctx_, nullptr, &len, aad, sizeof aad);
    EVP_EncryptUpdate(ctx_, sealed, &len, plain.data(), static_cast<int>(plain.size()));
    EVP_EncryptFinal_ex(ctx_, sealed + len, &tail);
    EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, 16, sealed + len + tail);
    const std::size_t body = 8 + plain.size() + 16;
    const unsigned char head[5] = {type, 3, 3, static_cast<unsigned char>(body >> 8), static_cast<unsigned char>(body)};
    auto put = [&out](const unsigned char* p, std::size_t n) {
      const auto* b = reinterpret_cast<const std::byte*>(p);
      out.insert(out.end(), b, b + n);
    };
    put(head, 5);
    put(explicit_nonce, 8);
    put(sealed, plain.size() + 16);
  }

 private:
  bool ok_ = false;
  std::array<unsigned char, 16> key_{};
  std::array<unsigned char, 4> salt_{};
  std::uint64_t seq_ = 1;  // 0 was the client's Finished
  EVP_CIPHER_CTX* ctx_ = nullptr;
};

// `n` sealed ClientHellos (a handshake header alone: type 1, length 0).
void client_hellos(record_sealer& sealer, std::size_t n, std::vector<std::byte>& out) {
  static constexpr unsigned char hello[4] = {1, 0, 0, 0};
  for (std::size_t i = 0; i < n; ++i) sealer.seal(22, hello, out);
}

// A client held to TLS 1.2 with AES-128-GCM (the records record_sealer makes).
tls::context tls12_client(const cert_dir& d) {
  tls::context c = d.client();
  SSL_CTX_set_max_proto_version(c.native_handle(), TLS1_2_VERSION);
  EXPECT_EQ(SSL_CTX_set_cipher_list(c.native_handle(), "ECDHE-ECDSA-AES128-GCM-SHA256"), 1);
  return c;
}

// An encrypted warning alert: header 5, explicit nonce 8, level and description 2, tag 16.
constexpr std::size_t alert_record_bytes = 5 + 8 + 2 + 16;

TEST(tls_renegotiation, refused_client_hellos_are_answered_while_the_server_reads) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await handshake_pair(d.server(), tls12_client(d));
    CO_ASSERT_OK(p);
    CO_ASSERT_TRUE(p->client.protocol_version() == "TLSv1.2");
    record_sealer sealer(p->client.native_handle());
    CO_ASSERT_TRUE(sealer.ok());
    constexpr std::size_t hellos = 1000;
    std::vector<std::byte> wire;
    client_hellos(sealer, hellos, wire);

    // The server waits in a read (no application data will come); the client sends its
    // ClientHellos under it and reads what comes back on the raw socket.
    auto server_reads = [](tls::stream& s) -> task<result<std::size_t>> {
      std::byte buf[256];
      co_return co_await with_timeout(s.read(buf), 2s);
    };
    auto client_side = [](tcp_stream& raw, const std::vector<std::byte>& out) -> task<std::vector<std::byte>> {
      std::vector<std::byte> back;
      if (!co_await raw.write_all(out)) co_return back;
      std::byte buf[4096];
      while (back.size() < hellos * alert_record_bytes) {
        auto n = co_await with_timeout(raw.read(buf), 1s);
        if (!n || *n == 0) break;
        back.insert(back.end(), buf, buf + *n);
      }
      co_return back;
    };
    auto [read, back] = co_await when_all(server_reads(p->server), client_side(p->client.lower(), wire));
    // The server's read saw no data and no error: refusing a renegotiation keeps the connection.
    CO_ASSERT_TRUE(!read);
    EXPECT_EQ(read.error(), errc::timed_out) << read.error().message();
    // One warning alert per ClientHello, sent while the server was still reading (before the fix:
    // none, each sealed into the stream's buffer and kept there until the next write).
    EXPECT_EQ(back.size(), hellos * alert_record_bytes);
    std::size_t alerts = 0;  // records of content type alert (21) and an alert's length
    for (std::size_t off = 0; off + alert_record_bytes <= back.size(); off += alert_record_bytes)
      alerts += back[off] == std::byte{21} && back[off + 4] == std::byte{alert_record_bytes - 5};
    EXPECT_EQ(alerts, hellos);
  }(certs));
}

TEST(tls_renegotiation, a_peer_that_never_reads_the_refusals_is_held_back_by_the_socket) {
  cert_dir certs;
  SKIP_WITHOUT_CERTS(certs);
  run([](const cert_dir& d) -> task<void> {
    auto p = co_await handshake_pair(d.server(), tls12_client(d));
    CO_ASSERT_OK(p);
    record_sealer sealer(p->client.native_handle());
    CO_ASSERT_TRUE(sealer.ok());
    // Small socket buffers both ways, so that the backpressure shows early.
    const int small = 64 * 1024;
    for (int fd : {p->server.lower().native_handle(), p->client.lower().native_handle()}) {
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    }
    auto server_reads = [](tls::stream& s) -> task<result<std::size_t>> {
      std::byte buf[256];
      co_return co_await with_timeout(s.read(buf), 5s);
    };
    // Up to 16 MiB of ClientHellos (~500,000 records), never reading a byte back; stops at the
    // first batch the socket does not take within 1 s.
    auto flood = [](tcp_stream& raw, record_sealer& sealer) -> task<std::size_t> {
      std::size_t sent = 0;
      std::vector<std::byte> batch;
      while (sent < 16 * 1024 * 1024) {
        batch.clear();
        client_hellos(sealer, 1000, batch);
        std::size_t n = 0;
        auto w = co_await with_timeout(raw.write_all(batch, n), 1s);
        sent += n;
        if (!w) break;
      }
      co_return sent;
    };
    auto [read, sent] = co_await when_all(server_reads(p->server), flood(p->client.lower(), sealer));
    // The server stops taking ClientHellos once its answers back up: its read fails when more
    // than 64 KiB are left unsent past the socket buffers, or, when the flood stalled first
    // (a slow, sanitized build), it waits with less than that held. Before the fix it took all
    // 16 MiB (and held ~15 MiB of alerts for the peer) and timed out.
    CO_ASSERT_TRUE(!read);
    EXPECT_TRUE(read.error() == tls::error::protocol_error || read.error() == errc::timed_out)
        << read.error().message();
    EXPECT_LT(sent, std::size_t{4} * 1024 * 1024) << "bytes of ClientHellos the server took without being read";
  }(certs));
}

}  // namespace
}  // namespace cogwheel
