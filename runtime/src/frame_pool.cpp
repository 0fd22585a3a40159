// The per-thread frame pools of <cogwheel/runtime/detail/frame_pool.hpp> (the invariants are
// stated there).
#include <cogwheel/runtime/detail/frame_pool.hpp>

#include <sys/mman.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

namespace cogwheel::detail {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
#else
constexpr bool sanitized = false;
#endif

constexpr std::size_t chunk_bytes = std::size_t{2} << 20;  // one transparent huge page
constexpr std::size_t granule = 16;                         // block sizes: multiples of 16
constexpr std::size_t classes = max_pooled_frame / granule;
// The owner, then runs from 16 bytes past a line boundary, where malloc's blocks start: runs on
// line boundaries made runtime_bench's resume/yield markedly slower (cause not found; the
// sleepers row was the same either way).
constexpr std::size_t chunk_header = 80;
constexpr std::size_t run_blocks = 32;  // blocks per run: at most 64 KiB (32 x 2 KiB) of a chunk

// A free block: the link of its free list or remote stack, and (on the remote stack, where
// blocks of every size meet) its size class.
struct free_block {
  free_block* next;
  std::size_t size_class;
};

class frame_pool;

// A chunk's first bytes. The owner is written once and read by every thread that frees one of
// the chunk's blocks; the counts are the owning thread's alone and sit on the next cache line,
// so that remote frees reading the owner do not bounce the line the owner writes on each
// allocation and free.
struct chunk {
  frame_pool* owner;
  char pad_[56];
  // Blocks handed out and not yet back on a free list (a block on the remote stack still
  // counts: it is taken back, and counted down, by the owning thread).
  std::uint32_t live;
  // The pool's epoch when live last fell to 0 (see frame_pool::idle).
  std::uint32_t empty_epoch;
};
static_assert(sizeof(chunk) <= chunk_header);
static_assert(offsetof(chunk, live) == 64);

chunk* chunk_of(const void* p) noexcept {
  return reinterpret_cast<chunk*>(reinterpret_cast<std::uintptr_t>(p) & ~(chunk_bytes - 1));
}

// A growable array of chunk addresses, from malloc: the pool's bookkeeping is no frame (see
// adopt_or_create) and is used only off the hot paths.
struct chunk_list {
  chunk** at = nullptr;
  std::size_t size = 0;
  std::size_t capacity = 0;
  void reserve_one() {
    if (size == capacity) {
      const std::size_t n = capacity == 0 ? 16 : 2 * capacity;
      void* grown = std::realloc(at, n * sizeof(chunk*));
      if (grown == nullptr) throw std::bad_alloc();
      at = static_cast<chunk**>(grown);
      capacity = n;
    }
  }
  void push(chunk* c) noexcept { at[size++] = c; }  // after reserve_one
};

// Giving memory back (decay). Invariants:
//  - The hot paths keep each chunk's live count (one increment or decrement of a line the
//    owning thread already has) and nothing else, but for a free that empties its chunk: that
//    one stamps the chunk with the epoch and sets pending_. pending_ is false only when no chunk
//    in use is empty (it is cleared by a scan that found none).
//  - Time is cut into epochs of at least decay_ns, advanced only by idle(), which the event
//    loop calls when it is about to sleep (frame_pool_idle) while pending_ is set; each advance
//    scans the chunks in use (O(chunks), a few hundred at most for a million frames). A chunk
//    is released only when it has been empty since an epoch before the previous one, that is
//    for at least one whole epoch (decay_ns) without a single allocation from it: a steady
//    state that keeps reusing its blocks never releases them, so it never pays madvise nor the
//    page faults of refilling a released chunk. A busy loop that never sleeps never releases
//    (it is not idle); a thread that exits releases its empty chunks at once.
//  - Releasing a chunk takes its blocks off the free lists (one walk of every free list:
//    O(free blocks), paid at most once per epoch and only when something is released, at a
//    moment the loop had nothing else to do; no walk when every chunk goes, as at thread
//    exit), drops the runs and the carving point that lie in it, then madvise(MADV_DONTNEED)s
//    the whole 2 MiB: the huge page is dropped whole (never split), and Rss falls at once.
//    The address range stays mapped, on spare_, and is the next chunk carved (reading zeros:
//    its header is written anew).
//  - Only whole chunks are released, never pages inside a chunk in use: with transparent huge
//    pages a chunk is one page, and giving back part of it would split it into 4 KiB pages,
//    losing the TLB reach the pool exists for (see the header).
class frame_pool {
 public:
  // A block of class c from its free list, or nullptr: allocate_frame's fast path.
  free_block* pop(std::size_t c) noexcept {
    free_block* b = free_[c];
    if (b != nullptr) [[likely]] {
      free_[c] = b->next;
      count_allocated(b);
    }
    return b;
  }
  void* allocate(std::size_t c) {
    if (free_block* b = pop(c)) return b;
    if (remote_.load(std::memory_order_relaxed) != nullptr) {
      take_remote();
      if (free_block* b = pop(c)) return b;
    }
    const std::size_t bytes = (c + 1) * granule;
    run& r = runs_[c];
    if (static_cast<std::size_t>(r.end - r.next) < bytes) {
      // A new run of this class: blocks of one size side by side, whatever else is allocated
      // meanwhile (a spawn's record between two frames would shift every frame's offset within
      // its cache lines, and a 352-byte frame would span 7 lines instead of 6).
      const std::size_t run_bytes = run_blocks * bytes;
      if (static_cast<std::size_t>(end_ - next_) < run_bytes) new_chunk();
      r.next = next_;
      r.end = next_ + run_bytes;
      next_ += run_bytes;
    }
    void* p = r.next;
    r.next += bytes;
    count_allocated(p);
    return p;
  }
  // A block of this pool, freed by the thread that uses it.
  void free_local(void* p, std::size_t c) noexcept {
    auto* b = static_cast<free_block*>(p);
    b->next = free_[c];
    free_[c] = b;
    chunk* h = chunk_of(p);
    if (--h->live == 0) [[unlikely]] emptied(h);
  }
  // A block of this pool, freed by any other thread.
  void free_remote(void* p, std::size_t c) noexcept {
    auto* b = static_cast<free_block*>(p);
    b->size_class = c;
    b->next = remote_.load(std::memory_order_relaxed);
    while (!remote_.compare_exchange_weak(b->next, b, std::memory_order_release, std::memory_order_relaxed)) {
    }
  }

  // The owning thread is about to sleep: takes the remote stack back and, once an
  // epoch has passed, releases what has been empty for a whole one. Returns how long the thread
  // may sleep before calling again (ns), or -1 when nothing waits to be released.
  template <class Clock>
  std::int64_t idle(Clock now) noexcept {
    if (remote_.load(std::memory_order_relaxed) != nullptr) take_remote();
    if (!pending_) return -1;
    const std::int64_t now_ns = now();  // read only when something may be released
    if (now_ns < next_tick_) return next_tick_ - now_ns;
    ++epoch_;
    next_tick_ = now_ns + decay_ns;
    release_if([this](const chunk* h) { return epoch_ - h->empty_epoch >= 2; });
    return pending_ ? decay_ns : -1;
  }
  // Releases every empty chunk now, whatever its age.
  void release_empty() noexcept {
    if (remote_.load(std::memory_order_relaxed) != nullptr) take_remote();
    if (pending_) release_if([](const chunk*) { return true; });
  }

  frame_pool* next_orphan = nullptr;  // on the list of pools whose thread exited

  // How long a chunk stays empty before it is given back (at least; at most twice this).
  static constexpr std::int64_t decay_ns = 200'000'000;

 private:
  void count_allocated(void* p) noexcept {
    ++chunk_of(p)->live;
  }
  // Out of line: free_local stays a few instructions with no stack frame (the free that empties
  // a chunk is rare).
  [[gnu::noinline]] void emptied(chunk* h) noexcept {
    h->empty_epoch = epoch_;
    pending_ = true;
  }
  void take_remote() noexcept {
    free_block* b = remote_.exchange(nullptr, std::memory_order_acquire);
    while (b != nullptr) {
      free_block* next = b->next;
      free_local(b, b->size_class);
      b = next;
    }
  }
  void new_chunk() {
    chunks_.reserve_one();  // before the chunk is taken: nothing to hand back if this throws
    char* mem = nullptr;
    if (spare_.size != 0) {
      mem = reinterpret_cast<char*>(spare_.at[--spare_.size]);
    } else {
      // Twice the size, trimmed to a 2 MiB-aligned chunk: a block's chunk is its address rounded
      // down. The tail of the current chunk (less than one block) is left unused.
      void* raw = ::mmap(nullptr, 2 * chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (raw == MAP_FAILED) throw std::bad_alloc();
      const auto start = reinterpret_cast<std::uintptr_t>(raw);
      const std::uintptr_t aligned = (start + chunk_bytes - 1) & ~(chunk_bytes - 1);
      if (aligned > start) ::munmap(raw, aligned - start);
      const std::uintptr_t tail = aligned + chunk_bytes;
      if (start + 2 * chunk_bytes > tail) ::munmap(reinterpret_cast<void*>(tail), start + 2 * chunk_bytes - tail);
      mem = reinterpret_cast<char*>(aligned);
      // A hint: where transparent huge pages are off, the chunk is ordinary memory.
      ::madvise(mem, chunk_bytes, MADV_HUGEPAGE);
    }
    chunks_.push(reinterpret_cast<chunk*>(mem));  // has room: reserved above
    auto* h = reinterpret_cast<chunk*>(mem);
    h->owner = this;
    h->live = 0;  // the allocation that made it takes its first block at once
    h->empty_epoch = epoch_;
    next_ = mem + chunk_header;
    end_ = mem + chunk_bytes;
  }

  // Releases the empty chunks that `due` accepts (see the invariants above).
  template <class Due>
  void release_if(Due due) noexcept {
    // Marked by clearing their owner (nothing else reads it: no block of an empty chunk is
    // held by anyone), then moved from chunks_ to spare_.
    std::size_t marked = 0;
    pending_ = false;
    for (std::size_t i = 0; i < chunks_.size; ++i) {
      chunk* h = chunks_.at[i];
      if (h->live != 0) continue;
      if (due(h)) {
        h->owner = nullptr;
        ++marked;
      } else {
        pending_ = true;  // empty, not for long enough yet
      }
    }
    if (marked == 0) return;
    // spare_ must take them all without allocating (release is noexcept): reserve first, and
    // give up on this round if even that fails.
    if (spare_.capacity - spare_.size < marked) {
      std::size_t n = spare_.size + marked;
      void* grown = std::realloc(spare_.at, n * sizeof(chunk*));
      if (grown == nullptr) {
        for (std::size_t i = 0; i < chunks_.size; ++i)
          if (chunks_.at[i]->live == 0) chunks_.at[i]->owner = this;
        pending_ = true;  // try again next time
        return;
      }
      spare_.at = static_cast<chunk**>(grown);
      spare_.capacity = n;
    }
    if (marked == chunks_.size) {
      // Every chunk goes (a drained pool, a thread's exit): so does every free block, no walk.
      for (free_block*& head : free_) head = nullptr;
    }
    for (free_block*& head : free_) {
      free_block** link = &head;
      while (free_block* b = *link) {
        if (chunk_of(b)->owner == nullptr)
          *link = b->next;
        else
          link = &b->next;
      }
    }
    // A run's next, like the carving point's, may stand exactly at its chunk's end (a run used
    // up, a chunk carved to the last byte): then it is no address in that chunk, and may be
    // none mapped at all. end - 1 always is.
    for (run& r : runs_)
      if (r.end != nullptr && chunk_of(r.end - 1)->owner == nullptr) r = run{};
    if (end_ != nullptr && chunk_of(end_ - 1)->owner == nullptr) next_ = end_ = nullptr;
    for (std::size_t i = 0; i < chunks_.size;) {
      chunk* h = chunks_.at[i];
      if (h->owner != nullptr) {
        ++i;
        continue;
      }
      chunks_.at[i] = chunks_.at[--chunks_.size];
      ::madvise(h, chunk_bytes, MADV_DONTNEED);
      spare_.at[spare_.size++] = h;
    }
  }

  // The uncarved part of a class's current run.
  struct run {
    char* next = nullptr;
    char* end = nullptr;
  };

  free_block* free_[classes] = {};
  run runs_[classes];
  char* next_ = nullptr;  // the current chunk's uncarved part (runs are cut from it)
  char* end_ = nullptr;
  bool pending_ = false;  // some chunk in use may be empty (see the invariants above)
  std::uint32_t epoch_ = 0;
  std::int64_t next_tick_ = 0;  // when idle() may advance the epoch
  chunk_list chunks_;           // in use: carved from
  chunk_list spare_;            // released: mapped, zero, carved next
  std::atomic<free_block*> remote_{nullptr};
};

// Pools whose thread exited, for the next thread that needs one.
std::mutex orphans_mutex;
frame_pool* orphans = nullptr;

frame_pool* adopt_or_create() {
  {
    std::lock_guard<std::mutex> lock(orphans_mutex);
    if (frame_pool* p = orphans) {
      orphans = p->next_orphan;
      p->next_orphan = nullptr;
      return p;
    }
  }
  // From malloc, not operator new: the pool's own bookkeeping is no frame, and a program that
  // counts its live operator-new blocks (tests/io/soak_test) should not see it. Never freed:
  // handed on when its thread exits.
  void* mem = std::malloc(sizeof(frame_pool));
  if (mem == nullptr) throw std::bad_alloc();
  return new (mem) frame_pool;
}

// The calling thread's pool, for the hot paths: a plain pointer, constant-initialised and
// trivially destructible, so that reading it is one load with no thread_local init guard (which
// would put a call, and the saving of registers it needs, into allocate_frame and free_frame).
// Not null only while pooling() is on and this thread's pool is alive: a null pointer sends
// every call to the slow paths, which decide the rest.
constinit thread_local frame_pool* current_pool = nullptr;

// The calling thread's pool, created (or adopted) on first use and handed on at thread exit.
// The destructor is why it is not current_pool itself.
struct thread_pool {
  frame_pool* pool = nullptr;
  ~thread_pool() {
    if (pool == nullptr) return;
    // Nobody may adopt it soon: what is empty goes back to the kernel now.
    pool->release_empty();
    std::lock_guard<std::mutex> lock(orphans_mutex);
    pool->next_orphan = orphans;
    orphans = pool;
    pool = nullptr;
    current_pool = nullptr;  // a frame freed later on this thread goes to the remote stack
  }
};
thread_local thread_pool this_thread;

bool pooling() noexcept {
  static const bool on = [] {
    if (sanitized) return false;
    const char* v = std::getenv("COGWHEEL_FRAME_POOL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

std::size_t size_class(std::size_t n) noexcept { return n == 0 ? 0 : (n - 1) / granule; }

// Everything allocate_frame's fast path does not do: a large frame, pooling off, the thread's
// first frame, an empty free list.
[[gnu::noinline]] void* allocate_frame_slow(std::size_t n) {
  if (n > max_pooled_frame || !pooling()) return ::operator new(n);
  frame_pool*& pool = this_thread.pool;
  if (pool == nullptr) {
    pool = adopt_or_create();
    current_pool = pool;
  }
  return pool->allocate(size_class(n));
}

// Everything free_frame's fast path does not do: null, a large frame, pooling off, a block of
// another thread's pool (or freed after this thread's pool was handed on).
[[gnu::noinline]] void free_frame_slow(void* p, std::size_t n) noexcept {
  if (p == nullptr) return;
  if (n > max_pooled_frame || !pooling()) {
    ::operator delete(p);
    return;
  }
  frame_pool* owner = chunk_of(p)->owner;
  if (owner == current_pool)
    owner->free_local(p, size_class(n));
  else
    owner->free_remote(p, size_class(n));
}

}  // namespace

// The fast paths are leaves: one thread_local load, the free list, the chunk's live count, no
// call and no register saved (runtime_bench resume/task: bench/README.md, "Frame pools give
// memory back"). A non-null current_pool means pooling is on, so a small frame is a pool block.
void* allocate_frame(std::size_t n) {
  frame_pool* pool = current_pool;
  if (pool != nullptr && n <= max_pooled_frame) [[likely]] {
    if (void* p = pool->pop(size_class(n))) [[likely]]
      return p;
  }
  return allocate_frame_slow(n);
}

void free_frame(void* p, std::size_t n) noexcept {
  frame_pool* pool = current_pool;
  if (pool != nullptr && p != nullptr && n <= max_pooled_frame && chunk_of(p)->owner == pool) [[likely]] {
    pool->free_local(p, size_class(n));
    return;
  }
  free_frame_slow(p, n);
}

std::int64_t frame_pool_idle() noexcept {
  frame_pool* pool = current_pool;
  if (pool == nullptr) return -1;
  // Coarse (the kernel's tick, a few ms) is fine for a decay of 200 ms, and costs little more
  // than reading a variable. But it stands still between ticks, up to one tick behind the
  // precise clock the loop sleeps on: a loop woken exactly when the coarse clock would say the
  // epoch is due reads a clock still short of it, and asked to sleep that shortfall again,
  // comes back before the tick and reads the same shortfall, waking once every few µs until
  // the tick (hundreds of wake-ups per epoch). So the sleep asked for is one tick longer: the
  // coarse clock has passed the due time when the loop wakes.
  static const std::int64_t coarse_tick = [] {
    timespec r{};
    ::clock_getres(CLOCK_MONOTONIC_COARSE, &r);
    return std::int64_t{r.tv_sec} * 1'000'000'000 + r.tv_nsec;
  }();
  const std::int64_t ns = pool->idle([] {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
  });
  return ns > 0 ? ns + coarse_tick : ns;
}

void release_free_frames() noexcept {
  if (frame_pool* pool = current_pool) pool->release_empty();
}

}  // namespace cogwheel::detail
