// Index maths of the hierarchical wheel, as pure functions.
//
// Level L has 64 slots of 64^L ticks each and spans 64^(L+1) ticks. Eleven levels cover every
// 64-bit tick (the top level uses only its first 16 slots), so no deadline is ever beyond the
// wheel: at 1 ms per tick level 0 spans 64 ms, level 1 4.1 s, level 2 4.4 min, level 3 4.7 h,
// level 4 12.4 days, level 5 2.2 years, and levels 6..10 the rest of 2^64 ms.
#pragma once

#include <bit>
#include <cstdint>

namespace cogwheel::timer::detail {

inline constexpr unsigned slot_bits = 6;
inline constexpr unsigned slots_per_level = 1u << slot_bits;  // 64: one bitmap word
inline constexpr unsigned level_count = (64 + slot_bits - 1) / slot_bits;  // 11

// The level at which a deadline `when` is filed while the wheel's time is `elapsed`
// (when > elapsed): the level of the highest bit in which they differ.
constexpr unsigned level_for(std::uint64_t elapsed, std::uint64_t when) noexcept {
  const std::uint64_t masked = (elapsed ^ when) | (slots_per_level - 1);
  return static_cast<unsigned>(63 - std::countl_zero(masked)) / slot_bits;
}

// The slot of `when` at `level`.
constexpr unsigned slot_for(std::uint64_t when, unsigned level) noexcept {
  return static_cast<unsigned>(when >> (level * slot_bits)) & (slots_per_level - 1);
}

// Ticks covered by one slot of `level`.
constexpr std::uint64_t slot_span(unsigned level) noexcept {
  return std::uint64_t{1} << (level * slot_bits);
}

// The first tick of the current span of `level` that contains `elapsed`.
constexpr std::uint64_t level_start(std::uint64_t elapsed, unsigned level) noexcept {
  const unsigned shift = (level + 1) * slot_bits;
  return shift >= 64 ? 0 : elapsed & ~((std::uint64_t{1} << shift) - 1);
}

// The ring placement timer_wheel uses (the functions above are the aligned placement of the
// textbook wheel, bench/linked_wheel.hpp). Each level is a ring: a deadline `when` (> elapsed)
// goes to the lowest level at which its slot is fewer than 64 slots ahead of elapsed's slot, at
// index slot_for(when, level). So a deadline 3 s ahead always sits in a 64 ms slot of level 1,
// wherever the 4,096 ms boundaries fall; with the aligned placement a deadline that crosses one
// goes to level 2 and is handled once more when that slot comes due (at 1e6 idle connections,
// ~40% of all the wheel's re-filing, and a million nodes in one advance() every 4 s).
// Slot distance at a level: slot `index` of `level` is ring_ahead() slots after elapsed's.
constexpr unsigned ring_level(std::uint64_t elapsed, std::uint64_t when) noexcept {
  const std::uint64_t delta = when - elapsed;  // >= 1
  // delta in [64^L, 64^(L+1)): the slot distance at L is floor(delta / 64^L) or one more, so
  // 1..64; at 64 the deadline is one slot ahead at L + 1. (The top level's distance is <= 15.)
  unsigned level = static_cast<unsigned>(63 - std::countl_zero(delta | (slots_per_level - 1))) / slot_bits;
  const unsigned shift = level * slot_bits;
  if ((when >> shift) - (elapsed >> shift) >= slots_per_level) [[unlikely]]
    ++level;
  return level;
}

// How many slots slot `index` of `level` lies ahead of elapsed's own slot there (0..63).
constexpr unsigned ring_ahead(std::uint64_t elapsed, unsigned level, unsigned index) noexcept {
  return (index - slot_for(elapsed, level)) & (slots_per_level - 1);
}

// The first tick of the slot `ahead` slots after elapsed's own at `level`.
constexpr std::uint64_t ring_start(std::uint64_t elapsed, unsigned level, unsigned ahead) noexcept {
  const unsigned shift = level * slot_bits;
  return ((elapsed >> shift) + ahead) << shift;
}

// The first tick beyond `level`'s ring while the wheel's time is `elapsed`: ring_level(elapsed,
// when) is the least level L with when < ring_end(elapsed, L), so the deadlines filed at L are
// exactly [ring_end(elapsed, L - 1), ring_end(elapsed, L)) (from elapsed + 1 at level 0). ~0 for
// the top level, whose ring reaches past every tick. What a loop filing many deadlines relative
// to one elapsed uses to test a level with two compares instead of ring_level()'s count of
// leading zeros, multiply and shifts (timer_wheel::visit()).
constexpr std::uint64_t ring_end(std::uint64_t elapsed, unsigned level) noexcept {
  const unsigned shift = level * slot_bits;
  if (shift + slot_bits >= 64) return ~std::uint64_t{0};
  return ((elapsed >> shift) + slots_per_level) << shift;
}

static_assert(level_count == 11);
static_assert(ring_end(0, 0) == 64 && ring_end(100, 0) == 164 && ring_end(100, 1) == 64 * 65);
static_assert(ring_level(100, 163) == 0 && ring_level(100, 164) == 1 && ring_level(100, 64 * 65 - 1) == 1 &&
              ring_level(100, 64 * 65) == 2);
static_assert(ring_end(~std::uint64_t{0} >> 1, 10) == ~std::uint64_t{0});
static_assert(ring_level(0, 1) == 0 && ring_level(0, 63) == 0 && ring_level(0, 64) == 1);
static_assert(ring_level(63, 64) == 0 && ring_level(4095, 4096) == 0 && ring_level(4000, 7000) == 1);
static_assert(ring_level(100, 100 + 64 * 63) == 1 && ring_level(64, 64 * 65) == 2);
static_assert(ring_level(0, ~std::uint64_t{0}) == 10);
static_assert(ring_ahead(4000, 1, 2) == 2 - 62 + 64 && ring_start(4000, 1, 4) == 4224);
static_assert(level_for(0, 1) == 0 && level_for(0, 63) == 0 && level_for(0, 64) == 1);
static_assert(level_for(63, 64) == 1 && level_for(64, 127) == 0);
static_assert(level_for(0, ~std::uint64_t{0}) == 10);
static_assert(slot_for(64, 1) == 1 && slot_for(65, 0) == 1 && slot_for(4096, 2) == 1);
static_assert(level_start(4100, 0) == 4096 && level_start(4100, 1) == 4096);
static_assert(level_start(~std::uint64_t{0}, 10) == 0);

}  // namespace cogwheel::timer::detail
