// tls::stream: TLS over a tcp_stream, with every byte of ciphertext moved by the tcp_stream's
// own operations (OpenSSL only encrypts and decrypts, between our buffers: tls/src/bio.cpp).
// So every operation composes with with_timeout / with_deadline, deadlines that flow, stop
// requests and close() exactly as tcp_stream's do:
//
//  - A read cut short (timeout, stop, close()) loses nothing: a record half received stays
//    buffered in the session and the next read completes it; decrypted bytes are returned as
//    soon as there are any, never held back.
//  - A write encrypts whole records, at most 16 KiB of plaintext each, and sends them. When it
//    is cut short, what it reports (write(): the count returned; write_all(buf, written):
//    `written`) is the plaintext now sealed into records. Records not yet fully sent stay
//    queued in the stream, byte-exact, and the next write or shutdown() sends their rest first:
//    the peer never sees a broken, reordered or duplicated record. A write that fails with an
//    error from the socket (EPIPE, ECONNRESET...) leaves the stream broken: later writes fail
//    with error::stream_broken.
//  - One read and one write may be in flight at once (a second of the same kind fails with
//    errc::operation_in_progress). What OpenSSL seals while reading (a TLS 1.2 alert refusing
//    a renegotiation) is sent by the read at once, without waiting for the socket, unless a
//    write is in flight or left records queued: then it goes out behind them, with that write
//    or the next write or shutdown() (a TLS 1.3 KeyUpdate response is sealed by the next write
//    itself). A read fails with error::protocol_error when more than 64 KiB of such records
//    stay unsent: a peer that keeps making the stream answer without reading the answers.
//  - A peer that closes without close_notify is error::truncated, never a clean 0.
//
// An idle stream holds no ciphertext buffer: reads take the bytes from the core's shared
// buffer pool (tcp_stream::read_pooled()) only when they arrive, OpenSSL frees its record
// buffers between records (SSL_MODE_RELEASE_BUFFERS), and sealed records sit in a buffer only
// until they are sent. A stream belongs to the core it is used on.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include <cogwheel/io/tcp.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/tls/context.hpp>
#include <cogwheel/tls/error.hpp>

struct ssl_st;

namespace cogwheel::tls {

namespace detail {
struct stream_state;  // tls/src/stream_state.hpp
}

/// A TLS connection over a tcp_stream; see the file comment.
class stream {
 public:
  /// An empty stream (not open).
  stream() noexcept = default;
  /// Takes `o`'s connection (a pointer to its state, which lives on the heap); `o`
  /// is left empty.
  stream(stream&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
  /// Closes this stream's connection as the destructor does, then takes `o`'s.
  stream& operator=(stream&& o) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  /// Closes the connection (no close_notify: call shutdown() first for a clean end).
  ~stream();

  /// The server side of a handshake on an accepted connection, with a server context.
  /// Failures: tls::error values, the socket's errno, errc::timed_out under with_timeout; the
  /// connection is closed on every failure. Bound it with with_timeout (a silent client is
  /// otherwise waited for as long as the socket lives).
  static task<result<stream>> accept(tcp_stream tcp, context ctx);
  /// The client side, with a client context: sends `server_name` as SNI and checks that the
  /// server's certificate is for it. An IP literal ("127.0.0.1", "::1") is checked against the
  /// certificate's IP addresses and sends no SNI. errc::invalid_argument, before anything is
  /// sent, for a name that is not a host name (is_valid_host_name(): empty, with a NUL, a
  /// space, an empty label...).
  static task<result<stream>> connect(tcp_stream tcp, context ctx, std::string server_name);

  /// Reads decrypted bytes into `buf`: how many (at least 1), or 0 once the peer's
  /// close_notify arrived. errc::invalid_argument for an empty buffer.
  task<result<std::size_t>> read(std::span<std::byte> buf);
  /// Seals a prefix of `buf` (up to 64 KiB) into records and sends them: the plaintext bytes
  /// sealed. Cut short after sealing some, it returns that count (their records go out with
  /// the next write or shutdown()).
  task<result<std::size_t>> write(std::span<const std::byte> buf);
  /// Writes every byte of `buf`.
  task<result<void>> write_all(std::span<const std::byte> buf);
  /// The same, and `written` counts the plaintext bytes sealed into records whatever the
  /// outcome: after with_timeout(s.write_all(buf, n), d) returns timed_out, exactly buf[0, n)
  /// will reach the peer (the rest of their records with the next write or shutdown()).
  /// `written` must outlive the operation.
  task<result<void>> write_all(std::span<const std::byte> buf, std::size_t& written);
  /// Sends what is still queued, then close_notify, then shuts down the socket's sending side
  /// (the peer reads 0). Reading stays possible.
  task<result<void>> shutdown();

  /// Closes the socket at once (idempotent; also done by the destructor): operations in
  /// flight complete with errc::operation_canceled at the loop's next iteration.
  void close() noexcept;
  /// Whether the stream has a connection not yet closed.
  bool is_open() const noexcept;

  /// The protocol ALPN settled on, empty when none.
  std::string_view alpn_protocol() const noexcept;
  /// The peer's certificate in PEM, empty when it sent none (a client without a certificate).
  std::string peer_certificate() const;
  /// Whether the handshake resumed an earlier session.
  bool resumed() const noexcept;
  /// The negotiated version ("TLSv1.3") and cipher suite ("TLS_AES_128_GCM_SHA256").
  std::string_view protocol_version() const noexcept;
  /// The negotiated cipher suite's name.
  std::string_view cipher() const noexcept;
  /// The underlying tcp_stream (socket options, addresses); never read or write it directly.
  tcp_stream& lower() noexcept;
  /// The OpenSSL connection, for what this class has no method for.
  ssl_st* native_handle() const noexcept;

 private:
  explicit stream(detail::stream_state* s) noexcept : state_(s) {}
  detail::stream_state* state_ = nullptr;  // counted: in-flight operations hold it too
};

}  // namespace cogwheel::tls
