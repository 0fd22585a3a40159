// The process-wide table of expiry callbacks: a timer_node stores a 1-byte index into it instead
// of an 8-byte function pointer, which makes the node 16 bytes (a pending timer on the wheel
// costs the node plus one 8-byte slot entry: 24 bytes instead of 32).
//
// Invariants: entry 0 is null (a node without a callback); entries 1..count-1 are distinct
// non-null callbacks, each written once and never changed or removed, so an index read from a
// node always names the callback that was registered for it. At most 255 callbacks per process:
// registering a 256th aborts with a message (the runtime uses a handful; each distinct function
// passed to timer_node counts once, however many nodes use it).
//
// Threads: registration is thread-safe (a lock-free scan of the entries published so far, then a
// mutex for an insertion). An entry is published with release on the count and read with
// acquire, so any thread that obtained an index from register_expire_callback() - or from a
// thread that did, through whatever hand-off gave it the node - sees the entry; the expiry path
// therefore loads it relaxed (a plain load; the table is 2 KiB and hot in L1).
//
// One registry per process as long as the timer library is linked once (as for any library with
// process-wide state): nodes must not travel between two copies of it.
#pragma once

#include <atomic>
#include <cstdint>

namespace cogwheel::timer {
class timer_node;
}

namespace cogwheel::timer::detail {

using expire_callback = void (*)(timer_node&) noexcept;

inline constexpr unsigned expire_table_size = 256;  // indexes fit the node's one byte

extern std::atomic<expire_callback> expire_table[expire_table_size];

// The index of `fn`, registering it on first sight; 0 for null. Aborts with a message if a 256th
// distinct callback would be registered.
std::uint8_t register_expire_callback(expire_callback fn) noexcept;

// The index of a callback known at compile time: registered once per callback, then a
// function-local static (the construction path pays one guard test, not a scan). Null is told
// apart by the specialization below, not by comparing F with nullptr: under
// -fsanitize=undefined g++ 12 does not fold a function pointer's comparison with null into a
// constant expression, so `if constexpr (F == nullptr)` does not compile there.
template <expire_callback F>
inline std::uint8_t expire_index() noexcept {
  static const std::uint8_t index = register_expire_callback(F);
  return index;
}

template <>
inline std::uint8_t expire_index<nullptr>() noexcept {
  return 0;
}

// The callback of an index returned above (null for 0).
inline expire_callback expire_callback_at(std::uint8_t index) noexcept {
  return expire_table[index].load(std::memory_order_relaxed);
}

}  // namespace cogwheel::timer::detail
