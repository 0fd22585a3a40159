/// @file
/// cancel_log: a timer_wheel's cancels of filed nodes, not yet applied to their slots.
///
/// cancel() of a filed node touches only the node and a log: (slot, index) is logged, and the
/// slot's live count, its occupancy bit and the write that turns its entry into a hole are
/// applied in a batch before anything reads or adds slot entries or live counts again (filing,
/// advance, next_deadline(), destruction). At a million timers the entry is a cache miss that
/// depends on the node's own miss; batched, the misses overlap, and the cancel itself leaves
/// few instructions between one node's miss and the next (docs/timer.md, "The cancel log").
///
/// This is the log. The wheel appends to it (unlink()), applies it (flush_cancels()) and puts a
/// replaced timeout back into its last entry (requeue(), with last_unlinked_, the wheel's member
/// right after it). The fields are declared in the order, and at the place in timer_wheel, that
/// they had as the wheel's own members, so the wheel's layout is unchanged; the append stays
/// in the wheel (unlink()), inlined into cancel(), not a member function here. Not thread-safe:
/// the wheel's thread.
#pragma once

#include <array>
#include <cstdint>

namespace cogwheel::timer::detail {

// A cancelled node's entry: index `pos` of wheel slot `slot`.
struct cancelled_entry {
  std::uint32_t pos;
  std::uint16_t slot;
};

// Invariants, kept between the wheel's calls: entries[0, count) are the cancels not yet applied,
// oldest first; each names a slot entry that still holds its node's pointer (not a hole) and is
// still counted in that slot's live count; count < capacity (the wheel applies the log when an
// append fills it). The node may since have been filed elsewhere or destroyed: the flush turns
// the entries into holes by index and never reads the pointers.
struct cancel_log {
  static constexpr std::uint32_t capacity = 256;

  std::uint32_t count = 0;
  std::array<cancelled_entry, capacity> entries;

  bool full() const noexcept { return count == capacity; }
};

}  // namespace cogwheel::timer::detail
