/// @file
/// timer_wheel: a hierarchical timing wheel (11 levels of 64 slots, one occupancy bitmap word per
/// level) with O(1) schedule, cancel and reschedule, and batched advance whose cost follows the
/// occupied slots it visits and the timers it expires, never the ticks that elapsed. Each level
/// is a ring (detail::ring_level); a slot is an array of node pointers whose cancelled entries
/// become holes (detail/entry_slot.hpp), so entries never move; schedule() stages a node
/// (detail/staging_area.hpp); cancel() of a filed node logs it (detail/cancel_log.hpp); a later
/// deadline is applied lazily, and advance() visits crowded slots ahead of time (wheel.cpp,
/// visit()) so that no advance() re-files more than a chunk. Why each of these, and what it
/// costs: docs/timer.md.
///
/// Precision (in ticks): a timer fires in the first advance(now) with now_tick >= deadline_tick,
/// never earlier and never later. Deadlines at or before the wheel's time fire at the next
/// advance. Time never goes backwards: advance to an earlier time is a no-op.
///
/// Not thread-safe: one wheel belongs to one thread (one core's loop).
//
// The wheel's rules. Every method keeps them (each says which it touches: "keeps I4");
// invariant_violation() (wheel_invariants.cpp) checks each, tagged with its number. "Filed":
// in a wheel slot or the overdue list; "staged": in staged_; "logged": in cancels_.
//  I1  A queued node is in one place, named by (slot_, pos_): slot_at(slot_).at(pos_) == &n when
//      filed, staged_.nodes[pos_] == &n when slot_ == staged_slot. Filed entries never move (a
//      cancel leaves a hole), so pos_ is written only when a node is placed. A due node is in
//      batch_; an idle one nowhere (a logged node is idle though its entry still points at it).
//  I2  A node filed in a wheel slot has elapsed_ < tick_, and tick_ is at or after the slot's
//      start and its due. A lazy push only makes tick_ later. overdue_ holds nodes whose
//      deadline was at or before elapsed_ when filed.
//  I3  An occupied slot's due lies inside its span, after elapsed_, and at or before every
//      live node's tick_. An empty slot keeps no arrays, entries or hole, and due == ~0; an
//      occupied one keeps the fewest arrays that hold its entries (detail/entry_slot.hpp).
//  I4  Occupancy bit (L, s) is set exactly when slot (L, s) has live > 0; live <= size; a slot's
//      hole stack holds exactly its holes. A level with no slot headers has no bits.
//  I5  size_ == sum of the slots' live + staged_.count - cancels_.count; each pool block is in
//      exactly one slot or free in the pool.
//  I6  A logged (slot, pos) names a distinct live entry of a filed slot (never staged) whose node
//      is idle and still counted in live. The log is applied (flush_cancels()) before anything
//      reads entries, live counts or bits: filing, advance, next_deadline(), pending_per_level(),
//      destruction. count < capacity between calls.
//  I7  last_unlinked_ is the address of the node whose cancel is the log's last entry, or 0:
//      compared with addresses, never dereferenced; cleared by the flush and by requeue().
//  I8  staged_.count < capacity between calls; staged_.min <= every staged tick_;
//      fast_before_ <= first_instant(staged_.min).
//  I9  While nothing is staged, next_work_ <= every occupied slot's due and every pending visit
//      step (elapsed_ while a node is overdue). fast_limit_ == first_instant(next_work_);
//      fast_before_ <= fast_limit_ (and I8); an O(1) advance() saw only times below fast_limit_.
//      So advance(now) with now below fast_before_ has nothing to do.
//  I10 While next_due_known_, next_due_ <= the due of the slot that comes due first; forgotten
//      when a slot empties.
//  I11 file_now_from_ > elapsed_, >= next_work_ and >= next_due_ (when known): a filing at or
//      after it (file_now()) lowers no bound of I9-I10.
//  I12 Between calls: batch_ and scratch_ are empty and advancing_ is false (no method runs
//      inside an expiry callback); big_slots_[L] counts level L's slots of >= visit_min_live_
//      entries and big_levels_ bit L (L >= 1) says it is non-zero.
// I9-I11 are bounds: a cancel or a lazy push may leave them lower than exact, never higher.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include <cogwheel/timer/detail/cancel_log.hpp>
#include <cogwheel/timer/detail/entry_slot.hpp>
#include <cogwheel/timer/detail/expiry_batch.hpp>
#include <cogwheel/timer/detail/staging_area.hpp>
#include <cogwheel/timer/detail/wheel_coverage.hpp>
#include <cogwheel/timer/detail/wheel_index.hpp>
#include <cogwheel/timer/node.hpp>
#include <cogwheel/timer/ticks.hpp>

namespace cogwheel::timer {

/// A hierarchical timing wheel of timer_node: see the file comment for the design, precision
/// and costs. Nodes are owned by the caller and must stay alive while scheduled (destroying a
/// scheduled node aborts with a message: cancel it first). Not copyable; one thread.
class timer_wheel {
 public:
  /// A wheel counting in ticks of `tick` (1 ms by default; a positive duration, see
  /// tick_scale), its time starting at `start` (rounded down to a tick).
  explicit timer_wheel(clock::duration tick = std::chrono::milliseconds(1),
                       clock::time_point start = {});
  timer_wheel(const timer_wheel&) = delete;
  timer_wheel& operator=(const timer_wheel&) = delete;
  /// Cancels every pending timer (their nodes become idle; none fires).
  ~timer_wheel();

  /// Files n to fire at `deadline` (rounded up to a tick: never early), calling n's callback
  /// from the advance() that reaches it. Precondition: !n.scheduled(). O(1).
  // Pre: n idle. Post: n queued (staged, or as a replaced timeout put back or filed), size_ + 1.
  // Keeps I1, I5, I8 (enqueue()).
  void schedule(timer_node& n, clock::time_point deadline) {
    assert(!n.scheduled());
    enqueue(n, scale_.deadline_tick(deadline));
  }

  /// Removes n if it is pending (or due in the batch being fired). Returns whether it was; a
  /// second cancel, or a cancel after it fired, is a no-op returning false. O(1).
  // Always inlined: it is small and on every I/O timeout's path; left to the compiler's budget
  // (with file_now() inlined into the schedule paths) it can become a call per cancel.
  // Pre: none. Post: n idle; size_ - 1 if it was pending. Keeps I1 (unstage() moves the last
  // staged node), I5, I6-I7 (unlink() logs), I12 (a due node leaves the batch).
  [[gnu::always_inline]] bool cancel(timer_node& n) noexcept {
    switch (n.state_) {
      case timer_node::state::idle:
        return false;
      case timer_node::state::due:
        detail::cover([](detail::wheel_coverage& c) { ++c.due_cancels; });
        batch_.remove(n);
        return true;
      case timer_node::state::queued:
        if (n.slot_ == staged_slot)
          unstage(n);
        else
          unlink(n);
        --size_;
        return true;
    }
    return false;
  }

  /// Moves n's deadline (scheduling it if idle). O(1). A later deadline is applied lazily: the
  /// node stays in its slot, which comes due no later than the old deadline, and is re-filed then.
  // Pre: none. Post: n queued with deadline tick t. A staged node keeps I8 (lower_min_staged());
  // a filed node pushed later keeps I2 and I3 with no write but tick_ (t >= old tick_ >= its
  // slot's start and due), and leaves I9-I11 lower than exact (allowed); anything else is a
  // cancel and an enqueue (reschedule_slow()), which keep their own rules.
  void reschedule(timer_node& n, clock::time_point deadline) {
    const tick_t t = scale_.deadline_tick(deadline);
    if (n.state_ == timer_node::state::queued) {
      if (n.slot_ == staged_slot) {  // not filed yet: any new deadline is just recorded
        n.tick_ = t;
        if (t < staged_.min) lower_min_staged(t);
        return;
      }
      if (n.slot_ != overdue_slot && t >= n.tick_) {
        n.tick_ = t;
        detail::cover([](detail::wheel_coverage& c) { ++c.lazy_pushes; });
        return;
      }
    }
    reschedule_slow_cold(n, t);
  }

  /// Moves the wheel's time to `now` and fires every timer with deadline_tick <= now_tick, in
  /// one batch after the wheel is consistent again. Returns how many fired. Timers scheduled by
  /// those callbacks with a deadline at or before `now` fire at the next advance, not this one.
  /// Precondition: not called from inside an expiry callback.
  // Pre: I12 (not from a callback). Post: the wheel's time is now; every node with tick_ <= now's
  // tick fired. The O(1) path relies on I9; the slow path restores I1-I12 before it fires.
  std::size_t advance(clock::time_point now) {
    // Nothing can be due: O(1), and in time units, so that an event loop's many advance() calls
    // with nothing to do cost one compare and no division by the tick (a loop calls it far more
    // often than a timer expires). elapsed_ catches
    // up with latest_ when the wheel next files or advances (catch_up()).
    const clock::rep ns = now.time_since_epoch().count();
    if (ns < fast_before_) {
      detail::cover([](detail::wheel_coverage& c) { ++c.fast_advances; });
      if (ns > latest_) latest_ = ns;
      return 0;
    }
    return advance_slow(now);
  }

  /// The earliest time at which advance() may have work: the least deadline filed into the
  /// slot that comes due first (exact unless that timer was since cancelled or pushed later, and
  /// then earlier, never later); now() when a timer is already overdue. Never later than the
  /// earliest deadline or now(), whichever is later. nullopt when empty. O(1) (the value the last
  /// advance() or filing computed), O(levels) after a slot emptied.
  // Inline: the common case (nothing logged, staged or overdue, the next slot known) reads
  // next_due_; the rest is out of line and returns a count, not an optional: an out-of-line
  // std::optional<time_point> comes back through a stack temporary whose flag is stored as a
  // byte and reloaded as the upper word of the pair, a store that cannot forward to the load.
  // Reads I10 (inline) or applies the log first (I6).
  std::optional<clock::time_point> next_deadline() const noexcept {
    if ((cancels_.count | staged_.count | overdue_.live) == 0 && next_due_known_) {
      if (next_due_ == ~tick_t{0}) return std::nullopt;
      return scale_.time_of(next_due_);
    }
    const clock::rep count = next_deadline_count();
    if (count == no_deadline) return std::nullopt;
    return clock::time_point(clock::duration(count));
  }

  /// Checks every internal invariant (bitmaps against slot occupancy, each node's slot and index,
  /// no node filed behind the wheel's time or after its deadline's slot, the hole stacks, the
  /// staging area, the cancel log, the block pool, the O(1) advance bound). O(pending + slots),
  /// for tests: returns nullptr when the wheel is consistent, else what is broken. Must not be
  /// called from an expiry callback.
  const char* invariant_violation() const noexcept;

  /// Slots holding fewer timers than this are not visited early (a visit re-files a slot's
  /// timers at once: worth it only for a crowded slot); tests lower it so that small wheels take the visiting paths too. Default 512.
  /// (0 counts as 1.) O(slots).
  void set_visit_min_live(std::uint32_t n) noexcept;

  /// A schedule() or reschedule() of the timer cancelled last puts it back where it was when
  /// its deadline is no earlier than before, as a lazy reschedule() would, while at least this
  /// many timers are pending; with fewer, it is filed at once (not staged) when that lowers no
  /// bound advance() answers from, else staged. Default 2^18; tests lower it so that small
  /// wheels take the first path too. O(1).
  void set_requeue_min_size(std::size_t n) noexcept {
    requeue_min_size_ = n;
    put_back_ = size_ >= n;
  }

  /// Timers pending (scheduled and not yet fired or cancelled). O(1).
  std::size_t size() const noexcept { return size_; }
  /// size() == 0.
  bool empty() const noexcept { return size_ == 0; }
  /// The tick length given at construction.
  clock::duration tick() const noexcept { return scale_.tick(); }
  /// The conversions between time points and ticks the wheel uses.
  const tick_scale& scale() const noexcept { return scale_; }
  /// The wheel's time: the last tick advanced to.
  clock::time_point now() const noexcept { return scale_.time_of(current_tick()); }
  /// Bytes the wheel holds besides its nodes (itself, slot storage, staging, the expiry batch):
  /// what a pending timer costs beyond sizeof(timer_node) is memory_bytes() / size().
  std::size_t memory_bytes() const noexcept;
  /// Nodes advance() has re-filed since construction (cascaded to a lower level, or moved early
  /// by a visit because their deadline was pushed back): the work advance() does besides firing.
  std::uint64_t moved() const noexcept { return moved_; }
  /// Sets (or with nullptr clears) the function told of the timers each advance() fires, by
  /// runs: `count` consecutive nodes with one deadline tick, told once the run ends, with
  /// `context`. How a loop measures lateness without a byte more per node or a call per node.
  /// The observer must not touch the queue.
  void set_fire_observer(detail::expiry_batch::fire_observer fn, void* context) noexcept {
    batch_.set_observer(fn, context);
  }
  /// Pending timers by the level of the slot each sits in (a lazily pushed-back deadline counts
  /// where its node still is), then at index level_count the overdue and not yet filed ones.
  /// Sums to size(). O(occupied slots), for metrics: not for an expiry callback.
  std::array<std::size_t, detail::level_count + 1> pending_per_level() const noexcept {
    flush_cancels();
    std::array<std::size_t, detail::level_count + 1> out{};
    for (unsigned level = 0; level < detail::level_count; ++level)
      for (std::uint64_t bits = occupied_[level]; bits != 0; bits &= bits - 1)
        out[level] += levels_[level][__builtin_ctzll(bits)].live;
    out[detail::level_count] = overdue_.live + staged_.count;
    return out;
  }

 private:
  static constexpr unsigned wheel_slots = detail::level_count * detail::slots_per_level;
  static constexpr std::uint16_t overdue_slot = wheel_slots;     // deadlines <= elapsed_
  static constexpr std::uint16_t staged_slot = wheel_slots + 1;  // scheduled, not yet filed

  using slot = detail::entry_slot;
  // The early visit of one level's next occupied slot (see visit()).
  struct visit_state {
    tick_t next_tick = 0;    // the next advance at or after this tick continues the visit
    tick_t finish = 0;       // the tick by which the current pass is to reach the slot's end
    std::uint32_t cursor = 0;
    std::uint16_t slot = 0;  // 0: none yet (level 0 is never visited)
  };
  struct expiration {
    unsigned level;
    unsigned slot;
    tick_t tick;  // when the slot comes due: its entry_slot::due
  };

  // reschedule() other than a lazy push: cancel and queue again. Out of line so that reschedule()
  // stays small enough to inline: its common case, a later deadline, is the one store above
  // (with cancel() and the filing inlined into it, reschedule() grows past the inliner's budget).
  [[gnu::noinline]] void reschedule_slow(timer_node& n, tick_t t) {
    cancel(n);
    enqueue(n, t);
  }
  // How reschedule() reaches reschedule_slow(): a cold function (one jump), so that in the
  // caller's loop that call's path is the rare one and its register saves go to the caller's
  // cold section (with a plain call the compiler keeps fewer of the caller's values in registers
  // across it, and the caller's loop reloads them from the stack at every push).
  // reschedule_slow() itself is not cold, as GCC optimises a cold function for size.
  [[gnu::cold, gnu::noinline]] void reschedule_slow_cold(timer_node& n, tick_t t) { reschedule_slow(n, t); }

  // Queues idle n for tick t: staged, unless n is the node cancelled last from a filed slot (a
  // timeout replaced: replace()). That compare is the only test a schedule pays for the choice:
  // schedule-then-cancel (the runtime's I/O timeout) cancels a staged node (unstage()), which
  // never sets last_unlinked_, so it always stages and pays nothing more (no test of the size
  // or of a run here: this is the path every I/O timeout takes). replace() does not read size_,
  // so the staging path keeps its one add to memory instead of a load, add and store.
  // Keeps I5 (size_), I7 (replace() reads it), I8 (stage()).
  void enqueue(timer_node& n, tick_t t) {
    ++size_;
    if (reinterpret_cast<std::uintptr_t>(&n) == last_unlinked_ && replace(n, t)) return;
    stage(n, t);
  }

  // A timeout replaced by a later one (the node cancelled last, scheduled again): replace()
  // chooses, requeue() puts it back into its entry, file_now() files it without staging.
  // Defined in detail/replaced_timeout.hpp, with why each is exact.
  bool replace(timer_node& n, tick_t t);
  bool requeue(timer_node& n, tick_t t) noexcept;
  void file_now(timer_node& n, tick_t t);
  // file_now()'s append woke slot `id`'s level (wheel.cpp).
  void file_now_woke(std::uint16_t id) noexcept;

  // Staged nodes sit densely in staged_.nodes[0, staged_.count); n.pos_ is the index. Keeps I1,
  // I8 (a full area is filed at once).
  void stage(timer_node& n, tick_t t) {
    n.tick_ = t;
    if (t < staged_.min) lower_min_staged(t);
    n.state_ = timer_node::state::queued;
    n.slot_ = staged_slot;
    n.pos_ = staged_.count;
    staged_.nodes[staged_.count++] = &n;
    if (staged_.full()) {
      detail::cover([](detail::wheel_coverage& c) { ++c.stage_flush_full; });
      file_staged();
    }
  }

  // The wheel's time: elapsed_, or later if an advance() that took the O(1) path saw a later
  // time (latest_), which it did not record in ticks.
  tick_t current_tick() const noexcept {
    const tick_t t = scale_.now_tick(clock::time_point(clock::duration(latest_)));
    return t > elapsed_ ? t : elapsed_;
  }
  // Moves elapsed_ to current_tick(): nothing is due before next_work_ and current_tick() is
  // below it (only filing lowers next_work_, and filing and advance_to() call this first), so
  // this is the move the O(1) path of advance() skipped.
  void catch_up() noexcept { elapsed_ = current_tick(); }
  // The first instant of tick t in clock::rep, as fast_limit_ holds it for next_work_. No
  // instant below tick 1's is before tick 0, and a product beyond the clock's range saturates
  // (every instant the clock can name is then before tick t but the last, which takes the exact
  // path).
  clock::rep first_instant(tick_t t) const noexcept {
    constexpr auto max = std::numeric_limits<clock::rep>::max();
    const auto d = static_cast<std::uint64_t>(scale_.tick().count());
    if (t == 0) return std::numeric_limits<clock::rep>::min();
    // t * d > max exactly when t > max / d; a multiply with an overflow flag instead of that
    // division (a 64-bit divide is slow, and every advance() that leaves the O(1) path pays it).
    std::uint64_t product;
    if (__builtin_mul_overflow(t, d, &product) || product > static_cast<std::uint64_t>(max)) return max;
    return static_cast<clock::rep>(product);
  }
  // A staged deadline t below staged_.min: the advance() that reaches it must file the staged
  // nodes, so fast_before_ comes down to t's first instant. (Taken once per new least staged
  // deadline: after a filing, about log(staged) times.)
  void lower_min_staged(tick_t t) noexcept {  // keeps I8
    staged_.min = t;
    const clock::rep f = first_instant(t);
    if (f < fast_before_) fast_before_ = f;
  }
  // Sets fast_limit_ from next_work_, and fast_before_ to the lesser of it and the earliest
  // staged deadline's first instant.
  void set_fast_limit() noexcept;
  // Sets file_now_from_ to max(next_work_, next_due_, elapsed_ + 1).
  void set_file_now_from() noexcept;
  // Lowers `before` to staged_.min's first instant if a node is staged; else resets staged_.min.
  // Invariant kept: fast_before_ <= first_instant(staged_.min), so stage() need only lower
  // fast_before_ when it lowers staged_.min.
  void lower_to_staged(clock::rep& before) noexcept;

  // Slot `id`: an index into its level's array (the overdue list is level level_count's only
  // slot). Precondition: the level's array exists (it does for every id a node or a bit names).
  // Through level_base_, a level's array address less its first id's offset, so that the id is
  // the index as it is (a cancel, a filing and a logged cancel each look a slot up: no mask).
  slot& slot_at(std::uint16_t id) noexcept {
    return *reinterpret_cast<slot*>(level_base_[id >> detail::slot_bits] + std::uintptr_t{id} * sizeof(slot));
  }
  const slot& slot_at(std::uint16_t id) const noexcept {
    return *reinterpret_cast<const slot*>(level_base_[id >> detail::slot_bits] + std::uintptr_t{id} * sizeof(slot));
  }
  // Records level `level`'s array (levels_ and level_base_).
  void set_level(unsigned level, slot* slots) noexcept {
    levels_[level] = slots;
    level_base_[level] = reinterpret_cast<std::uintptr_t>(slots) -
                         std::uintptr_t{level} * detail::slots_per_level * sizeof(slot);
  }
  // Allocates level `level`'s 64 slot headers (2 KiB), at its first filing (wheel.cpp).
  slot* add_level(unsigned level);

  // The slot deadline t > elapsed_ maps to relative to elapsed_ (its level's array allocated at
  // the level's first use), with its due lowered to t and its occupancy bit set, for a node
  // about to be added; its id in `id`. file() and file_now(). Keeps I2, I3, I4.
  slot& slot_to_file(tick_t t, std::uint16_t& id) {
    const unsigned level = detail::ring_level(elapsed_, t);
    const unsigned s = detail::slot_for(t, level);
    slot* lv = levels_[level];
    if (lv == nullptr) [[unlikely]]
      lv = add_level(level);
    if (t < lv[s].due) lv[s].due = t;
    occupied_[level] |= std::uint64_t{1} << s;
    detail::cover([level](detail::wheel_coverage& c) { ++c.filed[level]; });
    id = static_cast<std::uint16_t>(level * detail::slots_per_level + s);
    return lv[s];
  }

  // Files n in the slot its deadline maps to relative to elapsed_ (or the overdue list).
  void file(timer_node& n, tick_t t) {
    n.tick_ = t;
    if (t > elapsed_) {
      std::uint16_t id;
      slot& sl = slot_to_file(t, id);
      add_to(sl, id, n);
    } else {
      detail::cover([](detail::wheel_coverage& c) { ++c.filed_overdue; });
      add_to(overdue_, overdue_slot, n);
    }
  }

  // Re-files a node advance() is moving (a cascade or a visit): its deadline n.tick_ lies
  // after elapsed_. The common case (append_moved()) is inline here; anything else takes file().
  // With idle connections pushing their deadlines later, this is most of what a heartbeat costs
  // the wheel (docs/timer.md, "Lazy reschedule"); visit() places most of its nodes without it.
  void refile(timer_node& n) {
    const tick_t t = n.tick_;
    assert(t > elapsed_);
    const unsigned level = detail::ring_level(elapsed_, t);
    const unsigned s = detail::slot_for(t, level);
    slot* const lv = levels_[level];
    if (lv == nullptr || !append_moved(lv[s], static_cast<std::uint16_t>(level * detail::slots_per_level + s), n, t))
      file(n, t);
  }

  // Appends moved node n (deadline t) to `dest`, slot `id`, when that is a plain append: the slot
  // has no hole, a block with room, and the append wakes no visit (entry_slot::try_append);
  // otherwise changes nothing and returns false. No occupancy bit to set: an append succeeds only
  // below the slot's capacity, and a slot with arrays has entries, so live nodes, so its bit is
  // set (invariants that invariant_violation() checks: an empty slot keeps no arrays; a slot
  // without live nodes keeps no entries; a bit is set exactly when its slot has live nodes).
  // Keeps I1-I4.
  [[gnu::always_inline]] bool append_moved(slot& dest, std::uint16_t id, timer_node& n, tick_t t) noexcept {
    const std::uint32_t i = dest.try_append(&n, visit_min_live_);
    if (i == detail::no_hole) return false;
    if (t < dest.due) dest.due = t;
    detail::cover([id](detail::wheel_coverage& c) { ++c.filed[id / detail::slots_per_level]; });
    n.slot_ = id;
    n.pos_ = i;
    return true;
  }

  // A slot whose entries (live and holes) just reached visit_min_live_ wakes its level's
  // visits: the visit of a slot with fewer entries sleeps until the slot comes due (visit()),
  // as it cannot hold that many live nodes without appending. Only appends check the size.
  void wake_visits(std::uint16_t id) noexcept {  // keeps I12
    if (id < wheel_slots) {
      const unsigned level = id / detail::slots_per_level;
      visits_[level].next_tick = 0;
      ++big_slots_[level];
      if (level > 0) big_levels_ |= 1u << level;
    }
  }
  // Slot `sl` of `level` is about to be emptied: it no longer counts in big_slots_.
  void forget_big(unsigned level, const slot& sl) noexcept {
    if (sl.size >= visit_min_live_ && --big_slots_[level] == 0) big_levels_ &= ~(1u << level);
  }

  // Adds n to slot `sl`, whose id is `id`. Keeps I1 (pos_ set once), I4 (the hole stack).
  void add_to(slot& sl, std::uint16_t id, timer_node& n) {
    n.state_ = timer_node::state::queued;
    n.slot_ = id;
    n.pos_ = sl.add(&n, pool_, visit_min_live_, [this, id] { wake_visits(id); });
  }

  // Takes n out of its slot: touches only the node and the log. size_ stays exact at once; the
  // slot's live count, its occupancy bit and its entry follow at the next flush_cancels(), which
  // runs before anything reads them (filing, advance, next_deadline(), destruction). The node's
  // load is the miss of a cancel at a million timers; what follows it here is what keeps fewer
  // of the next cancels' misses in flight, so the slot header's update waits for the flush.
  // Keeps I6 (a full log is applied at once) and I7.
  void unlink(timer_node& n) noexcept {
    assert(n.pos_ < slot_at(n.slot_).size && slot_at(n.slot_).at(n.pos_) == &n);
    n.state_ = timer_node::state::idle;
    cancels_.entries[cancels_.count++] = detail::cancelled_entry{n.pos_, n.slot_};
    last_unlinked_ = reinterpret_cast<std::uintptr_t>(&n);  // see enqueue() and replace()
    if (cancels_.full()) {
      detail::cover([](detail::wheel_coverage& c) { ++c.cancel_flush_full; });
      flush_cancels();
    }
  }

  // Applies the logged cancels (wheel.cpp). Out of line, as release_slot(): cancel() stays
  // small enough to be inlined into its callers, and both run rarely (a flush per 256 cancels,
  // a release when a slot empties).
  void flush_cancels() noexcept;  // restores I4-I6 (and clears I7)
  // flush_cancels() for the const queries that read slots (next_deadline(), pending_per_level()):
  // the log is not part of the wheel's observable state, so applying it changes no answer but
  // theirs, which it makes exact again.
  void flush_cancels() const noexcept {
    if (cancels_.count != 0) const_cast<timer_wheel*>(this)->flush_cancels();
  }
  // Empties slot `id` (its last live node left) and clears its occupancy bit.
  void release_slot(std::uint16_t id) noexcept;  // keeps I3, I4, I10 (forgets next_due_)

  // Takes a staged node out: the last staged node (hot: it was just staged) fills its place.
  // Keeps I1; staged_.min stays a lower bound (I8).
  void unstage(timer_node& n) noexcept {
    assert(n.pos_ < staged_.count && staged_.nodes[n.pos_] == &n);
    n.state_ = timer_node::state::idle;
    timer_node* last = staged_.nodes[--staged_.count];
    staged_.nodes[n.pos_] = last;
    last->pos_ = n.pos_;
  }

  // Files the staged nodes (after applying the logged cancels); with `update`, recomputes
  // next_work_ (advance_to() does that once at its end instead).
  void file_staged(bool update = true);
  std::optional<expiration> next_expiration() const noexcept;
  // next_deadline() as the time point's count, no_deadline for none: a tick's first instant is
  // never negative (time_of()), so the count's minimum stands for none.
  static constexpr clock::rep no_deadline = std::numeric_limits<clock::rep>::min();
  clock::rep next_deadline_count() const noexcept;
  void process(const expiration& e, tick_t now);
  std::size_t advance_to(tick_t now);
  // advance() at or past fast_before_: still the O(1) answer if `now` is before fast_limit_ and
  // before the earliest staged deadline, recomputed (fast_before_ stays low after the staged node
  // that lowered it is cancelled, until this raises it again); else advance_to().
  std::size_t advance_slow(clock::time_point now);
  void visit(unsigned level);
  static bool mostly_pushed(slot& sl, tick_t end_tick) noexcept;
  // With `known`, the next slot to come due is *known (advance_to() has just found it).
  void update_next_work(const std::optional<expiration>* known = nullptr) noexcept;

  // The two fields the O(1) path of advance() reads and writes, first in the object (an event
  // loop calls it every iteration):
  // The lesser of fast_limit_ and staged_.min's first instant: advance() with a time below it has
  // nothing to do (no slot comes due, no staged deadline is reached: staged nodes wait for the
  // advance that reaches the earliest of them, or for the staging area to fill).
  clock::rep fast_before_ = std::numeric_limits<clock::rep>::min();
  // The latest time an advance() that took the O(1) path was given (see current_tick()).
  clock::rep latest_ = std::numeric_limits<clock::rep>::min();
  tick_scale scale_;
  tick_t elapsed_;
  std::size_t size_ = 0;
  bool advancing_ = false;
  std::array<std::uint64_t, detail::level_count> occupied_{};
  detail::block_pool pool_;            // declared before the slots: outlives their arrays
  // Each level's 64 slots, allocated at the level's first filing and kept (a wheel whose timers
  // are all 1..60 s ahead uses levels 0..2 of 11); then &overdue_.
  std::array<slot*, detail::level_count + 1> levels_{};
  std::array<std::uintptr_t, detail::level_count + 1> level_base_{};  // see slot_at()
  unsigned top_level_ = 0;  // levels [0, top_level_) may have slots (the highest allocated + 1)
  slot overdue_;                      // deadlines at or before elapsed_ when filed
  slot scratch_;                      // the slot being processed, detached
  detail::staging_area staged_;       // scheduled, not yet filed (count, nodes, min)
  // No advance() to a tick before this has anything to do while nothing is staged: <= the first
  // tick of every occupied slot and of every pending visit step, elapsed_ while a timer is
  // overdue. A bound: cancels and lazy pushes do not raise it.
  tick_t next_work_ = 0;
  // The first instant of tick next_work_ in clock::rep (nanoseconds; saturated at the maximum,
  // the minimum when next_work_ is 0): now_tick(t) < next_work_ exactly when t's count is below
  // it, so while nothing is staged advance() compares with it, without dividing by the tick.
  clock::rep fast_limit_ = std::numeric_limits<clock::rep>::min();
  std::array<visit_state, detail::level_count> visits_{};
  tick_t next_visit_ = 0;  // no visit step is due before this tick (the least next_tick)
  // What next_expiration() last returned (its tick; ~0 for none), while next_due_known_: a bound,
  // as cancels and lazy pushes since leave it lower, never higher (filing goes through
  // update_next_work(), which sets it). Forgotten when a slot empties, so next_deadline() answers
  // in O(1) and does not keep reporting a slot whose timers were all cancelled.
  mutable tick_t next_due_ = ~tick_t{0};
  mutable bool next_due_known_ = false;
  // file_now() files only deadlines at or after this: >= next_work_, > elapsed_ and >= next_due_
  // (whether known or not), so a filing lowers none of them and needs no update_next_work().
  // Set with them (update_next_work(); next_deadline() raises it when it learns next_due_);
  // ~0 (never) until the first. A bound: cancels leave it lower than it could be, never higher.
  mutable tick_t file_now_from_ = ~tick_t{0};
  std::uint32_t visit_min_live_ = 512;  // slots with fewer live nodes are not visited early
  // Per level, the slots with at least visit_min_live_ entries (live or holes): a level without
  // one has nothing to visit (no slot can hold that many live nodes), so advance() skips its
  // visits. Exact: an append that reaches the threshold adds one (wake_visits()), emptying such
  // a slot removes it (forget_big()).
  std::array<std::uint8_t, detail::level_count> big_slots_{};
  std::uint32_t big_levels_ = 0;  // bit L (L >= 1: level 0 is never visited): big_slots_[L] > 0
  detail::cancel_log cancels_;         // cancels not yet applied to their slot entries
  // The address of the node whose cancel is the log's last entry, until the log is applied (0
  // then, or after requeue()): compared with a node's address only, never dereferenced (see
  // requeue(); file_now() does not clear it, as the log entry stays).
  std::uintptr_t last_unlinked_ = 0;
  // Wheels with fewer pending timers than this file a replaced timeout at once (file_now()),
  // larger ones put it back into its entry (requeue()).
  std::size_t requeue_min_size_ = std::size_t{1} << 18;
  // size() >= requeue_min_size_ when the cancel log was last applied (refreshed there, at least
  // once per 256 cancels: a bound on cost, not on exactness; both paths are exact).
  bool put_back_ = false;
  detail::expiry_batch batch_;
  std::uint64_t moved_ = 0;
};

}  // namespace cogwheel::timer

#include <cogwheel/timer/detail/replaced_timeout.hpp>
