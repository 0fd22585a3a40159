// striped_list_wheel: a design probe (issue 27 item 2, docs/timer.md "Churn against ratas and
// the linked wheel"), measured by timer_bench as rows <op>/striped<K>/<N>. Benchmark code, not
// a library part: no destructor checks, no expiry batch; callbacks run inline while the wheel is
// advancing and must not touch the wheel (timer_bench's are null, timer_instructions' empty).
//
// The question it answers: can one wheel have ratas's schedule and cancel (an intrusive list per
// slot: ~50 instructions, no staging area, no cancel log) and still expire in bulk at a third of
// ratas's time (timer_wheel walks arrays of node pointers and prefetches ahead)? A plain list
// expires slowly because each node's address is in the node before it: one miss in flight. Here
// every slot holds K independent lists (the "stripes"); schedule puts a node on stripe
// `round_robin++ % K`, so a slot of m nodes is K chains of ~m/K. Expiry and cascade detach the
// slot's K lists and walk them interleaved, one node from each per step, prefetching each
// list's next node as it is read: K misses in flight instead of one.
//
// Same geometry and semantics as timer_wheel: 11 levels x 64 slots, ring placement
// (detail::ring_level, slot_for; a deadline goes to the lowest level whose ring reaches it),
// one occupancy bitmap word per level, exact cascading (a due slot's nodes fire or are re-filed
// lower), never early, deadlines rounded up to ticks by tick_scale as timer_wheel does. No lazy
// later deadlines: reschedule is unlink + link, as in ratas.
//
// The node: 32 bytes, {next, pprev, tick, on_expire}. pprev is the address of the pointer that
// points at the node (a stripe head or the previous node's `next`), so unlinking needs no slot
// lookup; null pprev means idle (the node's whole state). The slot is implied: only when a
// node was its stripe's only one (pprev points into heads_ and next is null) does cancel compute
// the slot from pprev and test the slot's K heads (one cache line at K = 8) to clear the
// occupancy bit, so next_deadline() is a slot start that holds a timer.
//
// Variants, for the probe's questions only: Node = striped_node24 drops the per-node callback
// (24 bytes, the wheel's one callback fires it; timer_bench's struct of node and deadline is then
// 32 bytes, as for the other queues, instead of 64). Lazy = true never clears an occupancy bit
// on cancel: the neighbour's pprev write goes to a sink node when there is no neighbour (a
// select, no branch), and advance() clears the bit of an emptied slot when it reaches it; next
// deadline() may then be the start of an empty slot (timer_wheel's contract allows an early
// answer: "never later than the earliest deadline").
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <cogwheel/timer/detail/wheel_index.hpp>
#include <cogwheel/timer/ticks.hpp>

namespace cogwheel_bench {

namespace ct = cogwheel::timer;

struct striped_node {
  using expire_fn = void (*)(striped_node&) noexcept;

  striped_node* next = nullptr;
  striped_node** pprev = nullptr;  // null while not scheduled
  ct::tick_t tick = 0;
  expire_fn on_expire = nullptr;   // per node, as timer_node's

  bool scheduled() const noexcept { return pprev != nullptr; }
};
static_assert(sizeof(striped_node) == 32);

// The same without a callback of its own (24 bytes, as linked_node; the wheel's one callback
// fires it): only to tell the node's size from the design in timer_bench, whose bench struct
// (node + deadline) is 32 bytes with this node and 64 with striped_node.
struct striped_node24 {
  striped_node24* next = nullptr;
  striped_node24** pprev = nullptr;
  ct::tick_t tick = 0;

  bool scheduled() const noexcept { return pprev != nullptr; }
};

template <unsigned K, class Node = striped_node, bool Lazy = false>
class striped_list_wheel {
  static_assert(K >= 1 && (K & (K - 1)) == 0, "K is a power of two");

 public:
  using expire_fn = void (*)(Node&) noexcept;  // the wheel's callback, for nodes without one

  explicit striped_list_wheel(ct::clock::duration tick, ct::clock::time_point start = {},
                              expire_fn on_expire = nullptr)
      : scale_(tick), elapsed_(scale_.now_tick(start)), on_expire_(on_expire) {}
  striped_list_wheel(const striped_list_wheel&) = delete;
  striped_list_wheel& operator=(const striped_list_wheel&) = delete;

  void schedule(Node& n, ct::clock::time_point deadline) {
    file(n, scale_.deadline_tick(deadline));
    ++size_;
  }

  bool cancel(Node& n) noexcept {
    if (n.pprev == nullptr) return false;
    unlink(n);
    --size_;
    return true;
  }

  void reschedule(Node& n, ct::clock::time_point deadline) {
    if (n.pprev != nullptr)
      unlink(n);
    else
      ++size_;
    file(n, scale_.deadline_tick(deadline));
  }

  std::size_t advance(ct::clock::time_point now_tp) {
    const ct::tick_t now = scale_.now_tick(now_tp);
    if (now < elapsed_) return 0;
    std::size_t fired = overdue_ != nullptr ? fire_overdue() : 0;
    if (now < next_start_) {  // nothing due: O(1), the common advance() of an event loop
      elapsed_ = now;
      return fired;
    }
    for (;;) {
      unsigned level = 0;
      unsigned slot = 0;
      const ct::tick_t start = earliest(level, slot);
      if (start > now) {
        next_start_ = start;
        break;
      }
      occupied_[level] &= ~(std::uint64_t{1} << slot);
      // A slot whose cascade waited (next_start_ above its start) starts before elapsed_, which
      // never moves back: its nodes are re-filed from elapsed_ (all are later than it).
      if (start > elapsed_) elapsed_ = start;
      fired += take_slot(&heads_[(level * slots + slot) * K], now);
    }
    elapsed_ = now;
    return fired;
  }

  std::optional<ct::clock::time_point> next_deadline() const noexcept {
    if (overdue_ != nullptr) return scale_.time_of(elapsed_);
    unsigned level = 0;
    unsigned slot = 0;
    const ct::tick_t start = earliest(level, slot);
    if (level == levels) return std::nullopt;
    return scale_.time_of(start < elapsed_ ? elapsed_ : start);
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  ct::clock::time_point now() const noexcept { return scale_.time_of(elapsed_); }
  // Memory the wheel holds besides its nodes: the stripe heads and bitmaps, nothing per timer.
  std::size_t memory_bytes() const noexcept { return sizeof(*this); }

 private:
  static constexpr unsigned levels = ct::detail::level_count;
  static constexpr unsigned slots = ct::detail::slots_per_level;

  // The first tick of the slot `ahead` slots after elapsed's own at `level`, saturated (the top
  // level's ring would run past 2^64).
  ct::tick_t ring_start(unsigned level, unsigned ahead) const noexcept {
    const unsigned shift = level * ct::detail::slot_bits;
    const ct::tick_t base = (elapsed_ >> shift) + ahead;
    if (shift > 0 && base > (~ct::tick_t{0} >> shift)) return ~ct::tick_t{0};
    return base << shift;
  }

  // The earliest start among each level's first occupied slot in ring order, and that slot
  // (level == levels and ~0 when the wheel is empty).
  ct::tick_t earliest(unsigned& best_level, unsigned& best_slot) const noexcept {
    ct::tick_t best = ~ct::tick_t{0};
    best_level = levels;
    for (unsigned level = 0; level < levels; ++level) {
      const std::uint64_t occ = occupied_[level];
      if (occ == 0) continue;
      const unsigned cur = ct::detail::slot_for(elapsed_, level);
      const unsigned ahead = static_cast<unsigned>(std::countr_zero(std::rotr(occ, static_cast<int>(cur))));
      const ct::tick_t start = ring_start(level, ahead);
      if (start < best) {
        best = start;
        best_level = level;
        best_slot = (cur + ahead) & (slots - 1);
      }
    }
    return best;
  }

  void file(Node& n, ct::tick_t t) noexcept {
    n.tick = t;
    Node** head = &overdue_;
    if (t > elapsed_) {
      const unsigned level = ct::detail::ring_level(elapsed_, t);
      const unsigned s = ct::detail::slot_for(t, level);
      head = &heads_[(level * slots + s) * K + (stripe_++ & (K - 1))];
      occupied_[level] |= std::uint64_t{1} << s;
      if (t < next_start_) next_start_ = t;
    }
    n.next = *head;
    if constexpr (Lazy) {
      (n.next != nullptr ? n.next : &sink_)->pprev = &n.next;  // a select, not a branch
    } else {
      if (n.next != nullptr) n.next->pprev = &n.next;
    }
    n.pprev = head;
    *head = &n;
  }

  void unlink(Node& n) noexcept {
    *n.pprev = n.next;
    if constexpr (Lazy) {
      (n.next != nullptr ? n.next : &sink_)->pprev = n.pprev;
    } else if (n.next != nullptr) {
      n.next->pprev = n.pprev;
    } else if (n.pprev >= heads_.data() && n.pprev < heads_.data() + heads_.size()) {
      // The stripe is empty now; the slot is empty when all K stripes are.
      const auto id = static_cast<unsigned>(n.pprev - heads_.data()) / K;
      Node* const* group = &heads_[id * K];
      std::uintptr_t any = 0;
      for (unsigned i = 0; i < K; ++i) any |= reinterpret_cast<std::uintptr_t>(group[i]);
      if (any == 0) occupied_[id / slots] &= ~(std::uint64_t{1} << (id % slots));
    }
    n.pprev = nullptr;
  }

  // Detaches a due slot's K stripes and walks them interleaved: one node of each stripe per
  // step, the stripe's next node prefetched (for writing: pprev is written) as soon as its
  // address is read, so up to K misses are in flight. Each node fires (tick <= now) or is
  // re-filed below (elapsed_ is the slot's start, so it lands at a lower level).
  std::size_t take_slot(Node** group, ct::tick_t now) noexcept {
    std::array<Node*, K> cur;
    for (unsigned i = 0; i < K; ++i) {
      cur[i] = group[i];
      group[i] = nullptr;
    }
    std::size_t fired = 0;
    for (;;) {
      bool any = false;
      for (unsigned i = 0; i < K; ++i) {
        Node* const n = cur[i];
        if (n == nullptr) continue;
        any = true;
        Node* const nx = n->next;
        if (nx != nullptr) __builtin_prefetch(nx, 1);
        cur[i] = nx;
        n->pprev = nullptr;
        if (n->tick <= now) {
          --size_;
          ++fired;
          fire(*n);
        } else {
          file(*n, n->tick);
        }
      }
      if (!any) break;
    }
    return fired;
  }

  void fire(Node& n) noexcept {
    if constexpr (requires { n.on_expire; }) {
      if (n.on_expire != nullptr) n.on_expire(n);
    } else {
      if (on_expire_ != nullptr) on_expire_(n);
    }
  }

  std::size_t fire_overdue() noexcept {
    std::size_t fired = 0;
    Node* list = overdue_;
    overdue_ = nullptr;
    while (list != nullptr) {
      Node* n = list;
      list = n->next;
      n->pprev = nullptr;
      --size_;
      ++fired;
      fire(*n);
    }
    return fired;
  }

  ct::tick_scale scale_;
  ct::tick_t elapsed_;
  std::size_t size_ = 0;
  expire_fn on_expire_;
  std::uint32_t stripe_ = 0;  // round-robin stripe of the next link
  // At most the earliest pending tick: advance() to an earlier time has nothing to fire and
  // returns at once. Set to the earliest slot start by a scan, lowered to each filed tick (not
  // to its slot's start: cheaper, and a cascade may wait until something in it is due; cancel
  // leaves it low, and the next advance() past it rescans once).
  ct::tick_t next_start_ = ~ct::tick_t{0};
  std::array<std::uint64_t, levels> occupied_{};
  Node* overdue_ = nullptr;
  Node sink_;  // Lazy: takes the pprev write when a node has no successor
  alignas(64) std::array<Node*, levels * slots * K> heads_{};
};

}  // namespace cogwheel_bench
