// expiry_index: an expiry_map's key index, open addressing with linear probing over 8-byte
// slots. A slot holds an entry's slab index + 1 (0: empty) in its low half and the high 32 bits
// of the key's mixed hash in its high half. The hash bits do two jobs: a probe compares them
// before it touches an entry (most mismatches cost no cache miss), and they give a slot's home
// position back (the top `bits` of them), so deletion shifts later slots back without hashing
// a key again and no tombstone is ever left.
//
// Load stays at most 3/4 (the table doubles past it), so a key costs 8 / load bytes: 10.7 to
// 21.3, 13.4 at 10^7 keys (2^24 slots).
//
// Threading: one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace cogwheel::detail {

class expiry_index {
 public:
  using slot_t = std::uint64_t;
  static constexpr std::uint32_t none = ~std::uint32_t{0};

  expiry_index() = default;
  expiry_index(const expiry_index&) = delete;
  expiry_index& operator=(const expiry_index&) = delete;

  // Spreads a key's hash (std::hash of an integer is the identity) over 64 bits.
  static std::uint64_t mix(std::uint64_t h) noexcept {
    h ^= h >> 32;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
  }
  static std::uint32_t tag_of(std::uint64_t mixed) noexcept { return static_cast<std::uint32_t>(mixed >> 32); }

  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return mask_ + (slots_ ? 1 : 0); }

  // Makes room for one more key (may rehash: positions found before are stale).
  void reserve_one() {
    if ((size_ + 1) * 4 > capacity() * 3) grow();
  }

  // Probes for the key with hash tag `tag`; `matches(id)` compares the entry's key. Returns the
  // position holding it, or (with found = false) the empty position where it would go.
  template <class Matches>
  std::size_t probe(std::uint32_t tag, bool& found, Matches&& matches) const {
    found = false;
    if (slots_ == nullptr) return 0;
    std::size_t pos = home(tag);
    for (;;) {
      const slot_t s = slots_[pos];
      if (s == 0) return pos;
      if (static_cast<std::uint32_t>(s >> 32) == tag && matches(static_cast<std::uint32_t>(s) - 1)) {
        found = true;
        return pos;
      }
      pos = (pos + 1) & mask_;
    }
  }

  // The entry index at a position probe() found.
  std::uint32_t id_at(std::size_t pos) const noexcept { return static_cast<std::uint32_t>(slots_[pos]) - 1; }

  // Fills the empty position probe() returned. Precondition: reserve_one() since that probe.
  void place(std::size_t pos, std::uint32_t tag, std::uint32_t id) noexcept {
    slots_[pos] = (slot_t{tag} << 32) | (slot_t{id} + 1);
    ++size_;
  }

  // Empties a position probe() found, shifting back the slots that probed past it.
  void remove_at(std::size_t pos) noexcept {
    std::size_t hole = pos;
    std::size_t next = (pos + 1) & mask_;
    for (;;) {
      const slot_t s = slots_[next];
      if (s == 0) break;
      const std::size_t h = home(static_cast<std::uint32_t>(s >> 32));
      // s may move into the hole when its home is not in (hole, next] (cyclically).
      if (((next - h) & mask_) >= ((next - hole) & mask_)) {
        slots_[hole] = s;
        hole = next;
      }
      next = (next + 1) & mask_;
    }
    slots_[hole] = 0;
    --size_;
  }

  // Calls f(id) for every entry index (for the owner's destructor).
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < capacity(); ++i)
      if (slots_[i] != 0) f(static_cast<std::uint32_t>(slots_[i]) - 1);
  }

  // Bytes of the slot array.
  std::size_t bytes() const noexcept { return capacity() * sizeof(slot_t); }

 private:
  std::size_t home(std::uint32_t tag) const noexcept { return bits_ == 0 ? 0 : tag >> (32 - bits_); }

  void grow() {
    const unsigned bits = slots_ == nullptr ? 4 : bits_ + 1;
    if (bits > 32) throw std::bad_alloc();
    const std::size_t cap = std::size_t{1} << bits;
    std::unique_ptr<slot_t[]> next(new slot_t[cap]());
    const std::size_t old_cap = capacity();
    std::unique_ptr<slot_t[]> old = std::move(slots_);
    slots_ = std::move(next);
    bits_ = bits;
    mask_ = cap - 1;
    for (std::size_t i = 0; i < old_cap; ++i) {
      const slot_t s = old[i];
      if (s == 0) continue;
      std::size_t pos = home(static_cast<std::uint32_t>(s >> 32));
      while (slots_[pos] != 0) pos = (pos + 1) & mask_;
      slots_[pos] = s;
    }
  }

  std::unique_ptr<slot_t[]> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  unsigned bits_ = 0;
};

}  // namespace cogwheel::detail
