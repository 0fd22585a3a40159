#include <cogwheel/io/buffer_pool.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cerrno>
#include <vector>

#include <cogwheel/io/detail/pooled_recv_operation.hpp>

#include <cogwheel/runtime/detail/loop_services.hpp>

namespace cogwheel::detail {

// The shared state of one pool: the buffers' memory, given to the loop's backend as a buffer
// group (io_uring: a provided-buffer ring the kernel takes from; epoll: a free list), and
// two counts. `held_`: buffers out of the group (in handles, or in completions not yet
// handed over). `uses_`: the owning buffer_pool (until destroyed), each read from start() to
// destruction, each handle; the state deletes itself when it drops to 0, so neither the group
// nor the memory goes while anything may still name them.
//
// The group id names the group in requests: no two live states of a thread share one, even after
// one was unregistered, so a read still in flight can never take a buffer from a newer pool
// that reused its id and put it back into the wrong one.
class pool_state : private shutdown_hook {
 public:
  static result<pool_state*> create(event_loop& loop, const buffer_pool_options& o);

  event_loop* loop() const noexcept { return loop_; }
  bool registered() const noexcept { return registered_; }
  std::uint16_t group() const noexcept { return group_; }
  std::uint32_t buffer_size() const noexcept { return size_; }
  std::uint32_t capacity() const noexcept { return count_; }
  std::uint32_t available() const noexcept { return count_ - held_; }

  void use() noexcept { ++uses_; }
  void unuse() noexcept {
    assert(uses_ > 0);
    if (--uses_ == 0) delete this;
  }

  // The kernel took buffer `id` out of the ring: whoever calls this owns it (counted as held,
  // and as a use), until give_back() or until handing it to a handle with adopt().
  void take([[maybe_unused]] std::uint16_t id) noexcept {
    assert(id < count_);
    ++held_;
    if (loop_ != nullptr) count_pooled_buffers(*loop_, 1);
    use();
  }
  pooled_buffer adopt(std::uint16_t id, std::uint32_t len) noexcept {
    return pooled_buffer(this, memory_ + std::size_t{id} * stride_, len, id);
  }
  void give_back(std::uint16_t id) noexcept {
    assert(held_ > 0);
    --held_;
    if (loop_ != nullptr) count_pooled_buffers(*loop_, -1);
    if (registered_) give_buffer(*loop_, group_, id);
    unuse();
  }

  // No new read may take from the ring from here on (the owner let go, or the loop shuts down).
  // The buffers still held leave the core's pooled_buffers_in_use here: the gauge counts the
  // buffers of pools in use, on the loop's thread (while loop_ is set).
  void unregister() noexcept {
    if (loop_ != nullptr && held_ != 0) count_pooled_buffers(*loop_, -static_cast<int>(held_));
    if (registered_) remove_buffer_group(*loop_, group_);
    registered_ = false;
    loop_ = nullptr;
    shutdown_hook::unlink();
  }

 private:
  pool_state() noexcept = default;
  ~pool_state();
  // The loop is going (on its thread): no read can be in flight any more, so the group id is
  // free for the thread's later pools, and the state leaves the thread's list here, where that
  // list is at hand (handles may let go of the state later on any thread).
  static void on_loop_shutdown(shutdown_hook& h) noexcept {
    auto& self = static_cast<pool_state&>(h);
    self.unregister();
    self.unlist();
  }
  void unlist() noexcept;

  event_loop* loop_ = nullptr;
  std::byte* memory_ = nullptr;
  std::size_t memory_bytes_ = 0;
  std::uint32_t count_ = 0;  // a power of two
  std::uint32_t size_ = 0;
  std::uint32_t stride_ = 0;  // buffer i at memory_ + i * stride_ (see buffer_stride)
  std::uint32_t held_ = 0;
  std::uint32_t uses_ = 1;
  std::uint16_t group_ = 0;
  bool registered_ = false;
  bool listed_ = false;  // in live_pools of the thread whose loop it was made on
};

namespace {

// The distance between two buffers' starts: the size rounded up to a cache line, plus one line
// when that is a multiple of 512 B. io_uring's provided-buffer ring hands buffers out in the
// order they were given back, so each buffer is read into again only after every other one
// (1,024 reads later in the default pool): 4 KiB apart, every buffer's first line fell in the
// same 1/64 of the L2's sets (the set index is address bits 6-16), far too few ways for them,
// and the kernel's copy of each request into its buffer missed (bench/http/README.md has the
// profile). An odd number of lines apart, the first lines walk every set.
std::uint32_t buffer_stride(std::uint32_t size) noexcept {
  constexpr std::uint32_t line = 64;
  const std::uint32_t rounded = (size + line - 1) / line * line;  // size <= 1 GiB (create())
  return rounded % 512 == 0 ? rounded + line : rounded;
}

// Transparent huge pages for a pool of at least one: the default pool's 1,024 buffers are
// 1,024 pages, each read goes to the next one, and a TLB miss in a VM is a two-level walk.
constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

thread_local std::vector<const pool_state*> live_pools;  // few: a linear scan is fine
thread_local std::uint16_t next_group = 0;

bool group_in_use(std::uint16_t g) noexcept {
  return std::any_of(live_pools.begin(), live_pools.end(), [g](const pool_state* p) { return p->group() == g; });
}

// The calling core's shared pool, with the hook that drops it when the loop shuts down.
struct shared_pool : shutdown_hook {
  buffer_pool pool;
  event_loop* loop = nullptr;
};
thread_local shared_pool* shared = nullptr;

void drop_shared(shutdown_hook& h) noexcept {
  auto* s = static_cast<shared_pool*>(&h);
  if (shared == s) shared = nullptr;
  delete s;
}

}  // namespace

result<pool_state*> pool_state::create(event_loop& loop, const buffer_pool_options& o) {
  if (o.buffers == 0 || o.buffers > 32768 || o.buffer_size == 0 || o.buffer_size > (1u << 30))
    return errc::invalid_argument;
  auto* s = new pool_state();
  s->loop_ = &loop;
  s->count_ = std::bit_ceil(o.buffers);  // <= 32768 (checked above): no overflow
  s->size_ = o.buffer_size;
  s->stride_ = buffer_stride(o.buffer_size);
  live_pools.push_back(s);  // from here on ~pool_state undoes whatever was set up
  s->listed_ = true;
  auto fail = [s](std::error_code e) -> result<pool_state*> {
    delete s;
    return e;
  };

  // Mapped, not allocated: buffer pages cost memory only once data has been read into them (a
  // whole huge page at its first read, for a pool that has them).
  s->memory_bytes_ = std::size_t{s->count_} * s->stride_;
  void* memory = ::mmap(nullptr, s->memory_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return fail(errno_code(errno));
  s->memory_ = static_cast<std::byte*>(memory);
  if (s->memory_bytes_ >= huge_page_bytes) (void)::madvise(memory, s->memory_bytes_, MADV_HUGEPAGE);  // a hint

  int err = -EEXIST;
  for (unsigned tries = 0; tries < 65536 && err == -EEXIST; ++tries) {
    const std::uint16_t g = next_group++;
    if (group_in_use(g)) continue;
    s->group_ = g;
    err = add_buffer_group(loop, g, s->memory_, s->count_, s->size_, s->stride_);
  }
  // Options are checked above, so EOPNOTSUPP means: not on this kernel (before 5.19).
  if (err == -EOPNOTSUPP) return fail(std::make_error_code(errc::not_supported));
  if (err < 0) return fail(errno_code(err));
  s->registered_ = true;
  s->on_shutdown = &pool_state::on_loop_shutdown;
  add_shutdown_hook(loop, *s);
  return s;
}

pool_state::~pool_state() {
  assert(held_ == 0);
  unregister();
  if (memory_ != nullptr) ::munmap(memory_, memory_bytes_);
  unlist();
}

void pool_state::unlist() noexcept {
  // Still listed means the loop still runs, and then the state is used on its thread only.
  if (!std::exchange(listed_, false)) return;
  live_pools.erase(std::find(live_pools.begin(), live_pools.end(), this));
}

void give_back(pool_state& pool, std::uint16_t id) noexcept { pool.give_back(id); }

// --- the read ---

pooled_recv_operation::~pooled_recv_operation() {
  cancel_and_wait();  // a buffer that races in is owned here before the next line
  if (got_) pool_->give_back(got_id_);
  if (counted_) pool_->unuse();
}

std::coroutine_handle<> pooled_recv_operation::start(continuation c) {
  event_loop& loop = current_loop();
  if (shared_) {
    // Every read after a core's first finds its shared pool here, without of_this_core()'s
    // lookup of the loop again and its result<> (what of_this_core() checks first).
    if (shared != nullptr && shared->loop == &loop) {
      pool_ = shared->pool.state();
    } else {
      auto p = buffer_pool::of_this_core();
      if (!p) {
        start_error_ = p.error().value();  // an errno (system or generic category alike)
        return c.complete();
      }
      pool_ = (*p)->state();
    }
  }
  // A pool of another core, or one already let go of, has no ring on this one.
  if (pool_ == nullptr || pool_->loop() != &loop) {
    start_error_ = EINVAL;
    return c.complete();
  }
  pool_->use();
  counted_ = true;
  return kernel_operation::start(c);
}

void pooled_recv_operation::prepare(io_request& req) noexcept {
  req.set(io_opcode::recv_pooled, fd_, nullptr, pool_->buffer_size());
  req.buffer_group = pool_->group();
  req.poll_first = poll_first_;
}

bool pooled_recv_operation::on_completion(int res, unsigned flags) noexcept {
  if ((flags & io_flag_buffer) != 0) {
    const auto id = static_cast<std::uint16_t>(flags >> io_buffer_id_shift);
    pool_->take(id);
    if (res > 0) {
      got_ = true;
      got_id_ = id;
    } else {
      pool_->give_back(id);  // end of stream or an error carries no bytes
    }
  }
  if (res == -ENOBUFS && !poll_first_ && !cancel_requested()) {
    poll_first_ = true;  // the ring was empty at submission: wait for data first, then pick
    resubmit();
    return false;
  }
  return true;
}

result<pooled_buffer> pooled_recv_operation::make_result(int res) noexcept {
  if (start_error_ != 0) return errno_code(start_error_);
  if (res > 0) {
    assert(got_);
    got_ = false;
    return pool_->adopt(got_id_, static_cast<std::uint32_t>(res));
  }
  if (res == 0) return pooled_buffer{};
  // Cancelled before the retry that would have waited for data: nothing arrived.
  if (res == -ENOBUFS && !poll_first_) return errc::operation_canceled;
  return errno_code(res);
}

}  // namespace cogwheel::detail

namespace cogwheel {

buffer_pool& buffer_pool::operator=(buffer_pool&& o) noexcept {
  if (this != &o) {
    buffer_pool old(std::move(*this));  // lets go of ours first (see ~buffer_pool)
    state_ = std::exchange(o.state_, nullptr);
  }
  return *this;
}

buffer_pool::~buffer_pool() {
  if (state_ == nullptr) return;
  state_->unregister();
  std::exchange(state_, nullptr)->unuse();
}

result<buffer_pool> buffer_pool::create(buffer_pool_options options) {
  auto s = detail::pool_state::create(detail::current_loop(), options);
  if (!s) return s.error();
  return buffer_pool(*s);
}

result<buffer_pool*> buffer_pool::of_this_core(buffer_pool_options options) {
  detail::event_loop& loop = detail::current_loop();
  if (detail::shared != nullptr && detail::shared->loop == &loop) return &detail::shared->pool;
  auto p = create(options);
  if (!p) return p.error();
  auto* s = new detail::shared_pool();
  s->pool = std::move(*p);
  s->loop = &loop;
  s->on_shutdown = &detail::drop_shared;
  add_shutdown_hook(loop, *s);
  detail::shared = s;
  return &s->pool;
}

std::size_t buffer_pool::available() const noexcept { return state_ != nullptr ? state_->available() : 0; }
std::size_t buffer_pool::capacity() const noexcept { return state_ != nullptr ? state_->capacity() : 0; }
std::size_t buffer_pool::buffer_size() const noexcept { return state_ != nullptr ? state_->buffer_size() : 0; }

}  // namespace cogwheel
