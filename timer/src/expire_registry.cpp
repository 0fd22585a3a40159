#include <cogwheel/timer/detail/expire_registry.hpp>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace cogwheel::timer::detail {

// Zero-initialised (constant initialisation), so usable from other static initialisers.
std::atomic<expire_callback> expire_table[expire_table_size] = {};

namespace {

std::atomic<unsigned> registered{1};  // entries in use, entry 0 (null) included
std::mutex insert_mutex;              // serialises insertions; scans take no lock

unsigned find(expire_callback fn, unsigned count) noexcept {
  for (unsigned i = 1; i < count; ++i)
    if (expire_table[i].load(std::memory_order_relaxed) == fn) return i;
  return 0;
}

}  // namespace

std::uint8_t register_expire_callback(expire_callback fn) noexcept {
  if (fn == nullptr) return 0;
  if (const unsigned i = find(fn, registered.load(std::memory_order_acquire)); i != 0)
    return static_cast<std::uint8_t>(i);
  const std::lock_guard lock(insert_mutex);
  const unsigned count = registered.load(std::memory_order_relaxed);  // stable under the lock
  if (const unsigned i = find(fn, count); i != 0) return static_cast<std::uint8_t>(i);
  if (count == expire_table_size) {
    std::fputs(
        "cogwheel: more than 255 distinct timer_node expiry callbacks registered; "
        "the node stores its callback as a 1-byte index\n",
        stderr);
    std::abort();
  }
  expire_table[count].store(fn, std::memory_order_relaxed);
  registered.store(count + 1, std::memory_order_release);
  return static_cast<std::uint8_t>(count);
}

}  // namespace cogwheel::timer::detail
