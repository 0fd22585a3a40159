// What a tls::stream and its operations in flight share: the SSL object, the tcp_stream under
// it, and the ciphertext on its way in and out. Counted, so that a stream destroyed (or moved)
// while a read or write is in flight leaves the operation a valid state to finish on.
//
// Ciphertext in: the bytes of the last tcp read, in_rest, held in a pooled buffer (or in_owned
// when the core has no buffer pool); OpenSSL takes from them through the BIO (bio.cpp) and the
// buffer goes back to the pool the moment OpenSSL has taken its last byte.
// Ciphertext out: whole records sealed by OpenSSL are appended to `out`; the writer moves `out`
// to `sending` and sends sending[sent, size). A record appended while a send is in flight
// lands in `out`, never in the buffer the kernel is reading. Both buffers come from a per-core
// free list and go back to it once everything is sent, so an idle stream holds neither.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include <cogwheel/io/tcp.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/tls/context.hpp>

namespace cogwheel::tls::detail {

struct stream_state {
  int refs = 0;  // the stream, and every operation in flight
  tcp_stream tcp;
  SSL* ssl = nullptr;
  context ctx;
  std::string name;  // client: the server name (its session cache key)

  pooled_buffer in_pooled;
  std::vector<std::byte> in_owned;
  std::span<const std::byte> in_rest;  // received, not yet taken by OpenSSL
  bool in_eof = false;                 // the tcp peer closed its side
  bool no_pools = false;               // the core has no buffer pool: read into in_owned

  std::vector<std::byte> out;      // sealed, waiting for the writer
  std::vector<std::byte> sending;  // being sent: [sent, size) still to go
  std::size_t sent = 0;

  bool reading = false;  // a read (or the handshake) is in flight
  bool writing = false;  // a write or shutdown (or the handshake) is in flight
  bool closed = false;
  std::error_code write_failed;  // the socket refused a send: the record stream is broken

  stream_state(tcp_stream t, context c) noexcept : tcp(std::move(t)), ctx(std::move(c)) {}
  stream_state(const stream_state&) = delete;
  stream_state& operator=(const stream_state&) = delete;
  ~stream_state();
};

// Holds one count of a stream_state; the last one deletes it.
class state_ref {
 public:
  explicit state_ref(stream_state* s) noexcept : s_(s) {
    if (s_ != nullptr) ++s_->refs;
  }
  state_ref(state_ref&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  state_ref(const state_ref&) = delete;
  state_ref& operator=(const state_ref&) = delete;
  state_ref& operator=(state_ref&&) = delete;
  ~state_ref() { reset(); }
  void reset() noexcept {
    if (s_ != nullptr && --s_->refs == 0) delete s_;
    s_ = nullptr;
  }
  // Gives up the count without dropping it (to a tls::stream).
  stream_state* release() noexcept { return std::exchange(s_, nullptr); }
  stream_state* get() const noexcept { return s_; }
  stream_state* operator->() const noexcept { return s_; }
  stream_state& operator*() const noexcept { return *s_; }
  explicit operator bool() const noexcept { return s_ != nullptr; }

 private:
  stream_state* s_;
};

// bio.cpp: the BIO that connects `s.ssl` to in_rest and out (set on s.ssl).
cogwheel::result<void> attach_bio(stream_state& s) noexcept;
// A buffer for `out`/`sending` from the core's free list, and back.
std::vector<std::byte> take_buffer() noexcept;
void give_back(std::vector<std::byte>& buf) noexcept;

// failure.cpp: the error_code for an SSL call that returned `ret`.
std::error_code ssl_failure(stream_state& s, int ret) noexcept;

// transfer.cpp: moving ciphertext. fill(): one tcp read into in_rest (in_eof at the end).
// flush(): sends sending, then out, until both are empty (the caller holds `writing`).
task<result<void>> fill(stream_state& s);
task<result<void>> flush(stream_state& s);
// Runs the handshake to its end, sending what it produces (accept and connect).
task<result<void>> handshake(stream_state& s);
// Records OpenSSL sealed while reading (a TLS 1.2 warning alert refusing a renegotiation), sent
// at once without waiting for the socket when nothing is queued ahead of them (no write in
// flight, no record of a cut write left). error::protocol_error when more than
// max_unsent_by_reading bytes stay unsent: a peer that keeps making the stream answer without
// reading the answers, which would otherwise be held for it without bound.
inline constexpr std::size_t max_unsent_by_reading = 64 * 1024;
result<void> send_what_reading_sealed(stream_state& s) noexcept;

}  // namespace cogwheel::tls::detail
