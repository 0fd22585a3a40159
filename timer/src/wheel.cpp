#include <cogwheel/timer/wheel.hpp>

#include <bit>
#include <limits>
#include <utility>

namespace cogwheel::timer {

using detail::level_count;
using detail::slots_per_level;

timer_wheel::timer_wheel(clock::duration tick, clock::time_point start)
    : scale_(tick), elapsed_(scale_.now_tick(start)) {
  set_level(level_count, &overdue_);
}

timer_wheel::~timer_wheel() {
  for (std::uint32_t i = 0; i < staged_.count; ++i)
    staged_.nodes[i]->state_ = timer_node::state::idle;
  if (cancels_.count > 0)
    detail::cover([](detail::wheel_coverage& c) { ++c.cancel_flush_destroy; });
  flush_cancels();
  for (unsigned level = 0; level <= level_count; ++level) {
    slot* const lv = levels_[level];
    if (lv == nullptr) continue;
    const unsigned count = level < level_count ? slots_per_level : 1;
    for (unsigned s = 0; s < count; ++s) {
      lv[s].for_each([](timer_node* n) { n->state_ = timer_node::state::idle; });
      lv[s].release(pool_);
    }
    if (level < level_count) delete[] lv;
  }
}

void timer_wheel::set_visit_min_live(std::uint32_t n) noexcept {
  visit_min_live_ = n > 0 ? n : 1;
  big_levels_ = 0;
  for (unsigned level = 0; level < level_count; ++level) {
    big_slots_[level] = 0;
    if (levels_[level] == nullptr) continue;
    for (unsigned s = 0; s < slots_per_level; ++s)
      if (levels_[level][s].size >= visit_min_live_) ++big_slots_[level];
    if (level > 0 && big_slots_[level] > 0) big_levels_ |= 1u << level;
    visits_[level].next_tick = 0;
  }
  update_next_work();
}

timer_wheel::slot* timer_wheel::add_level(unsigned level) {
  set_level(level, new slot[slots_per_level]);
  if (level + 1 > top_level_) top_level_ = level + 1;
  return levels_[level];
}

std::size_t timer_wheel::memory_bytes() const noexcept {
  std::size_t bytes = sizeof(*this) + batch_.memory_bytes() + pool_.memory_bytes();
  for (unsigned level = 0; level < level_count; ++level)
    if (levels_[level] != nullptr) bytes += slots_per_level * sizeof(slot);
  return bytes;
}

inline std::optional<timer_wheel::expiration> timer_wheel::next_expiration() const noexcept {
  // Each level is a ring (detail::ring_level): its next occupied slot is the first set bit at or
  // after elapsed_'s own slot, wrapping around, and no other slot of the level comes due before
  // it. A slot comes due at its `due` tick (the least deadline filed into it, entry_slot::due),
  // at or after its first tick: a slot that holds one timer 30 s ahead comes due when that timer
  // does, so the timer fires from where it was filed instead of moving down a level per slot
  // start (and a loop sleeping until next_deadline() wakes once for it, not once per level).
  // A level's own slot may therefore be occupied while elapsed_ lies inside its span. Across
  // levels the earliest due wins; a level whose next slot starts after the best due found cannot
  // beat it (its due is at or after its start). Level 0's slots come due at their one
  // tick. On a tie a higher level wins: of two timers due in one tick, the one on the higher
  // level was filed first (it was further ahead then).
  tick_t best = ~tick_t{0};
  unsigned best_level = level_count;
  unsigned best_slot = 0;
  if (const std::uint64_t occupied = occupied_[0]; occupied != 0) {
    const auto here = static_cast<unsigned>(elapsed_) & (slots_per_level - 1);
    const auto ahead = static_cast<unsigned>(std::countr_zero(std::rotr(occupied, static_cast<int>(here))));
    best = elapsed_ + ahead;
    best_level = 0;
    best_slot = (here + ahead) & (slots_per_level - 1);
  }
  for (unsigned level = 1; level < top_level_; ++level) {
    const std::uint64_t occupied = occupied_[level];
    if (occupied == 0) continue;
    const unsigned shift = level * detail::slot_bits;
    const tick_t base = elapsed_ >> shift;
    const auto here = static_cast<unsigned>(base) & (slots_per_level - 1);
    const auto ahead = static_cast<unsigned>(std::countr_zero(std::rotr(occupied, static_cast<int>(here))));
    if (((base + ahead) << shift) > best) continue;
    const unsigned s = (here + ahead) & (slots_per_level - 1);
    const tick_t due = levels_[level][s].due;
    if (due <= best) {
      best = due;
      best_level = level;
      best_slot = s;
    }
  }
  if (best_level == level_count) return std::nullopt;
  return expiration{best_level, best_slot, best};
}

clock::rep timer_wheel::next_deadline_count() const noexcept {
  flush_cancels();  // a slot whose timers were all cancelled is released, and forgotten here
  if (overdue_.live > 0) return scale_.time_of(elapsed_).time_since_epoch().count();
  // ~0 stands for none: no slot comes due at tick ~0, and staged deadlines are below 2^63 ticks.
  if (!next_due_known_) {
    const auto e = next_expiration();
    next_due_ = e ? e->tick : ~tick_t{0};
    next_due_known_ = true;
    // What file_now() may file from must not be below what this now answers (a slot emptied
    // since update_next_work() set it: next_due_ may have risen).
    if (next_due_ > file_now_from_) file_now_from_ = next_due_;
  }
  tick_t next = next_due_;
  if (staged_.count > 0) {
    // While latest_ < fast_before_ <= first_instant(staged_.min) (lower_to_staged()), latest_'s
    // tick is below staged_.min, so max(staged_.min, current_tick()) is max(staged_.min,
    // elapsed_): a compare instead of current_tick()'s multiply.
    const tick_t current = latest_ < fast_before_ ? elapsed_ : current_tick();
    const tick_t staged = staged_.min > current ? staged_.min : current;
    if (staged < next) next = staged;
  }
  if (next == ~tick_t{0}) return no_deadline;
  return scale_.time_of(next).time_since_epoch().count();
}

// Invariant that makes the cancel log safe: between a cancel and this flush no wheel slot gains
// or loses an entry (only file() adds and advance() removes, and both flush first), and no one
// reads a filed slot's entries (they may point at nodes already destroyed) or its live count. A
// slot's live count still counts its logged nodes, so it reaches 0 at the last of them.
// Restores I4 and I5 for the logged entries (holes, live counts, bits), empties the log (I6)
// and clears last_unlinked_ (I7).
void timer_wheel::flush_cancels() noexcept {
  for (std::uint32_t i = 0; i < cancels_.count; ++i) {
    const detail::cancelled_entry c = cancels_.entries[i];
    slot& sl = slot_at(c.slot);
    assert(c.pos < sl.size && sl.live > 0);
    if (--sl.live == 0)
      release_slot(c.slot);
    else
      sl.make_hole(c.pos);
  }
  cancels_.count = 0;
  last_unlinked_ = 0;
  put_back_ = size_ >= requeue_min_size_;
}

void timer_wheel::file_now_woke(std::uint16_t id) noexcept {
  detail::cover([](detail::wheel_coverage& c) { ++c.filed_now_woke; });
  wake_visits(id);
  // next_work_ comes down to the woken visit (0: the next advance() visits), and the O(1) path
  // of advance() may skip no tick from there: elapsed_ first catches up with what it skipped
  // (as file_staged() does before its update_next_work()).
  catch_up();
  update_next_work();
}

// Keeps I3-I4 (an empty slot keeps nothing), I10 (next_due_ forgotten), I12 (forget_big()).
void timer_wheel::release_slot(std::uint16_t id) noexcept {
  next_due_known_ = false;
  if (id < wheel_slots) forget_big(id / slots_per_level, slot_at(id));
  slot_at(id).release(pool_);
  if (id < wheel_slots)
    occupied_[id / slots_per_level] &= ~(std::uint64_t{1} << (id % slots_per_level));
}

// Empties the staging area (I8) into the slots (I1-I4); with `update`, restores I9-I11.
void timer_wheel::file_staged(bool update) {
  catch_up();
  if (cancels_.count > 0) detail::cover([](detail::wheel_coverage& c) { ++c.cancel_flush_filing; });
  flush_cancels();
  staged_.min = ~tick_t{0};
  const std::uint32_t count = staged_.count;
  staged_.count = 0;
  for (std::uint32_t i = 0; i < count; ++i) file(*staged_.nodes[i], staged_.nodes[i]->tick_);
  if (update) update_next_work();
}

// Restores I9-I11 from the slots and visits.
void timer_wheel::update_next_work(const std::optional<expiration>* known) noexcept {
  tick_t visit = ~tick_t{0};
  for (std::uint32_t m = big_levels_; m != 0; m &= m - 1) {
    const auto level = static_cast<unsigned>(std::countr_zero(m));
    if (occupied_[level] != 0 && visits_[level].next_tick < visit) visit = visits_[level].next_tick;
  }
  next_visit_ = visit;
  if (overdue_.live > 0) {
    next_work_ = elapsed_;
    next_due_known_ = false;
    set_file_now_from();
    set_fast_limit();
    return;
  }
  const std::optional<expiration> e = known != nullptr ? *known : next_expiration();
  next_due_ = e ? e->tick : ~tick_t{0};
  next_due_known_ = true;
  next_work_ = next_due_ < visit ? next_due_ : visit;
  set_file_now_from();
  set_fast_limit();
}

void timer_wheel::set_file_now_from() noexcept {
  tick_t from = elapsed_ + 1;
  if (next_work_ > from) from = next_work_;
  if (next_due_ > from) from = next_due_;
  file_now_from_ = from;
}

void timer_wheel::set_fast_limit() noexcept {
  fast_limit_ = first_instant(next_work_);
  fast_before_ = fast_limit_;
  lower_to_staged(fast_before_);
}

void timer_wheel::lower_to_staged(clock::rep& before) noexcept {
  // With nothing staged, the bound starts over: a node staged later lowers it again (stage());
  // kept, a stale bound below that node's deadline would keep it from lowering fast_before_.
  if (staged_.count == 0) {
    staged_.min = ~tick_t{0};
    return;
  }
  if (first_instant(staged_.min) < before) before = first_instant(staged_.min);
}


// The stall this avoids: a pushed-back deadline stays in its old slot (lazy reschedule), so
// when a high slot comes due, all its nodes would be re-filed in that one advance() (a 4 s slot
// of a million idle connections holds ~1/8 of them). Instead, while a level's next occupied
// slot is still ahead, nodes whose deadline was pushed beyond that slot are re-filed a chunk at
// a time, paced to finish within the first half of the time left before the slot comes due.
// Visits only move nodes whose deadline lies after the slot (to later slots: nothing moves
// earlier, so exactness does not depend on them). A pass over a slot starts only when at least
// a quarter of a sample of its nodes (8, evenly spaced) were pushed beyond it, so expiry of
// timers that were never pushed reads almost no node twice; a pass that ends starts over under
// the same rule, so a node pushed after the pass read its entry is still moved early. What still re-files at once when
// the slot comes due is what was not pushed: deadlines genuinely in the slot. Slots of fewer
// than 512 nodes are not visited (re-filing them whole is cheap), so a wheel with few timers
// keeps taking the O(1) path of advance(); once a slot was visited, further passes go on down
// to 64 live nodes.
// Whether at least a quarter of 8 live entries, the first at or after each of 8 evenly spaced
// indexes (up to 64 entries on: after a pass most entries are holes), have a deadline at or
// after `end_tick` (the slot's end): reads up to 8 nodes and 512 entries.
bool timer_wheel::mostly_pushed(slot& sl, tick_t end_tick) noexcept {
  constexpr std::uint32_t samples = 8;
  constexpr std::uint32_t reach = 64;
  std::uint32_t seen = 0;
  std::uint32_t pushed = 0;
  for (std::uint32_t k = 0; k < samples; ++k) {
    auto i = static_cast<std::uint32_t>(std::uint64_t{k} * sl.size / samples);
    const std::uint32_t stop = sl.size - i > reach ? i + reach : sl.size;
    while (i < stop && detail::is_hole(sl.at(i))) ++i;
    if (i == stop) continue;
    ++seen;
    detail::cover([](detail::wheel_coverage& c) { ++c.sample_nodes; });
    if (sl.at(i)->tick_ >= end_tick) ++pushed;
  }
  return pushed > 0 && pushed * 4 >= seen;
}

// Keeps I2 (a node moves only to a later slot, re-filed by refile()) and I9 (next_visit_).
void timer_wheel::visit(unsigned level) {
  constexpr std::uint64_t chunk_min = 64;
  const unsigned here = detail::slot_for(elapsed_, level);
  // The level's own slot, when occupied, is inside its span and comes due at its `due` tick
  // (next_expiration()); visits are for the next slot after it. With none, there is nothing to
  // visit before the own slot comes due, when the visit looks again.
  const std::uint64_t own = std::uint64_t{1} << here;
  const std::uint64_t later = occupied_[level] & ~own;
  if (later == 0) {
    visits_[level] = visit_state{levels_[level][here].due, 0, 0, 0};
    return;
  }
  const auto slots_ahead = static_cast<unsigned>(std::countr_zero(std::rotr(later, static_cast<int>(here))));
  const unsigned s = (here + slots_ahead) & (slots_per_level - 1);
  const auto id = static_cast<std::uint16_t>(level * slots_per_level + s);
  visit_state& v = visits_[level];
  if (v.slot != id) v = visit_state{elapsed_, 0, 0, id};
  if (elapsed_ < v.next_tick) return;
  slot& sl = slot_at(id);
  const tick_t start = detail::ring_start(elapsed_, level, slots_ahead);
  const tick_t end_tick = start + detail::slot_span(level);
  const tick_t left = start - elapsed_;  // >= 1: every occupied slot starts after elapsed_
  const std::uint32_t size = sl.size;
  // A pass that reached the end starts over: nodes whose entry it read before their deadline
  // was pushed (heartbeats arrive all the time) are still in the slot, and would otherwise all
  // be re-filed in the one advance() that finds the slot due.
  if (v.cursor >= size) {
    detail::cover([](detail::wheel_coverage& c) { ++c.visit_restarts; });
    v.cursor = 0;
  }
  // Small slots are re-filed at once when due (cheap enough); a slot already visited keeps its
  // passes down to an eighth of that, so the tail a pass leaves is re-filed early too.
  const std::uint32_t min_live = v.finish == 0 ? visit_min_live_ : visit_min_live_ / 8;
  if (v.cursor == 0 && sl.live < min_live) {
    // A slot with fewer entries than visit_min_live_, never visited, sleeps until it is due:
    // file() wakes the level when an append brings a slot to visit_min_live_ entries (polling
    // instead cost a small wheel an advance_to() every few ticks). A slot that has the entries
    // but not the live nodes (holes may be refilled), or was visited (its tail may still be
    // pushed), is looked at again half way.
    v.next_tick = v.finish == 0 && sl.size < visit_min_live_
                      ? start
                      : elapsed_ + (left / 2 > 0 ? left / 2 : 1);
    return;
  }
  if (v.cursor == 0 && !mostly_pushed(sl, end_tick)) {
    v.next_tick = elapsed_ + (left / 8 > 0 ? left / 8 : 1);
    return;
  }
  // A pass is paced to end by a tick fixed when it starts, half way to the slot's start: a
  // pace recomputed from the time left at each step would keep halving and push the bulk of
  // the pass into the last ticks before the slot comes due.
  if (v.cursor == 0) v.finish = elapsed_ + (left / 2 > 0 ? left / 2 : 1);
  const std::uint64_t remaining = size - v.cursor;
  const tick_t span = v.finish > elapsed_ ? v.finish - elapsed_ : 1;
  const std::uint64_t per_tick = (remaining + span - 1) / span;
  std::uint64_t chunk = per_tick;
  tick_t gap = 1;
  if (per_tick < chunk_min) {
    chunk = remaining < chunk_min ? remaining : chunk_min;
    gap = chunk * span / remaining;
    if (gap == 0) gap = 1;
  }
  v.next_tick = elapsed_ + gap;
  const std::uint32_t stop =
      v.cursor + chunk < size ? static_cast<std::uint32_t>(v.cursor + chunk) : size;
  // Prefetching runs 32 entries ahead, into the next step's first entries too: a step starts
  // on nodes already in cache instead of paying serial misses. The entries are walked a block
  // at a time through a plain pointer, the slot's hole stack and live count kept in locals:
  // at 1e6 idle connections nearly every node a visit reads is moved, and the loop's
  // instructions are a good part of what a heartbeat costs the wheel (docs/timer.md).
  constexpr std::uint32_t ahead = 32;
  const std::uint32_t reach = stop + ahead < size ? stop + ahead : size;
  std::uint32_t hole = sl.hole;
  std::uint32_t live = sl.live;
  std::uint32_t i = v.cursor;
  // Most moved nodes stay on this level (a deadline pushed a little later): those with a
  // deadline in [same_from, same_to) go to a slot of `level` (ring_end()), appended inline with
  // the step's constants (the level's array, its shift and first id): two compares instead of
  // ring_level(). The rest take refile(). Such a slot is never `sl`: its deadline is at or after
  // sl's end and fewer than 64 slots after elapsed_'s own slot there.
  const tick_t same_from = detail::ring_end(elapsed_, level - 1);
  const tick_t same_to = detail::ring_end(elapsed_, level);
  const unsigned shift = level * detail::slot_bits;
  slot* const lv = levels_[level];
  const auto first_id = static_cast<std::uint16_t>(level * slots_per_level);
  while (i < stop && live > 0) {
    timer_node** const e = sl.block(i >> detail::block_bits);
    const std::uint32_t base = i & ~(detail::block_entries - 1);
    const std::uint32_t block_stop = stop - base < detail::block_entries ? stop : base + detail::block_entries;
    // The lookahead prefetches nodes from this block's entries; those of the next block's first
    // entries that it would reach are prefetched at once, as the walk enters this block.
    const std::uint32_t block_end = base + detail::block_entries;
    const std::uint32_t pf_stop = reach < block_end ? reach : block_end;
    if (reach > block_end) {
      timer_node* const* const next = sl.block(block_end >> detail::block_bits);
      for (std::uint32_t k = 0; k < ahead && block_end + k < reach; ++k)
        if (!detail::is_hole(next[k])) __builtin_prefetch(next[k], 1);
    }
    for (; i < block_stop; ++i) {
      if (i + ahead < pf_stop) {
        timer_node* const p = e[i + ahead - base];
        if (!detail::is_hole(p)) __builtin_prefetch(p, 1);
      }
      timer_node* const n = e[i - base];
      detail::cover([](detail::wheel_coverage& c) { ++c.visit_entries; });
      if (detail::is_hole(n)) continue;
      detail::cover([](detail::wheel_coverage& c) { ++c.visit_nodes; });
      const tick_t t = n->tick_;
      if (t < end_tick) continue;
      e[i - base] = detail::hole_linking(hole);
      hole = i;
      detail::cover([](detail::wheel_coverage& c) { ++c.visit_moves; });
      const unsigned to = static_cast<unsigned>(t >> shift) & (slots_per_level - 1);
      if (t < same_from || t >= same_to || !append_moved(lv[to], static_cast<std::uint16_t>(first_id + to), *n, t))
        refile(*n);  // a later slot, never this one
      if (--live == 0) break;
    }
  }
  moved_ += sl.live - live;  // each move took one live node out
  sl.hole = hole;
  sl.live = live;
  if (live == 0) {
    detail::cover([](detail::wheel_coverage& c) { ++c.visit_emptied; });
    forget_big(level, sl);
    sl.release(pool_);
    occupied_[level] &= ~(std::uint64_t{1} << s);
    v = visit_state{};
    return;
  }
  v.cursor = static_cast<std::uint32_t>(stop);
}

// Keeps I1-I4 (each node fires into batch_, cascades or is re-filed; the slot is released).
void timer_wheel::process(const expiration& e, tick_t now) {
  // Detach the slot first: re-filed nodes go to other slots (a node in [slot start, slot end)
  // lands on a lower level; one pushed later lands on a later slot), never back into this one.
  slot& sl = levels_[e.level][e.slot];
  occupied_[e.level] &= ~(std::uint64_t{1} << e.slot);
  detail::cover([&e](detail::wheel_coverage& c) { ++c.processed[e.level]; });
  forget_big(e.level, sl);
  sl.detach(scratch_);
  elapsed_ = e.tick;
  const std::uint32_t count = scratch_.size;
  const slot& from = scratch_;  // not touched below until released
  // Block by block, so an entry is one load from the block's array (not a lookup through the
  // block table per entry, a large share of the per-node work). Nodes are fetched 64 entries ahead
  // (into the next block near a block's end): each is a miss at a million timers. At 1e6 idle
  // connections this loop and visit()'s are where the wheel's share of a heartbeat goes.
  constexpr std::uint32_t ahead = 64;
  const auto take = [this, now](timer_node* n) {
    if (detail::is_hole(n)) return;
    detail::cover([](detail::wheel_coverage& c) { ++c.due_nodes; });
    if (n->tick_ <= now) {
      --size_;
      batch_.add(*n);
    } else {
      detail::cover([](detail::wheel_coverage& c) { ++c.cascade_moves; });
      ++moved_;
      refile(*n);
    }
  };
  if (count <= detail::block_entries) {  // one block: most slots of a small wheel
    timer_node* const* entries = from.block(0);
    for (std::uint32_t i = 0; i < count; ++i) {
      if (i + ahead < count && !detail::is_hole(entries[i + ahead])) __builtin_prefetch(entries[i + ahead], 1);
      take(entries[i]);
    }
    scratch_.release(pool_);
    return;
  }
  for (std::uint32_t base = 0; base < count; base += detail::block_entries) {
    timer_node* const* entries = from.block(base >> detail::block_bits);
    const std::uint32_t len = count - base < detail::block_entries ? count - base : detail::block_entries;
    // Entries [0, len) of this block; those at i + ahead lie here up to `near`, then in the next
    // block (as far as `count` reaches).
    const std::uint32_t near = len > ahead ? len - ahead : 0;
    const std::uint32_t beyond = count - base > len ? count - base - len : 0;
    timer_node* const* next = beyond > 0 ? from.block((base >> detail::block_bits) + 1) : nullptr;
    for (std::uint32_t i = 0; i < near; ++i) {
      if (!detail::is_hole(entries[i + ahead])) __builtin_prefetch(entries[i + ahead], 1);
      take(entries[i]);
    }
    for (std::uint32_t i = near; i < len; ++i) {
      if (i + ahead - len < beyond && !detail::is_hole(next[i + ahead - len]))
        __builtin_prefetch(next[i + ahead - len], 1);
      take(entries[i]);
    }
  }
  scratch_.release(pool_);
}

std::size_t timer_wheel::advance_slow(clock::time_point now) {
  const clock::rep ns = now.time_since_epoch().count();
  clock::rep before = fast_limit_;
  lower_to_staged(before);
  if (ns < before) {
    detail::cover([](detail::wheel_coverage& c) { ++c.fast_advances; });
    fast_before_ = before;
    if (ns > latest_) latest_ = ns;
    return 0;
  }
  return advance_to(scale_.now_tick(now));
}

std::size_t timer_wheel::advance_to(tick_t now) {
  assert(!advancing_ && "advance() called from an expiry callback");
  catch_up();
  if (now < elapsed_) return 0;
  advancing_ = true;
  if (staged_.count > 0) {
    detail::cover([](detail::wheel_coverage& c) { ++c.stage_flush_advance; });
    file_staged(false);
  } else {
    staged_.min = ~tick_t{0};
    flush_cancels();
  }

  slot& overdue = overdue_;
  if (overdue.live > 0) {
    size_ -= overdue.live;
    overdue.for_each([this](timer_node* n) { batch_.add(*n); });
    overdue.release(pool_);
  }
  std::optional<expiration> e;
  while ((e = next_expiration()) && e->tick <= now) process(*e, now);
  elapsed_ = now;
  // e is still the next slot to come due unless a visit re-files nodes: moving elapsed_ up to a
  // tick before every occupied slot's start changes no slot's start.
  bool visited = false;
  if (elapsed_ >= next_visit_)
    for (std::uint32_t m = big_levels_; m != 0; m &= m - 1) {
      const auto level = static_cast<unsigned>(std::countr_zero(m));
      if (occupied_[level] != 0) {
        visit(level);
        visited = true;
      }
    }
  update_next_work(visited ? nullptr : &e);

  const std::size_t fired = batch_.fire_all();
  advancing_ = false;
  return fired;
}

}  // namespace cogwheel::timer
