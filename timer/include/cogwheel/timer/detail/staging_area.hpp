/// @file
/// staging_area: the nodes a timer_wheel has scheduled but not yet filed into a slot.
///
/// schedule() only stages a node (an append to an array of 256); staged nodes are filed into
/// their slots by the first advance() that reaches the earliest staged deadline or finds a slot
/// due, or when 256 have accumulated. A timeout scheduled and cancelled before then, the common
/// case, so never touches a wheel slot, and an advance() after a schedule() stays O(1).
///
/// This is the array and its bound. The wheel stages and unstages (stage(), unstage(): they
/// write the node's fields too), files the area (file_staged()) and keeps the O(1) advance()
/// bound that `min` lowers. The fields are declared in the order, and at the place in
/// timer_wheel, that they had as the wheel's own members, so the wheel's layout is unchanged;
/// stage and unstage stay in the wheel, not member functions here, so they inline into the
/// wheel's schedule and cancel paths as before. Not thread-safe: the wheel's thread.
#pragma once

#include <array>
#include <cstdint>

#include <cogwheel/timer/node.hpp>

namespace cogwheel::timer::detail {

// Invariants, kept between the wheel's calls: the staged nodes are nodes[0, count), densely;
// staged node i has state queued, the wheel's staged slot id and pos_ == i; count < capacity
// (the wheel files the area when a stage fills it); min <= every staged node's deadline tick.
struct staging_area {
  static constexpr std::uint32_t capacity = 256;

  std::uint32_t count = 0;
  // [0, count) are the staged nodes; the rest keep stale pointers (file_staged() reads its
  // nodes after setting count to 0).
  std::array<timer_node*, capacity> nodes;
  // <= every staged deadline: a bound, as unstaging does not raise it. ~0 when the wheel resets
  // it (after filing, or when it finds the area empty).
  tick_t min = ~tick_t{0};

  bool full() const noexcept { return count == capacity; }
};

}  // namespace cogwheel::timer::detail
