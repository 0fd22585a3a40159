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

static_assert(level_count == 11);
static_assert(level_for(0, 1) == 0 && level_for(0, 63) == 0 && level_for(0, 64) == 1);
static_assert(level_for(63, 64) == 1 && level_for(64, 127) == 0);
static_assert(level_for(0, ~std::uint64_t{0}) == 10);
static_assert(slot_for(64, 1) == 1 && slot_for(65, 0) == 1 && slot_for(4096, 2) == 1);
static_assert(level_start(4100, 0) == 4096 && level_start(4100, 1) == 4096);
static_assert(level_start(~std::uint64_t{0}, 10) == 0);

}  // namespace cogwheel::timer::detail
