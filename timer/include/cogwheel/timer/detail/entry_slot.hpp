// The storage of one timer_wheel slot: an array of node pointers that grows with the slot, from
// a pool of arrays per wheel.
//
// A slot of up to 256 entries is one array of 8, 16, ... 256 entries (the smallest that holds
// them; it doubles by copying, at most 2 KiB). Beyond that the entries sit in blocks of 256
// (2 KiB), reached through a table of block pointers whose first block is that first array.
// So a slot with one timer holds 64 bytes, not a 2 KiB block, and a slot of a million timers
// never copies its entries: past 256, growing adds a block (and at most doubles the table).
// Either way an entry's index never changes (the hole stack, the cancel log and every node's
// pos_ rely on it); only the first array's address does, while it is below 256 entries.
//
// Arrays come from, and go back to, one pool per wheel, by power-of-two size: in steady state a
// wheel allocates nothing, and the memory it holds follows the pending timers (the pool keeps
// every array it ever allocated, for the next slot that needs one).
//
// A hole is an odd value: (index of the next hole << 1) | 1. Node pointers are even.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <cogwheel/timer/node.hpp>

namespace cogwheel::timer::detail {

inline constexpr unsigned block_bits = 8;
inline constexpr std::uint32_t block_entries = std::uint32_t{1} << block_bits;
inline constexpr std::uint32_t first_entries_min = 8;  // the smallest array a slot holds

// Arrays of 2^k pointers, k < pool_classes (a slot's table of blocks reaches 2^24 pointers:
// 2^32 entries). Each class keeps its free arrays in a list threaded through their first word,
// so giving an array back never allocates; but free 2 KiB blocks are listed inside free blocks
// ("carriers": the next carrier, a count, then up to 254 free blocks' addresses), so that giving
// back the hundreds of blocks of a crowded slot writes a carrier per 254 blocks, not every block
// (threaded one by one, each block would be a cache miss, and a visit that empties a crowded
// slot gives them all back inside one advance()). Keeps every array it ever allocated until
// destroyed.
class block_pool {
 public:
  static constexpr unsigned pool_classes = 25;

  block_pool() = default;
  block_pool(const block_pool&) = delete;
  block_pool& operator=(const block_pool&) = delete;
  ~block_pool() {
    while (carrier_ != nullptr) {
      void** const c = carrier_;
      carrier_ = static_cast<void**>(c[0]);
      for (std::uintptr_t i = 0; i < carried(c); ++i) delete[] static_cast<void**>(c[carrier_head + i]);
      delete[] c;
    }
    for (void*& head : free_)
      while (head != nullptr) {
        void* next = *static_cast<void**>(head);
        delete[] static_cast<void**>(head);
        head = next;
      }
  }

  // An array of 2^k pointers (uninitialised).
  void** take(unsigned k) {
    if (k == block_bits) return take_block();
    void* head = free_[k];
    if (head == nullptr) {
      ++allocated_[k];
      return new void*[std::size_t{1} << k];
    }
    free_[k] = *static_cast<void**>(head);
    --free_count_[k];
    return static_cast<void**>(head);
  }

  void give(void** a, unsigned k) noexcept {
    ++free_count_[k];
    if (k == block_bits) {
      give_block(a);
      return;
    }
    *a = free_[k];
    free_[k] = a;
  }

  // Arrays allocated and arrays free, over every class (the invariant check: allocated equals
  // free plus those slots hold).
  std::size_t allocated() const noexcept { return sum(allocated_); }
  std::size_t free_count() const noexcept { return sum(free_count_); }
  std::size_t memory_bytes() const noexcept {
    std::size_t bytes = 0;
    for (unsigned k = 0; k < pool_classes; ++k) bytes += allocated_[k] * (sizeof(void*) << k);
    return bytes;
  }

 private:
  // A carrier: word 0 the next carrier, word 1 how many blocks it lists, then their addresses.
  static constexpr std::uintptr_t carrier_head = 2;
  static constexpr std::uintptr_t carrier_room = (std::uintptr_t{1} << block_bits) - carrier_head;
  static std::uintptr_t carried(void* const* c) noexcept { return reinterpret_cast<std::uintptr_t>(c[1]); }

  // Lists block b in the first carrier, or makes it the first carrier when that one is full.
  void give_block(void** b) noexcept {
    void** const c = carrier_;
    if (c != nullptr && carried(c) < carrier_room) {
      const std::uintptr_t n = carried(c);
      c[carrier_head + n] = b;
      c[1] = reinterpret_cast<void*>(n + 1);
      return;
    }
    b[0] = c;
    b[1] = nullptr;  // lists none
    carrier_ = b;
  }
  // The last block the first carrier lists, or the carrier itself when it lists none.
  void** take_block() {
    void** const c = carrier_;
    if (c == nullptr) {
      ++allocated_[block_bits];
      return new void*[block_entries];
    }
    --free_count_[block_bits];
    const std::uintptr_t n = carried(c);
    if (n > 0) {
      c[1] = reinterpret_cast<void*>(n - 1);
      return static_cast<void**>(c[carrier_head + n - 1]);
    }
    carrier_ = static_cast<void**>(c[0]);
    return c;
  }
  static std::size_t sum(const std::uint32_t (&a)[pool_classes]) noexcept {
    std::size_t s = 0;
    for (const std::uint32_t v : a) s += v;
    return s;
  }
  void* free_[pool_classes] = {};  // the lists of each class but block_bits
  std::uint32_t allocated_[pool_classes] = {};
  std::uint32_t free_count_[pool_classes] = {};
  void** carrier_ = nullptr;  // the first carrier of free blocks
};

inline constexpr std::uint32_t no_hole = ~std::uint32_t{0};

inline bool is_hole(const timer_node* p) noexcept {
  return (reinterpret_cast<std::uintptr_t>(p) & 1) != 0;
}
inline timer_node* hole_linking(std::uint32_t next) noexcept {
  return reinterpret_cast<timer_node*>((std::uintptr_t{next} << 1) | 1);
}
inline std::uint32_t next_hole(const timer_node* hole) noexcept {
  return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(hole) >> 1);
}

// 40 bytes. cap is the entries the slot can hold without growing: 0 (no array), 8..256 (`first`
// is the one array), or a multiple of 256 above it (`table` is an array of cap / 256 blocks, its
// size the next power of two). Either way entry i is table[i / 256][i % 256]: with at most 256
// entries, `table` points at `first`, so no access branches on the slot's size (flush_cancels()
// looks an entry up per cancel). Not copyable (table may point into it):
// detach() moves.
struct entry_slot {
  timer_node** first = nullptr;
  timer_node*** table = &first;
  std::uint32_t size = 0;         // entries in use: live nodes and holes
  std::uint32_t live = 0;         // live entries; the wheel's bitmap bit is set iff live > 0
  std::uint32_t hole = no_hole;   // the most recent hole, reused first
  std::uint32_t cap = 0;
  // When the slot comes due: the least deadline tick filed into it since it was last empty (~0
  // while empty). The wheel lowers it at each filing. Invariant: at or after the slot's first
  // tick (every filing lies in the slot's span) and at or before every live node's deadline
  // (cancels and lazy pushes leave it lower, never higher), so nothing in the slot is due before.
  tick_t due = ~tick_t{0};

  entry_slot() = default;
  entry_slot(const entry_slot&) = delete;
  entry_slot& operator=(const entry_slot&) = delete;

  // The entries of block b (< block_count()): [b * 256, b * 256 + 256) as far as size reaches.
  timer_node** block(std::uint32_t b) const noexcept { return table[b]; }
  std::uint32_t block_count() const noexcept {
    return cap == 0 ? 0 : cap <= block_entries ? 1 : cap >> block_bits;
  }

  timer_node*& at(std::uint32_t i) noexcept { return table[i >> block_bits][i & (block_entries - 1)]; }

  // add() without its rare cases, for the wheel's re-filing loop: when the slot has no hole to
  // reuse, has room and the append does not make size equal to watch_size, appends n and
  // returns its index; otherwise changes nothing and returns no_hole (then use add()).
  // Separate from add(), whose hole-first order churn's filing needs: routing add() through it
  // would put this path's extra test on every filing.
  std::uint32_t try_append(timer_node* n, std::uint32_t watch_size) noexcept {
    const std::uint32_t i = size;
    if (hole != no_hole || i == cap || i + 1 == watch_size) return no_hole;
    ++live;
    size = i + 1;
    at(i) = n;
    return i;
  }

  // Stores n in a hole or a new entry and returns its index; calls on_size() when an append
  // makes size equal to watch_size (a hole reused never grows size).
  template <class OnSize>
  std::uint32_t add(timer_node* n, block_pool& pool, std::uint32_t watch_size, OnSize&& on_size) {
    ++live;
    if (hole != no_hole) {
      const std::uint32_t i = hole;
      timer_node*& e = at(i);
      hole = next_hole(e);
      e = n;
      return i;
    }
    if (size == cap) grow(pool);
    const std::uint32_t i = size++;
    at(i) = n;
    if (size == watch_size) on_size();
    return i;
  }

  void make_hole(std::uint32_t i) noexcept {
    at(i) = hole_linking(hole);
    hole = i;
  }

  // Empties the slot and returns its arrays to the pool.
  void release(block_pool& pool) noexcept {
    if (cap > block_entries) {
      const std::uint32_t blocks = cap >> block_bits;
      for (std::uint32_t b = 0; b < blocks; ++b) pool.give(reinterpret_cast<void**>(table[b]), block_bits);
      pool.give(reinterpret_cast<void**>(table), table_class(blocks));
    } else if (cap != 0) {
      pool.give(reinterpret_cast<void**>(first), static_cast<unsigned>(std::countr_zero(cap)));
    }
    reset();
  }

  // Moves the slot's entries to `into` (which must be empty) and leaves the slot empty.
  void detach(entry_slot& into) noexcept {
    into.first = first;
    into.table = cap > block_entries ? table : &into.first;
    into.size = size;
    into.live = live;
    into.hole = no_hole;
    into.cap = cap;
    reset();
  }

  // Calls f(node) for every live entry, in index order.
  template <class F>
  void for_each(F&& f) {
    for (std::uint32_t b = 0; b * block_entries < size; ++b) {
      const std::uint32_t count = size - b * block_entries < block_entries ? size - b * block_entries
                                                                            : block_entries;
      timer_node** e = block(b);
      for (std::uint32_t i = 0; i < count; ++i)
        if (!is_hole(e[i])) f(e[i]);
    }
  }

 private:
  // The pool class of a table of `blocks` block pointers (>= 2): the next power of two.
  static unsigned table_class(std::uint32_t blocks) noexcept {
    return static_cast<unsigned>(std::bit_width(blocks - 1));
  }

  void reset() noexcept {
    first = nullptr;
    table = &first;
    size = 0;
    live = 0;
    hole = no_hole;
    cap = 0;
    due = ~tick_t{0};
  }

  // Makes room for one more entry (size == cap).
  void grow(block_pool& pool) {
    if (cap == 0) {
      first = reinterpret_cast<timer_node**>(pool.take(static_cast<unsigned>(std::countr_zero(first_entries_min))));
      cap = first_entries_min;
    } else if (cap < block_entries) {  // the first array doubles, by copying
      const auto k = static_cast<unsigned>(std::countr_zero(cap));
      void** bigger = pool.take(k + 1);
      std::memcpy(bigger, first, cap * sizeof(void*));
      pool.give(reinterpret_cast<void**>(first), k);
      first = reinterpret_cast<timer_node**>(bigger);
      cap *= 2;
    } else {  // one more block of 256; the table doubles when full
      const std::uint32_t blocks = cap >> block_bits;
      timer_node*** t;
      if (blocks == 1) {
        t = reinterpret_cast<timer_node***>(pool.take(1));
        t[0] = first;
      } else if ((blocks & (blocks - 1)) == 0) {
        t = reinterpret_cast<timer_node***>(pool.take(table_class(blocks) + 1));
        std::memcpy(t, table, blocks * sizeof(void*));
        pool.give(reinterpret_cast<void**>(table), table_class(blocks));
      } else {
        t = table;
      }
      t[blocks] = reinterpret_cast<timer_node**>(pool.take(block_bits));
      table = t;
      cap += block_entries;
    }
  }
};

}  // namespace cogwheel::timer::detail
