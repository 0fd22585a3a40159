// The BIO between OpenSSL and a stream_state: reads take from in_rest (the last tcp read),
// writes append to out. It never blocks and never touches the socket: the tcp_stream's own
// operations move the bytes, so timeouts and close() work on them as on any tcp_stream.
#include <cstring>

#include <cogwheel/tls/error.hpp>

#include "stream_state.hpp"

namespace cogwheel::tls::detail {

namespace {

int bio_read(BIO* b, char* buf, int len) {
  auto* s = static_cast<stream_state*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  if (s->in_rest.empty()) {
    if (s->in_eof) return 0;  // end of stream: OpenSSL says unexpected EOF unless close_notify came
    BIO_set_retry_read(b);
    return -1;
  }
  const std::size_t n = std::min(s->in_rest.size(), static_cast<std::size_t>(len));
  std::memcpy(buf, s->in_rest.data(), n);
  s->in_rest = s->in_rest.subspan(n);
  if (s->in_rest.empty()) {  // all taken: the buffer goes back to the pool now
    s->in_pooled.reset();
    s->in_owned = {};
  }
  return static_cast<int>(n);
}

int bio_write(BIO* b, const char* buf, int len) {
  auto* s = static_cast<stream_state*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  if (len <= 0) return 0;
  if (s->out.capacity() == 0) s->out = take_buffer();
  const auto* p = reinterpret_cast<const std::byte*>(buf);
  s->out.insert(s->out.end(), p, p + len);
  return len;
}

long bio_ctrl(BIO* b, int cmd, long, void*) {
  auto* s = static_cast<stream_state*>(BIO_get_data(b));
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_EOF: return s->in_rest.empty() && s->in_eof ? 1 : 0;
    case BIO_CTRL_PENDING: return static_cast<long>(s->in_rest.size());
    case BIO_CTRL_WPENDING: return 0;
    default: return 0;
  }
}

int bio_create(BIO* b) {
  BIO_set_init(b, 0);
  return 1;
}

int bio_destroy(BIO*) { return 1; }

const BIO_METHOD* method() noexcept {
  static BIO_METHOD* m = [] {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cogwheel tls");
    if (made == nullptr) return made;
    BIO_meth_set_read(made, &bio_read);
    BIO_meth_set_write(made, &bio_write);
    BIO_meth_set_ctrl(made, &bio_ctrl);
    BIO_meth_set_create(made, &bio_create);
    BIO_meth_set_destroy(made, &bio_destroy);
    return made;
  }();
  return m;
}

// Per core (thread): buffers for sealed records, kept with their capacity for the next write.
constexpr std::size_t kept_buffers = 256;
constexpr std::size_t kept_capacity = 256 * 1024;
constexpr std::size_t first_capacity = 4 * (16 * 1024 + 256);  // a write's batch of records

thread_local std::vector<std::vector<std::byte>> free_buffers;

}  // namespace

cogwheel::result<void> attach_bio(stream_state& s) noexcept {
  const BIO_METHOD* m = method();
  if (m == nullptr) return errc::not_enough_memory;
  BIO* b = BIO_new(m);
  if (b == nullptr) return errc::not_enough_memory;
  BIO_set_data(b, &s);
  BIO_set_init(b, 1);
  SSL_set_bio(s.ssl, b, b);  // one reference, for both directions
  return {};
}

std::vector<std::byte> take_buffer() noexcept {
  std::vector<std::byte> buf;
  if (!free_buffers.empty()) {
    buf = std::move(free_buffers.back());
    free_buffers.pop_back();
  } else {
    buf.reserve(first_capacity);
  }
  return buf;
}

void give_back(std::vector<std::byte>& buf) noexcept {
  buf.clear();
  if (buf.capacity() == 0) return;
  if (buf.capacity() <= kept_capacity && free_buffers.size() < kept_buffers)
    free_buffers.push_back(std::move(buf));
  buf = {};
}

}  // namespace cogwheel::tls::detail
