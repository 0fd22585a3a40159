// The per-thread frame pools of <cogwheel/runtime/detail/frame_pool.hpp> (the invariants are
// stated there).
#include <cogwheel/runtime/detail/frame_pool.hpp>

#include <sys/mman.h>

#include <atomic>
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
// The owner, then runs from 16 bytes past a line boundary, where malloc's blocks start: with
// runs on line boundaries runtime_bench's resume/yield (one frame, metrics on) measured 70 ns
// against 51 (the cause was not found; the sleepers row was the same either way).
constexpr std::size_t chunk_header = 80;
constexpr std::size_t run_blocks = 32;  // blocks per run: at most 64 KiB (32 x 2 KiB) of a chunk

// A free block: the link of its free list or remote stack, and (on the remote stack, where
// blocks of every size meet) its size class.
struct free_block {
  free_block* next;
  std::size_t size_class;
};

class frame_pool;

struct chunk {
  frame_pool* owner;
};

class frame_pool {
 public:
  void* allocate(std::size_t c) {
    if (free_block* b = free_[c]) {
      free_[c] = b->next;
      return b;
    }
    if (remote_.load(std::memory_order_relaxed) != nullptr) {
      take_remote();
      if (free_block* b = free_[c]) {
        free_[c] = b->next;
        return b;
      }
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
    return p;
  }
  // A block of this pool, freed by the thread that uses it.
  void free_local(void* p, std::size_t c) noexcept {
    auto* b = static_cast<free_block*>(p);
    b->next = free_[c];
    free_[c] = b;
  }
  // A block of this pool, freed by any other thread.
  void free_remote(void* p, std::size_t c) noexcept {
    auto* b = static_cast<free_block*>(p);
    b->size_class = c;
    b->next = remote_.load(std::memory_order_relaxed);
    while (!remote_.compare_exchange_weak(b->next, b, std::memory_order_release, std::memory_order_relaxed)) {
    }
  }

  frame_pool* next_orphan = nullptr;  // on the list of pools whose thread exited

 private:
  void take_remote() noexcept {
    free_block* b = remote_.exchange(nullptr, std::memory_order_acquire);
    while (b != nullptr) {
      free_block* next = b->next;
      free_local(b, b->size_class);
      b = next;
    }
  }
  void new_chunk() {
    // Twice the size, trimmed to a 2 MiB-aligned chunk: a block's chunk is its address rounded
    // down. The tail of the current chunk (less than one block) is left unused.
    void* raw = ::mmap(nullptr, 2 * chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (start + chunk_bytes - 1) & ~(chunk_bytes - 1);
    if (aligned > start) ::munmap(raw, aligned - start);
    const std::uintptr_t tail = aligned + chunk_bytes;
    if (start + 2 * chunk_bytes > tail) ::munmap(reinterpret_cast<void*>(tail), start + 2 * chunk_bytes - tail);
    auto* mem = reinterpret_cast<char*>(aligned);
    // A hint: where transparent huge pages are off, the chunk is ordinary memory.
    ::madvise(mem, chunk_bytes, MADV_HUGEPAGE);
    reinterpret_cast<chunk*>(mem)->owner = this;
    next_ = mem + chunk_header;
    end_ = mem + chunk_bytes;
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

// The calling thread's pool, created (or adopted) on first use and handed on at thread exit.
struct thread_pool {
  frame_pool* pool = nullptr;
  ~thread_pool() {
    if (pool == nullptr) return;
    std::lock_guard<std::mutex> lock(orphans_mutex);
    pool->next_orphan = orphans;
    orphans = pool;
    pool = nullptr;  // a frame freed later on this thread goes to the remote stack
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

}  // namespace

void* allocate_frame(std::size_t n) {
  if (n > max_pooled_frame || !pooling()) return ::operator new(n);
  frame_pool*& pool = this_thread.pool;
  if (pool == nullptr) pool = adopt_or_create();
  return pool->allocate(size_class(n));
}

void free_frame(void* p, std::size_t n) noexcept {
  if (p == nullptr) return;
  if (n > max_pooled_frame || !pooling()) {
    ::operator delete(p);
    return;
  }
  frame_pool* owner = reinterpret_cast<chunk*>(reinterpret_cast<std::uintptr_t>(p) & ~(chunk_bytes - 1))->owner;
  if (owner == this_thread.pool)
    owner->free_local(p, size_class(n));
  else
    owner->free_remote(p, size_class(n));
}

}  // namespace cogwheel::detail
