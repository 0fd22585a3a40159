// timer_wheel's replaced timeout: a node cancelled from its slot and scheduled again at once
// (enqueue() finds it is the node cancelled last). Large wheels put it back into the entry it
// left, small ones file it without staging; the definitions of the member functions declared
// in timer_wheel for it, and why each keeps the wheel exact. Included at the end of wheel.hpp,
// to which it belongs (it is not an interface of its own).
#pragma once

#include <cassert>
#include <cstdint>

#include <cogwheel/timer/wheel.hpp>

namespace cogwheel::timer {

// n was the node cancelled last from a filed slot: a replaced timeout (churn). Which way it
// goes depends on the size (put_back_), a branch that is predictable (it changes only when
// the wheel crosses requeue_min_size_). Large wheels: back into its entry (requeue()). Small wheels,
// where entries are in cache and the cost is instructions: filed at once (file_now()), unless
// t lies before file_now_from_, where a filing could lower a bound the O(1) advance() or
// next_deadline() answers from; then it is staged. Returns false when it was neither.
// Keeps I11 (files only at or after file_now_from_).
inline bool timer_wheel::replace(timer_node& n, tick_t t) {
  if (put_back_) return requeue(n, t);
  if (t < file_now_from_) return false;
  file_now(n, t);
  return true;
}

// n was the last node cancelled from a filed slot (last_unlinked_), so the cancel log's last
// entry is its entry, which still points at n: nothing is flushed or released between a cancel
// and the flush that clears last_unlinked_, and the only filing between them (file_now()) pops
// holes or appends, so it never writes a logged entry. A cancel and a schedule at a deadline no
// earlier than the old one is a later deadline: as reschedule() does, the node goes back into
// that entry (the log entry is dropped) and its slot, which comes due no later than the old
// deadline, re-files it then. Two checks keep that exact: t >= n.tick_ (the old deadline: the
// policy, later deadlines only, as reschedule(); an earlier one is staged and filed where it
// belongs) and t >= the slot's due (what exactness needs: the slot comes due at or before t,
// even if the object at &n was destroyed and another built there since the cancel, whose tick_
// means nothing). The overdue list's due is always ~0 and no deadline tick reaches it
// (deadline_tick() < 2^63), so nothing is put back there.
// What it saves is the log's hole write into a random entry (a cache miss at a million
// timers), the staging and the filing. What it costs is a branch that in churn (a random timer
// cancelled, scheduled again at a random deadline) is a coin flip: below requeue_min_size_
// pending timers, where entries are in cache, the mispredicts cost more than the work saved,
// so small wheels file at once instead (replace(); docs/timer.md, "Replaced timeouts").
// (Without the branch, selecting both outcomes' writes, the counts depend on the
// node's load and serialise the misses: slower at every size.)
// Keeps I1 (the entry points at n again), I2-I3 (t >= tick_ and >= the slot's due), I5-I7
// (the log's last entry is dropped, last_unlinked_ cleared).
inline bool timer_wheel::requeue(timer_node& n, tick_t t) noexcept {
  const detail::cancelled_entry c = cancels_.entries[cancels_.count - 1];
  if (t < n.tick_ || t < slot_at(c.slot).due) return false;
  assert(c.slot < wheel_slots);
  detail::cover([](detail::wheel_coverage& cv) { ++cv.revived; });
  --cancels_.count;
  last_unlinked_ = 0;
  n.tick_ = t;
  n.state_ = timer_node::state::queued;
  n.slot_ = c.slot;
  n.pos_ = c.pos;
  return true;
}

// Files idle n at t now, without staging (replace(), small wheels), relative to elapsed_ as it
// is: no catch_up(), whose multiply every such schedule would pay. Why that and the pending
// cancel log are safe, given t >= file_now_from_ (> every tick current_tick() can be, as
// file_now_from_ >= next_work_ > current_tick() unless a timer is overdue, and then
// current_tick() == elapsed_ < file_now_from_):
// - t's slot is fewer than 64 slots ahead of elapsed_'s on its level, so also of any later
//   elapsed_ <= t (catch_up()): it is a valid ring slot then too, maybe above the lowest level
//   t could use, which cascading handles as for any node filed before the wheel's time moved.
// - The slot's due drops at most to t >= next_work_ and >= next_due_: no bound the O(1)
//   advance() (fast_before_ <= fast_limit_ = next_work_'s first instant) or next_deadline()
//   (next_due_) answers from is lowered, so none needs recomputing (update_next_work(), the
//   O(levels) step that staging pays once per 256 nodes).
// - Logged cancels: the entries they name still point at their nodes (not holes), so add()
//   neither pops nor overwrites them; the slot's live count still counts them, so it is not
//   released under them; the flush later turns them into holes by index, which growing the
//   slot keeps. n itself may be both a logged entry of its old slot and a live one here.
// - An append that brings a slot to visit_min_live_ entries wakes its level's visits; then
//   next_work_ must come down to the visit (file_now_woke(): catch_up(), update_next_work()),
//   as the filing of staged nodes does for them. Rare: appends, not hole reuse, and once per
//   slot that grows past the threshold.
// Keeps I1-I4, and I9-I11 unchanged (t >= file_now_from_), but for a visit woken (file_now_woke()).
inline void timer_wheel::file_now(timer_node& n, tick_t t) {
  assert(t > elapsed_ && t >= next_work_);
  detail::cover([](detail::wheel_coverage& c) { ++c.filed_now; });
  n.tick_ = t;
  std::uint16_t id;
  timer_wheel::slot& sl = slot_to_file(t, id);
  n.state_ = timer_node::state::queued;
  n.slot_ = id;
  n.pos_ = sl.add(&n, pool_, visit_min_live_, [this, id] { file_now_woke(id); });
}

}  // namespace cogwheel::timer
