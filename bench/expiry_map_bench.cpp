// expiry_map against its peers on the same five phases (bench/expiry_map_compare.sh runs it
// beside tokio-util's DelayQueue, bench/peers/tokio_delay_queue, and prints the table):
//   insert        N new keys (u64 -> u64), TTLs 10..1009 ms
//   move_later    every key's deadline 2 s later, in random order (a lazy push on the wheel)
//   move_earlier  every key's deadline back to 10..1009 ms, in random order
//   expire_all    the paused clock runs until every key has expired and been handed over
//   erase         N keys inserted again, then erased in random order (the erase timed)
// and `memory N bytes`: RSS growth over the insert phase per key, minus the 16 bytes of key and
// value (the first rep of a fresh process is the one to read).
//
// Two implementations, each row prefixed: `cogwheel` (expiry_map on a paused-clock runtime's
// wheel; with --heap on its heap twin) and `umap_heap` (std::unordered_map whose values hold a
// timer_node, on a standalone timer_heap advanced by hand: the do-it-yourself form).
// Usage: expiry_map_bench N [REPS] [--heap] [--only=cogwheel|umap_heap]
// Keys, TTLs and orders come from the same generator as the tokio peer's (splitmix64), seed 47+rep.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <cogwheel/runtime/expiry_map.hpp>
#include <cogwheel/runtime/options.hpp>
#include <cogwheel/runtime/run.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/timer/heap.hpp>

namespace {

using namespace std::chrono_literals;
using cogwheel::clock;

struct rng {
  std::uint64_t s;
  std::uint64_t next() {
    s += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

struct workload {
  std::vector<std::uint64_t> keys;
  std::vector<std::size_t> order;
  std::vector<std::uint64_t> ttl_ms;
  workload(std::size_t n, std::uint64_t seed) {
    rng r{seed};
    keys.resize(n);
    for (auto& k : keys) k = r.next();
    order.resize(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    for (std::size_t i = n - 1; i > 0; --i) std::swap(order[i], order[r.below(i + 1)]);
    ttl_ms.resize(n);
    for (auto& t : ttl_ms) t = 10 + r.below(1000);
  }
};

std::size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * 4096;
}

struct stopwatch {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  void print(const char* who, const char* phase, std::size_t n) const {
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s %s %zu %.2f\n", who, phase, n, ns / static_cast<double>(n));
  }
};

void print_memory(const char* who, std::size_t n, std::size_t before, std::size_t after) {
  std::printf("%s memory %zu %.1f\n", who, n, static_cast<double>(after - before) / static_cast<double>(n) - 16.0);
}

cogwheel::task<> cogwheel_rep(const workload& w) {
  const std::size_t n = w.keys.size();
  cogwheel::expiry_map<std::uint64_t, std::uint64_t> m;
  const std::size_t rss0 = rss_bytes();
  {
    stopwatch t;
    for (std::size_t i = 0; i < n; ++i) m.insert_or_assign(w.keys[i], i, std::chrono::milliseconds(w.ttl_ms[i]));
    t.print("cogwheel", "insert", n);
  }
  print_memory("cogwheel", n, rss0, rss_bytes());
  {
    stopwatch t;
    for (std::size_t i : w.order) m.expire_after(w.keys[i], std::chrono::milliseconds(2000 + w.ttl_ms[i]));
    t.print("cogwheel", "move_later", n);
  }
  {
    stopwatch t;
    for (std::size_t i : w.order) m.expire_after(w.keys[i], std::chrono::milliseconds(w.ttl_ms[(i + 1) % n]));
    t.print("cogwheel", "move_earlier", n);
  }
  {
    stopwatch t;
    std::size_t expired = 0;
    while (expired < n) {
      auto b = co_await m.expired();
      if (!b) break;
      expired += b->size();
    }
    t.print("cogwheel", "expire_all", n);
    if (expired != n || m.size() != 0) {
      std::fprintf(stderr, "expiry_map_bench: %zu of %zu expired\n", expired, n);
      std::exit(1);
    }
  }
  for (std::size_t i = 0; i < n; ++i) m.insert_or_assign(w.keys[i], i, std::chrono::milliseconds(w.ttl_ms[i]));
  {
    stopwatch t;
    for (std::size_t i : w.order) m.erase(w.keys[i]);
    t.print("cogwheel", "erase", n);
  }
}

// The do-it-yourself form: an unordered_map whose values hold the timer node, on a heap.
struct umap_heap {
  struct item {
    cogwheel::timer::timer_node node{cogwheel::timer::timer_node::calls<&umap_heap::on_expire>{}};
    std::uint64_t key = 0;
    std::uint64_t value = 0;
  };
  static inline umap_heap* current = nullptr;
  std::unordered_map<std::uint64_t, item> map;
  cogwheel::timer::timer_heap heap;
  std::size_t expired = 0;

  explicit umap_heap(clock::time_point start) : heap(1ms, start) { current = this; }
  ~umap_heap() {
    for (auto& [k, it] : map) heap.cancel(it.node);
  }
  static void on_expire(cogwheel::timer::timer_node& n) noexcept {
    const std::uint64_t key = reinterpret_cast<item&>(n).key;  // node is the first member
    ++current->expired;
    current->map.erase(key);
  }
  void insert_or_assign(std::uint64_t k, std::uint64_t v, clock::time_point at) {
    auto [it, fresh] = map.try_emplace(k);
    it->second.key = k;
    it->second.value = v;
    heap.reschedule(it->second.node, at);
    (void)fresh;
  }
  void expire_at(std::uint64_t k, clock::time_point at) {
    auto it = map.find(k);
    if (it != map.end()) heap.reschedule(it->second.node, at);
  }
  void erase(std::uint64_t k) {
    auto it = map.find(k);
    if (it == map.end()) return;
    heap.cancel(it->second.node);
    map.erase(it);
  }
};

void umap_heap_rep(const workload& w) {
  const std::size_t n = w.keys.size();
  const clock::time_point base = clock::now();
  umap_heap m(base);
  const std::size_t rss0 = rss_bytes();
  {
    stopwatch t;
    for (std::size_t i = 0; i < n; ++i) m.insert_or_assign(w.keys[i], i, base + std::chrono::milliseconds(w.ttl_ms[i]));
    t.print("umap_heap", "insert", n);
  }
  print_memory("umap_heap", n, rss0, rss_bytes());
  {
    stopwatch t;
    for (std::size_t i : w.order) m.expire_at(w.keys[i], base + std::chrono::milliseconds(2000 + w.ttl_ms[i]));
    t.print("umap_heap", "move_later", n);
  }
  {
    stopwatch t;
    for (std::size_t i : w.order) m.expire_at(w.keys[i], base + std::chrono::milliseconds(w.ttl_ms[(i + 1) % n]));
    t.print("umap_heap", "move_earlier", n);
  }
  {
    stopwatch t;
    while (auto next = m.heap.next_deadline()) m.heap.advance(*next);
    t.print("umap_heap", "expire_all", n);
    if (m.expired != n || !m.map.empty()) {
      std::fprintf(stderr, "expiry_map_bench: umap_heap %zu of %zu expired\n", m.expired, n);
      std::exit(1);
    }
  }
  const clock::time_point later = m.heap.now();
  for (std::size_t i = 0; i < n; ++i) m.insert_or_assign(w.keys[i], i, later + std::chrono::milliseconds(w.ttl_ms[i]));
  {
    stopwatch t;
    for (std::size_t i : w.order) m.erase(w.keys[i]);
    t.print("umap_heap", "erase", n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 10000;
  int reps = 1;
  bool heap = false;
  std::string only;
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--heap") == 0) {
      heap = true;
    } else if (std::strncmp(argv[i], "--only=", 7) == 0) {
      only = argv[i] + 7;
    } else if (positional++ == 0) {
      n = std::strtoull(argv[i], nullptr, 10);
    } else {
      reps = std::atoi(argv[i]);
    }
  }
  if (n < 2) n = 2;
  for (int rep = 0; rep < reps; ++rep) {
    const workload w(n, 47 + static_cast<std::uint64_t>(rep));
    if (only.empty() || only == "cogwheel") {
      cogwheel::runtime_options o;
      o.paused_clock = true;
      o.stall_threshold = clock::duration::zero();  // each phase is one long iteration, by design
      o.timers = heap ? cogwheel::timer_kind::heap : cogwheel::timer_kind::wheel;
      cogwheel::run(cogwheel_rep(w), o);
    }
    if (only.empty() || only == "umap_heap") umap_heap_rep(w);
    std::fflush(stdout);
  }
  return 0;
}
