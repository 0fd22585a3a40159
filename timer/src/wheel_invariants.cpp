// timer_wheel::invariant_violation(): the wheel's invariants, checked rather than only stated.
// The rules are numbered (I1-I12) at the top of wheel.hpp; each check below says which it is.
// The differential tests call it after every batch of operations (every advance()), the fuzzer
// after every advance() as well.
#include <cogwheel/timer/wheel.hpp>

#include <algorithm>
#include <limits>
#include <vector>

namespace cogwheel::timer {

using detail::level_count;
using detail::slots_per_level;

const char* timer_wheel::invariant_violation() const noexcept {
  // I12, I6 and I8's capacities: between calls.
  if (advancing_) return "checked from inside advance()";
  if (!batch_.empty()) return "the expiry batch is not empty between advances";
  if (scratch_.size != 0 || scratch_.live != 0 || scratch_.cap != 0)
    return "the scratch slot holds entries between advances";
  if (cancels_.count >= detail::cancel_log::capacity)
    return "the cancel log is full and was not applied";

  // I6. Logged cancels: a filed slot's entry that still points at a node which has left (it may be
  // destroyed already, so it is never dereferenced) and that its slot's live count still counts,
  // applied before anything files, advances or reads the slots again.
  std::vector<std::pair<std::uint16_t, std::uint32_t>> logged;
  for (std::uint32_t i = 0; i < cancels_.count; ++i) {
    const detail::cancelled_entry c = cancels_.entries[i];
    if (c.slot > overdue_slot) return "a cancel of a staged node was logged";
    if (c.slot < overdue_slot && levels_[c.slot / slots_per_level] == nullptr)
      return "a cancel was logged in a level that has no slots";
    const slot& sl = slot_at(c.slot);
    if (c.pos >= sl.size) return "a logged cancel points beyond its slot's entries";
    if (detail::is_hole(const_cast<slot&>(sl).at(c.pos))) return "a logged cancel points at a hole";
    logged.emplace_back(c.slot, c.pos);
  }
  std::sort(logged.begin(), logged.end());
  if (std::adjacent_find(logged.begin(), logged.end()) != logged.end())
    return "one slot entry was logged as cancelled twice";

  for (unsigned level = 0; level < level_count; ++level) {  // I12: the slots to visit
    unsigned big = 0;
    if (levels_[level] != nullptr)
      for (unsigned s = 0; s < slots_per_level; ++s) big += levels_[level][s].size >= visit_min_live_ ? 1 : 0;
    if (big != big_slots_[level]) return "a level's count of slots to visit disagrees with its slots";
    if (((big_levels_ >> level & 1) != 0) != (level > 0 && big > 0))
      return "a level's bit of levels to visit disagrees with its slots";
  }
  std::size_t live_total = 0;
  std::size_t blocks_in_use = 0;
  std::optional<tick_t> earliest_start;
  if (levels_[level_count] != &overdue_) return "the overdue list is not the last level's slot";
  for (std::uint16_t id = 0; id <= overdue_slot; ++id) {
    if (id < overdue_slot && levels_[id / slots_per_level] == nullptr) {
      if (occupied_[id / slots_per_level] != 0) return "a level without slots has occupancy bits";
      continue;
    }
    slot& sl = const_cast<slot&>(slot_at(id));
    // I3, I5. Arrays: one of 8..256 entries, else a table (a power of two of pointers) and its blocks.
    const std::uint32_t cap = sl.cap;
    if (cap != 0 && (cap < detail::first_entries_min ||
                     (cap <= detail::block_entries ? (cap & (cap - 1)) != 0 : cap % detail::block_entries != 0)))
      return "a slot's capacity is not one its arrays can have";
    if ((sl.table == &sl.first) != (cap <= detail::block_entries))
      return "a slot's table is not its first array exactly when it has one array";
    blocks_in_use += cap <= detail::block_entries ? (cap != 0 ? 1 : 0) : sl.block_count() + 1;
    if (sl.size > cap) return "a slot holds more entries than its arrays";
    if (sl.size == 0 && cap != 0) return "an empty slot kept its arrays";
    if (cap > detail::first_entries_min && sl.size <= cap / 2 && cap <= detail::block_entries)
      return "a slot's first array is larger than its entries need";
    if (cap > detail::block_entries && sl.size <= cap - detail::block_entries)
      return "a slot has a block beyond its entries";
    if (sl.live > sl.size) return "a slot counts more live nodes than entries";
    live_total += sl.live;

    const bool wheel_slot = id < wheel_slots;
    const unsigned level = id / slots_per_level;
    const unsigned index = id % slots_per_level;
    tick_t start = 0;
    tick_t due = 0;
    if (wheel_slot) {
      const bool bit = (occupied_[level] >> index & 1) != 0;  // I4
      if (bit != (sl.live > 0)) return "an occupancy bit disagrees with its slot's live count";
      const unsigned ahead = detail::ring_ahead(elapsed_, level, index);
      start = detail::ring_start(elapsed_, level, ahead);
      if (sl.live > 0) {
        // I3. The own slot (ahead 0) may be occupied: elapsed_ is then inside its span, before its
        // due tick. Every other occupied slot starts after elapsed_.
        if (ahead != 0 && start <= elapsed_) return "an occupied slot starts at or behind the wheel's time";
        due = sl.due;
        if (due < start || due - start >= detail::slot_span(level)) return "a slot's due tick lies outside its span";
        if (due <= elapsed_) return "an occupied slot comes due at or behind the wheel's time";
        if (!earliest_start || due < *earliest_start) earliest_start = due;
      } else if (sl.due != ~tick_t{0}) {
        return "an empty slot kept a due tick";
      }
    }
    if (sl.live == 0 && sl.size != 0)
      return "an empty slot kept entries";
    if (sl.size == 0) {
      if (sl.hole != detail::no_hole) return "an empty slot has a hole";
      continue;
    }
    const auto here = std::equal_range(logged.begin(), logged.end(), std::make_pair(id, 0u),
                                       [](const auto& a, const auto& b) { return a.first < b.first; });

    // I4. Holes: a stack threaded through the entries, every index in range, no cycle.
    std::uint32_t holes = 0;
    for (std::uint32_t h = sl.hole; h != detail::no_hole; h = detail::next_hole(sl.at(h))) {
      if (h >= sl.size) return "a hole index is out of range";
      if (!detail::is_hole(sl.at(h))) return "the hole stack reaches a live entry";
      if (++holes > sl.size) return "the hole stack has a cycle";
    }
    std::uint32_t pointers = 0;
    std::uint32_t hole_entries = 0;
    for (std::uint32_t i = 0; i < sl.size; ++i) {
      timer_node* n = sl.at(i);
      if (detail::is_hole(n)) {
        ++hole_entries;
        continue;
      }
      ++pointers;
      if (std::binary_search(here.first, here.second, std::make_pair(id, i))) continue;
      // I1, I2.
      if (n->state_ != timer_node::state::queued) return "a slot entry's node is not queued";
      if (n->slot_ != id || n->pos_ != i) return "a node's slot and index do not round-trip";
      if (wheel_slot) {
        if (n->tick_ <= elapsed_) return "a filed node's deadline is at or behind the wheel's time";
        if (n->tick_ < start) return "a node is filed in a slot that starts after its deadline";
        if (n->tick_ < due) return "a node is filed in a slot that comes due after its deadline";
      }
    }
    if (hole_entries != holes) return "a hole is missing from its slot's hole stack";
    if (pointers != sl.live) return "a slot's live count disagrees with its entries (logged cancels included)";
  }
  // I8, I1 for staged nodes.
  if (staged_.count >= detail::staging_area::capacity)
    return "the staging area is full and was not filed";
  for (std::uint32_t i = 0; i < staged_.count; ++i) {
    const timer_node* n = staged_.nodes[i];
    if (n->state_ != timer_node::state::queued || n->slot_ != staged_slot || n->pos_ != i)
      return "a staged node's state, slot or index does not round-trip";
    if (n->tick_ < staged_.min) return "a staged deadline is below the staging bound";
  }
  live_total += staged_.count;  // I5
  live_total -= cancels_.count;  // counted in their slots' live counts until the flush
  if (live_total != size_) return "size() disagrees with the slots' live counts";
  if (pool_.allocated() != blocks_in_use + pool_.free_count())
    return "the block pool lost or duplicated a block";

  // I9. The O(1) path of advance() compares times with fast_before_, the first instant of next_work_.
  if (fast_limit_ != first_instant(next_work_)) return "fast_limit_ is not next_work_'s first instant";
  if (fast_before_ > fast_limit_) return "fast_before_ is above fast_limit_";
  if (fast_before_ > first_instant(staged_.min))
    return "advance() would take the O(1) path at a staged deadline";
  if (current_tick() != elapsed_ && latest_ >= fast_limit_)
    return "advance() skipped a time at or after next_work_";
  // The O(1) path of advance() may skip ticks before next_work_ only if nothing is due there.
  if (overdue_.live > 0 && next_work_ > elapsed_ && staged_.count == 0)
    return "a timer is overdue but advance() would take the O(1) path";
  if (earliest_start && next_work_ > *earliest_start && staged_.count == 0)
    return "advance() would skip a slot that comes due";
  // I10.
  if (next_due_known_ && earliest_start && next_due_ > *earliest_start)
    return "next_deadline() would report a time after a slot comes due";
  // I11. file_now() files at or after file_now_from_ without recomputing any bound: it must lower none.
  if (file_now_from_ <= elapsed_) return "a replaced timeout could be filed at or behind the wheel's time";
  if (file_now_from_ < next_work_) return "a replaced timeout could be filed before next_work_";
  if (next_due_known_ && file_now_from_ < next_due_)
    return "a replaced timeout could be filed before the slot next_deadline() reports";
  return nullptr;
}

}  // namespace cogwheel::timer
