// Moving ciphertext with the tcp_stream's own operations: fill() (one read), flush() (every
// sealed record, byte-exact across cuts) and the handshake loop built on them. A cut
// (timeout, stop, close()) shows as errc::operation_canceled from the tcp operation and
// leaves the buffers consistent: in_rest untouched, `sent` counting exactly what left.
#include <openssl/err.h>
#include <sys/socket.h>

#include <cerrno>

#include <cogwheel/tls/error.hpp>

#include "stream_state.hpp"

namespace cogwheel::tls::detail {

namespace {

// Reads are buffered per stream only when the core has no buffer pool (or it ran dry).
constexpr std::size_t owned_read_size = 16 * 1024 + 256;

}  // namespace

task<result<void>> fill(stream_state& s) {
  if (s.closed) co_return errc::operation_canceled;
  if (!s.no_pools) {
    auto got = co_await s.tcp.read_pooled();
    if (got) {
      if (got->empty()) {
        s.in_eof = true;
      } else {
        s.in_rest = got->bytes();
        s.in_pooled = std::move(*got);
      }
      co_return result<void>{};
    }
    if (got.error() == errc::not_supported)
      s.no_pools = true;
    else if (got.error() != errc::no_buffer_space)
      co_return got.error();
    // Every buffer of the pool is held (or there is no pool): this once, a buffer of our own.
  }
  s.in_owned.resize(owned_read_size);
  auto n = co_await s.tcp.read(s.in_owned);
  if (!n || *n == 0) {
    s.in_owned = {};
    if (!n) co_return n.error();
    s.in_eof = true;
    co_return result<void>{};
  }
  s.in_rest = std::span<const std::byte>(s.in_owned.data(), *n);
  co_return result<void>{};
}

task<result<void>> flush(stream_state& s) {
  for (;;) {
    if (s.sent == s.sending.size()) {
      if (s.out.empty()) {
        give_back(s.sending);
        give_back(s.out);
        s.sent = 0;
        co_return result<void>{};
      }
      s.sending.clear();
      std::swap(s.sending, s.out);
      s.sent = 0;
    }
    if (s.closed) co_return errc::operation_canceled;
    std::size_t n = 0;
    auto r = co_await s.tcp.write_all(std::span<const std::byte>(s.sending).subspan(s.sent), n);
    s.sent += n;
    if (!r) {
      // A cut leaves the rest queued; a socket error breaks the record stream for good.
      if (r.error() != errc::operation_canceled && r.error() != errc::timed_out) s.write_failed = r.error();
      co_return r.error();
    }
  }
}

result<void> send_what_reading_sealed(stream_state& s) noexcept {
  if (s.out.empty()) return {};
  // A write in flight, or records a cut write left, go first: `out` is sent after them by the
  // next flush. A broken record stream sends nothing more.
  if (!s.writing && !s.closed && !s.write_failed && s.sent == s.sending.size()) {
    const ssize_t k = ::send(s.tcp.native_handle(), s.out.data(), s.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k > 0) {
      s.out.erase(s.out.begin(), s.out.begin() + k);
      if (s.out.empty()) give_back(s.out);  // an idle stream holds no buffer
    } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      s.write_failed = std::error_code(errno, std::system_category());
    }
  }
  // Only a peer that does not read lets this pile up: one read's records (a pooled buffer of
  // ClientHellos, 33 B each) seal fewer bytes of alerts (31 B each) than the read brought.
  if (s.out.size() > max_unsent_by_reading) return make_error_code(error::protocol_error);
  return {};
}

task<result<void>> handshake(stream_state& s) {
  for (;;) {
    ERR_clear_error();
    const int r = SSL_do_handshake(s.ssl);
    if (r == 1) co_return co_await flush(s);
    if (SSL_get_error(s.ssl, r) != SSL_ERROR_WANT_READ) {
      const std::error_code ec = ssl_failure(s, r);
      // Tell the peer why (the alert OpenSSL sealed), without waiting for its socket: a send
      // that would block is skipped.
      if (!s.closed && s.sent == s.sending.size() && !s.out.empty())
        (void)::send(s.tcp.native_handle(), s.out.data(), s.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      co_return ec;
    }
    if (!s.out.empty()) {
      auto sent = co_await flush(s);
      if (!sent) co_return sent.error();
    }
    auto got = co_await fill(s);
    if (!got) co_return got.error();
  }
}

}  // namespace cogwheel::tls::detail
