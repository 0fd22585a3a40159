// expiry_slab: the entries of one expiry_map, in chunks that never move (a timer queue holds the
// address of each entry's timer_node) and a free list threaded through the vacant slots.
//
// Each chunk is `chunk_bytes` long and aligned to `chunk_bytes`, with a header at its start
// naming the slab's owner: an expiring entry finds its map by rounding its own address down
// (owner_of), so no entry carries a pointer back to its map and the one expiry callback per map
// type serves every map of that type. Chunks are mapped with mmap (an aligned mapping: untouched
// pages cost no memory), kept until the slab is destroyed.
//
// Slots are raw storage: the owner constructs an entry in a slot from allocate() and destroys
// it before release(). A vacant slot's first 4 bytes hold the next vacant index.
//
// Threading: one thread (the owning map's loop).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace cogwheel::detail {

template <std::size_t Size, std::size_t Align>
class expiry_slab {
 public:
  static constexpr std::size_t chunk_bytes = std::size_t{256} << 10;
  static_assert(Size >= sizeof(std::uint32_t), "a vacant slot holds the next vacant index");
  static_assert(Align <= 64, "entries aligned to at most a cache line");
  static constexpr std::size_t first_offset = (sizeof(void*) + Align - 1) / Align * Align;
  static constexpr std::uint32_t per_chunk = static_cast<std::uint32_t>((chunk_bytes - first_offset) / Size);
  static_assert(per_chunk >= 1, "an entry larger than a chunk");
  static constexpr std::uint32_t none = ~std::uint32_t{0};

  explicit expiry_slab(void* owner) noexcept : owner_(owner) {}
  expiry_slab(const expiry_slab&) = delete;
  expiry_slab& operator=(const expiry_slab&) = delete;
  ~expiry_slab() {
    for (std::byte* c : chunks_) ::munmap(c, chunk_bytes);
  }

  // The slot of index `id` (vacant or not).
  void* at(std::uint32_t id) const noexcept {
    return chunks_[id / per_chunk] + first_offset + std::size_t{id % per_chunk} * Size;
  }

  // A vacant slot's index: the last released, else the next never used. Throws std::bad_alloc
  // when a chunk cannot be mapped.
  std::uint32_t allocate() {
    if (free_ != none) {
      const std::uint32_t id = free_;
      std::memcpy(&free_, at(id), sizeof free_);
      return id;
    }
    if (used_ == chunks_.size() * per_chunk) add_chunk();
    return used_++;
  }

  // Returns slot `id` (its entry already destroyed) to the free list.
  void release(std::uint32_t id) noexcept {
    std::memcpy(at(id), &free_, sizeof free_);
    free_ = id;
  }

  // The owner given to the slab that holds `slot` (a pointer into one of its chunks).
  static void* owner_of(const void* slot) noexcept {
    const auto base = reinterpret_cast<std::uintptr_t>(slot) & ~(std::uintptr_t{chunk_bytes} - 1);
    void* owner;
    std::memcpy(&owner, reinterpret_cast<const void*>(base), sizeof owner);
    return owner;
  }

  // Bytes mapped for entries (chunks times their size).
  std::size_t mapped_bytes() const noexcept { return chunks_.size() * chunk_bytes; }

 private:
  void add_chunk() {
    if (chunks_.size() >= (std::size_t{none} - 1) / per_chunk) throw std::bad_alloc();
    chunks_.reserve(chunks_.size() + 1);  // before mapping: nothing to undo if it throws
    // Twice the size, then the unaligned ends trimmed: an aligned chunk.
    void* p = ::mmap(nullptr, 2 * chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    const auto raw = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t aligned = (raw + chunk_bytes - 1) & ~(std::uintptr_t{chunk_bytes} - 1);
    if (aligned > raw) ::munmap(p, aligned - raw);
    const std::uintptr_t tail = aligned + chunk_bytes;
    if (raw + 2 * chunk_bytes > tail) ::munmap(reinterpret_cast<void*>(tail), raw + 2 * chunk_bytes - tail);
    auto* chunk = reinterpret_cast<std::byte*>(aligned);
    std::memcpy(chunk, &owner_, sizeof owner_);
    chunks_.push_back(chunk);
  }

  void* owner_;
  std::vector<std::byte*> chunks_;
  std::uint32_t used_ = 0;   // slots handed out at least once (all below are in use or free)
  std::uint32_t free_ = none;
};

}  // namespace cogwheel::detail
