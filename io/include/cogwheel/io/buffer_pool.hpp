/// @file
/// buffer_pool: a per-core pool of equal receive buffers that the kernel picks from only when
/// data arrives (an io_uring provided buffer ring, Linux 5.19+), and pooled_buffer, the owning
/// handle a pooled read returns. A connection waiting in tcp_stream::read_pooled() holds no
/// buffer: a million idle connections share the few buffers that carry data at any moment.
///
/// Ownership: a buffer is either in the ring (the kernel may fill it) or held by exactly one
/// pooled_buffer (the kernel never touches it); dropping the handle puts it back in the ring.
/// So nothing is ever read into a buffer a user still holds. available() + the buffers held
/// (handles alive, and completions not yet handed over) == capacity(), always.
///
/// Running dry: a read whose data arrives while every buffer is held completes with
/// errc::no_buffer_space (ENOBUFS); the data stays in the socket, nothing is lost, and a later
/// read succeeds once handles have been dropped.
///
/// Lifetime and threading: a pool belongs to the core (loop thread) that created it; its reads
/// and its handles are used and dropped there. The memory lives until the pool object, every
/// handle and every read on it are gone, in any order; when the loop shuts down first the ring
/// is unregistered and later handles just let go of their memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include <cogwheel/runtime/result.hpp>

namespace cogwheel {

namespace detail {
class pool_state;  // io/src/buffer_pool.cpp
/// Puts buffer `id` back into the pool's ring (or lets it go, see above).
void give_back(pool_state& pool, std::uint16_t id) noexcept;
}  // namespace detail

/// How buffer_pool::create() sizes a pool.
struct buffer_pool_options {
  /// A power of two, 1..32768 (the kernel's ring limit); rounded up to one.
  std::uint32_t buffers = 1024;
  /// Bytes per buffer: the most one pooled read returns.
  std::uint32_t buffer_size = 4096;
};

/// Owns one buffer of a pool holding the bytes of one read, until it is dropped (destroyed,
/// reset or assigned to). Move-only; 24 bytes. An empty handle (size() == 0) from a read means
/// the peer closed its side.
class pooled_buffer {
 public:
  /// Holds no buffer.
  pooled_buffer() noexcept = default;
  /// Takes o's buffer; o holds none after.
  pooled_buffer(pooled_buffer&& o) noexcept
      : pool_(std::exchange(o.pool_, nullptr)), data_(o.data_), size_(o.size_), id_(o.id_) {}
  /// Gives back the buffer held, then takes o's.
  pooled_buffer& operator=(pooled_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      pool_ = std::exchange(o.pool_, nullptr);
      data_ = o.data_;
      size_ = o.size_;
      id_ = o.id_;
    }
    return *this;
  }
  pooled_buffer(const pooled_buffer&) = delete;             ///< Move-only: one owner per buffer.
  pooled_buffer& operator=(const pooled_buffer&) = delete;  ///< Move-only: one owner per buffer.
  /// Gives the buffer back to its pool.
  ~pooled_buffer() { reset(); }

  /// The bytes read (writable: the handle owns them until it is dropped).
  std::byte* data() const noexcept { return data_; }
  /// How many bytes were read (0 when no buffer is held).
  std::size_t size() const noexcept { return pool_ != nullptr ? size_ : 0; }
  /// Whether size() is 0 (from a read: the peer closed its side).
  bool empty() const noexcept { return size() == 0; }
  /// The bytes read, as a span.
  std::span<std::byte> bytes() const noexcept { return {data_, size()}; }
  /// Returns the buffer to its pool now.
  void reset() noexcept {
    if (pool_ != nullptr) detail::give_back(*std::exchange(pool_, nullptr), id_);
  }

 private:
  friend class detail::pool_state;
  pooled_buffer(detail::pool_state* pool, std::byte* data, std::uint32_t size, std::uint16_t id) noexcept
      : pool_(pool), data_(data), size_(size), id_(id) {}

  detail::pool_state* pool_ = nullptr;  // null iff no buffer is held
  std::byte* data_ = nullptr;
  std::uint32_t size_ = 0;
  std::uint16_t id_ = 0;
};

/// A per-core pool of equal receive buffers the kernel fills only when data arrives; see the
/// top of buffer_pool.hpp for ownership, running dry, lifetime and threading.
class buffer_pool {
 public:
  /// No pool: reads on it fail with errc::invalid_argument.
  buffer_pool() noexcept = default;
  /// Takes o's pool; o has none after.
  buffer_pool(buffer_pool&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
  /// Unregisters the pool held (as the destructor does), then takes o's.
  buffer_pool& operator=(buffer_pool&& o) noexcept;
  buffer_pool(const buffer_pool&) = delete;             ///< Move-only.
  buffer_pool& operator=(const buffer_pool&) = delete;  ///< Move-only.
  /// Unregisters the ring: reads still waiting on this pool then complete with
  /// errc::no_buffer_space when data arrives. Buffers still held stay valid until dropped.
  ~buffer_pool();

  /// Registers a new pool with the calling core's ring. Errors: errc::not_supported when the
  /// kernel has no provided buffer rings (before 5.19), errc::invalid_argument for options out
  /// of range, ENOMEM, or what io_uring_register returned. Precondition: on a loop thread.
  static cogwheel::result<buffer_pool> create(buffer_pool_options options = {});
  /// The calling core's shared pool, which tcp_stream::read_pooled() without a pool uses:
  /// created at the first call on this core with `options` (later calls ignore them), released
  /// when the core's loop shuts down. Errors as for create().
  static cogwheel::result<buffer_pool*> of_this_core(buffer_pool_options options = {});

  /// Buffers in the ring, free for the kernel to fill.
  std::size_t available() const noexcept;
  /// How many buffers the pool has (available() + those held).
  std::size_t capacity() const noexcept;
  /// Bytes per buffer: the most one pooled read returns.
  std::size_t buffer_size() const noexcept;

  /// The shared state, for the pooled read operations (not for users).
  detail::pool_state* state() const noexcept { return state_; }

 private:
  explicit buffer_pool(detail::pool_state* s) noexcept : state_(s) {}
  detail::pool_state* state_ = nullptr;  // shared with handles and reads in flight (counted)
};

}  // namespace cogwheel
