// alloc_census: linked into a bench-only copy of a server (http_server_census,
// echo_server_census), it replaces the global operator new and delete and counts the blocks
// alive by requested size. `kill -USR2 <pid>` prints them to stderr: one line per size with live
// blocks, "census: <size> B x <count>", largest total first, then the total. Coroutine frames,
// std::string and std::vector storage all come through here; malloc() called directly does not.
//
// What it is for: with N idle connections held, the sizes held N times (or a multiple of N) are
// what one connection holds, frame by frame. Each block carries a 16-byte header (the size), so
// the census binary's RSS is not the real one: measure RSS on the plain binary.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

namespace {

constexpr std::size_t max_size = 1 << 16;  // sizes at and above it share the last counter
constexpr std::size_t header = 16;         // keeps the block 16-byte aligned

std::atomic<long> live[max_size + 1];
std::atomic<bool> asked{false};

void* allocate(std::size_t n) {
  auto* p = static_cast<unsigned char*>(std::malloc(n + header));
  if (p == nullptr) throw std::bad_alloc();
  *reinterpret_cast<std::size_t*>(p) = n;
  live[std::min(n, max_size)].fetch_add(1, std::memory_order_relaxed);
  return p + header;
}

void release(void* q) noexcept {
  if (q == nullptr) return;
  auto* p = static_cast<unsigned char*>(q) - header;
  live[std::min(*reinterpret_cast<std::size_t*>(p), max_size)].fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}

void print() {
  struct row {
    std::size_t size;
    long count;
  };
  static row rows[max_size + 1];  // static: printing allocates nothing
  std::size_t k = 0;
  long long total = 0;
  for (std::size_t s = 0; s <= max_size; ++s) {
    const long c = live[s].load(std::memory_order_relaxed);
    if (c > 0) {
      rows[k++] = {s, c};
      total += static_cast<long long>(s) * c;
    }
  }
  std::sort(rows, rows + k, [](const row& a, const row& b) { return a.size * a.count > b.size * b.count; });
  for (std::size_t i = 0; i < k && i < 40; ++i) std::fprintf(stderr, "census: %zu B x %ld\n", rows[i].size, rows[i].count);
  std::fprintf(stderr, "census: total %lld B in live blocks\n", total);
}

// A thread of its own prints (a signal handler must not): it looks at the flag every 100 ms.
struct watcher {
  watcher() {
    // Task frames come from the runtime's frame pools, which this census cannot see: frames go
    // through operator new when the variable says so (read at the first frame, after this).
    ::setenv("COGWHEEL_FRAME_POOL", "0", 1);
    struct sigaction sa {};
    sa.sa_handler = [](int) { asked.store(true); };
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, nullptr);
    std::thread([] {
      for (;;) {
        ::usleep(100000);
        if (asked.exchange(false)) print();
      }
    }).detach();
  }
} the_watcher;

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
