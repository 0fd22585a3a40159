// tls::stream's reads, writes and shutdown: OpenSSL calls between the tcp operations of
// transfer.cpp. Each holds a count of the state, so the stream may be moved or destroyed
// while it is in flight (close() cuts it with errc::operation_canceled).
#include <openssl/err.h>

#include <algorithm>
#include <climits>

#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/tls/stream.hpp>

#include "stream_state.hpp"

namespace cogwheel::tls {

namespace detail {

namespace {

constexpr std::size_t record_size = 16 * 1024;  // plaintext per record (TLS's maximum)
constexpr std::size_t batch_size = 4 * record_size;  // sealed before each send

// Clears `flag` when the operation ends (returns, or its frame is destroyed).
class flag_guard {
 public:
  explicit flag_guard(bool& flag) noexcept : flag_(flag) { flag_ = true; }
  flag_guard(const flag_guard&) = delete;
  flag_guard& operator=(const flag_guard&) = delete;
  ~flag_guard() { flag_ = false; }

 private:
  bool& flag_;
};

task<result<std::size_t>> read(state_ref s, std::span<std::byte> buf) {
  if (!s || s->closed) co_return errc::bad_file_descriptor;
  if (buf.empty()) co_return errc::invalid_argument;
  if (s->reading) co_return errc::operation_in_progress;
  flag_guard reading(s->reading);
  const int want = static_cast<int>(std::min<std::size_t>(buf.size(), INT_MAX));
  for (;;) {
    ERR_clear_error();
    const int n = SSL_read(s->ssl, buf.data(), want);
    if (n > 0) co_return static_cast<std::size_t>(n);
    const int kind = SSL_get_error(s->ssl, n);
    if (kind == SSL_ERROR_ZERO_RETURN) co_return std::size_t{0};  // close_notify
    if (kind != SSL_ERROR_WANT_READ) co_return ssl_failure(*s, n);
    // What reading sealed goes out now, not with the next write: a peer that sends nothing but
    // records the stream must answer (renegotiation attempts) would otherwise have every
    // answer held for it, without bound, by a connection that never writes.
    if (auto sealed = send_what_reading_sealed(*s); !sealed) co_return sealed.error();
    // Nothing decrypted yet: wait for more ciphertext. A cut here loses nothing, since what
    // OpenSSL took of a partial record stays in the session.
    auto got = co_await fill(*s);
    if (!got) co_return got.error();
  }
}

// write() (all = false) and write_all() (all = true).
task<result<std::size_t>> write(state_ref s, std::span<const std::byte> buf, std::size_t* progress, bool all) {
  if (progress != nullptr) *progress = 0;
  if (!s || s->closed) co_return errc::bad_file_descriptor;
  if (s->writing) co_return errc::operation_in_progress;
  if (s->write_failed) co_return make_error_code(error::stream_broken);
  if (co_await stop_requested()) co_return errc::operation_canceled;  // seal nothing
  flag_guard writing(s->writing);
  auto earlier = co_await flush(*s);  // the rest of records a cut write left queued
  if (!earlier) co_return earlier.error();
  std::size_t sealed = 0;
  do {
    const std::size_t end = sealed + std::min(batch_size, buf.size() - sealed);
    while (sealed < end) {
      ERR_clear_error();
      const int n = SSL_write(s->ssl, buf.data() + sealed, static_cast<int>(std::min(record_size, end - sealed)));
      if (n <= 0) {
        const std::error_code ec = ssl_failure(*s, n);
        s->write_failed = ec;
        co_return ec;
      }
      sealed += static_cast<std::size_t>(n);
      if (progress != nullptr) *progress = sealed;
    }
    auto sent = co_await flush(*s);
    if (!sent) {
      // Cut after sealing: report what was sealed (its records are queued, not lost).
      if (!all && sealed > 0 && sent.error() == errc::operation_canceled) co_return sealed;
      co_return sent.error();
    }
  } while (all && sealed < buf.size());
  co_return sealed;
}

task<result<void>> write_all(state_ref s, std::span<const std::byte> buf, std::size_t* progress) {
  auto r = co_await write(std::move(s), buf, progress, true);
  if (!r) co_return r.error();
  co_return result<void>{};
}

task<result<void>> shutdown(state_ref s) {
  if (!s || s->closed) co_return errc::bad_file_descriptor;
  if (s->writing) co_return errc::operation_in_progress;
  if (s->write_failed) co_return make_error_code(error::stream_broken);
  flag_guard writing(s->writing);
  auto earlier = co_await flush(*s);
  if (!earlier) co_return earlier.error();
  if ((SSL_get_shutdown(s->ssl) & SSL_SENT_SHUTDOWN) == 0) {
    ERR_clear_error();
    const int r = SSL_shutdown(s->ssl);  // seals close_notify; never waits for the peer's
    if (r < 0 && SSL_get_error(s->ssl, r) != SSL_ERROR_WANT_READ) co_return ssl_failure(*s, r);
    ERR_clear_error();
  }
  auto sent = co_await flush(*s);
  if (!sent) co_return sent.error();
  co_return co_await s->tcp.shutdown();
}

}  // namespace

}  // namespace detail

task<result<std::size_t>> stream::read(std::span<std::byte> buf) { return detail::read(detail::state_ref(state_), buf); }

task<result<std::size_t>> stream::write(std::span<const std::byte> buf) {
  return detail::write(detail::state_ref(state_), buf, nullptr, false);
}

task<result<void>> stream::write_all(std::span<const std::byte> buf) {
  return detail::write_all(detail::state_ref(state_), buf, nullptr);
}

task<result<void>> stream::write_all(std::span<const std::byte> buf, std::size_t& written) {
  return detail::write_all(detail::state_ref(state_), buf, &written);
}

task<result<void>> stream::shutdown() { return detail::shutdown(detail::state_ref(state_)); }

}  // namespace cogwheel::tls
