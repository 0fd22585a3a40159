// The storage of one timer_wheel slot: node pointers in fixed blocks of 256 entries (2 KiB)
// taken from and returned to one pool per wheel.
//
// Why blocks and not a vector per slot: a vector that doubles copies all its entries and, past
// a few hundred KiB, faults in fresh pages: at a million timers one push_back into a 4 s slot
// took 1-1.5 ms. A block is taken from the pool in O(1), entries never move (a node's index
// stays valid, the hole stack and the cancel log rely on it), and blocks freed by one slot are
// reused by the next, so in steady state a wheel allocates nothing and the memory it holds
// follows the total of pending timers, not the sum of every slot's peak.
//
// A hole is an odd value: (index of the next hole << 1) | 1. Node pointers are even.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cogwheel/timer/node.hpp>

namespace cogwheel::timer::detail {

inline constexpr unsigned block_bits = 8;
inline constexpr std::uint32_t block_entries = std::uint32_t{1} << block_bits;

struct entry_block {
  timer_node* entries[block_entries];
};

// Blocks not in use by any slot. Keeps every block it ever allocated until destroyed.
class block_pool {
 public:
  block_pool() = default;
  block_pool(const block_pool&) = delete;
  block_pool& operator=(const block_pool&) = delete;
  ~block_pool() {
    for (entry_block* b : free_) delete b;
  }

  entry_block* take() {
    if (free_.empty()) {
      // Room for every block to come back, so give() never allocates.
      if (free_.capacity() < allocated_ + 1) free_.reserve(2 * (allocated_ + 1));
      auto* b = new entry_block;
      ++allocated_;
      return b;
    }
    entry_block* b = free_.back();
    free_.pop_back();
    return b;
  }

  void give(entry_block* b) noexcept { free_.push_back(b); }

  std::size_t allocated() const noexcept { return allocated_; }
  std::size_t free_count() const noexcept { return free_.size(); }
  std::size_t memory_bytes() const noexcept {
    return allocated_ * sizeof(entry_block) + free_.capacity() * sizeof(entry_block*);
  }

 private:
  std::vector<entry_block*> free_;
  std::size_t allocated_ = 0;
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

struct entry_slot {
  std::vector<entry_block*> blocks;  // capacity kept once grown
  std::uint32_t size = 0;            // entries in use: live nodes and holes
  std::uint32_t live = 0;            // live entries; the wheel's bitmap bit is set iff live > 0
  std::uint32_t hole = no_hole;      // the most recent hole, reused first

  timer_node*& at(std::uint32_t i) noexcept {
    return blocks[i >> block_bits]->entries[i & (block_entries - 1)];
  }

  // add() without its rare cases, for the wheel's re-filing loop: when the slot has no hole to
  // reuse, its last block has room and the append does not make size equal to watch_size,
  // appends n and returns its index; otherwise changes nothing and returns no_hole (then use
  // add()). Separate from add(), whose hole-first order churn's filing needs: routing add()
  // through it cost churn ~1.7 and expire at 1e3 ~40 instructions (timer_instructions).
  std::uint32_t try_append(timer_node* n, std::uint32_t watch_size) noexcept {
    const std::uint32_t i = size;
    if (hole != no_hole || (i & (block_entries - 1)) == 0 || i + 1 == watch_size) return no_hole;
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
    if ((size & (block_entries - 1)) == 0) blocks.push_back(pool.take());  // ceil(size / 256)
    const std::uint32_t i = size++;
    at(i) = n;
    if (size == watch_size) on_size();
    return i;
  }

  void make_hole(std::uint32_t i) noexcept {
    at(i) = hole_linking(hole);
    hole = i;
  }

  // Empties the slot and returns its blocks to the pool.
  void release(block_pool& pool) noexcept {
    for (entry_block* b : blocks) pool.give(b);
    blocks.clear();
    size = 0;
    live = 0;
    hole = no_hole;
  }

  // Moves the slot's entries to `into` (which must be empty) and leaves the slot empty.
  void detach(entry_slot& into) noexcept {
    into.blocks.swap(blocks);
    into.size = size;
    into.live = live;
    blocks.clear();
    size = 0;
    live = 0;
    hole = no_hole;
  }

  // Calls f(node) for every live entry, in index order.
  template <class F>
  void for_each(F&& f) {
    for (std::uint32_t b = 0; b * block_entries < size; ++b) {
      const std::uint32_t count = size - b * block_entries < block_entries ? size - b * block_entries
                                                                            : block_entries;
      timer_node** e = blocks[b]->entries;
      for (std::uint32_t i = 0; i < count; ++i)
        if (!is_hole(e[i])) f(e[i]);
    }
  }

  std::size_t memory_bytes() const noexcept { return blocks.capacity() * sizeof(entry_block*); }
};

}  // namespace cogwheel::timer::detail
