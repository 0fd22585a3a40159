// linked_wheel: the textbook hierarchical timing wheel that timer_bench measures the library
// against, rows <op>/linked/<N>. A benchmark reference, not a library part: no destructor
// checks, no expiry batch; callbacks run inline while the wheel is advancing and must not touch
// the wheel (timer_bench's are null).
//
// Same geometry and index maths as timer_wheel (11 levels x 64 slots, one occupancy bitmap word
// per level, detail::wheel_index.hpp), same tick conversion (tick_scale), and exact cascading:
// when a slot comes due, its nodes are either fired or re-filed one level down. Each slot is an
// intrusive doubly linked list (Linux's hlist: a head pointer per slot, each node holds `next`
// and the address of the pointer that points at it), so schedule, cancel and reschedule touch
// the node, the slot head and at most one neighbour. reschedule is cancel + schedule (no lazy
// push). The expiry callback is one per wheel, which keeps the node at 24 bytes (a per-node
// function pointer would make it 32): the most favourable layout for the reference.
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

struct linked_node {
  linked_node* next = nullptr;
  linked_node** pprev = nullptr;  // null while not scheduled
  ct::tick_t tick = 0;

  bool scheduled() const noexcept { return pprev != nullptr; }
};

class linked_wheel {
 public:
  using expire_fn = void (*)(linked_node&) noexcept;

  explicit linked_wheel(ct::clock::duration tick, ct::clock::time_point start = {},
                        expire_fn on_expire = nullptr)
      : scale_(tick), elapsed_(scale_.now_tick(start)), on_expire_(on_expire) {}
  linked_wheel(const linked_wheel&) = delete;
  linked_wheel& operator=(const linked_wheel&) = delete;

  void schedule(linked_node& n, ct::clock::time_point deadline) {
    file(n, scale_.deadline_tick(deadline));
    ++size_;
  }

  bool cancel(linked_node& n) noexcept {
    if (n.pprev == nullptr) return false;
    unlink(n);
    --size_;
    return true;
  }

  void reschedule(linked_node& n, ct::clock::time_point deadline) {
    cancel(n);
    schedule(n, deadline);
  }

  std::size_t advance(ct::clock::time_point now_tp) {
    const ct::tick_t now = scale_.now_tick(now_tp);
    if (now < elapsed_) return 0;
    std::size_t fired = fire_list(overdue_);
    for (;;) {
      unsigned level = 0;
      while (level < levels && occupied_[level] == 0) ++level;
      if (level == levels) break;
      const unsigned s = static_cast<unsigned>(std::countr_zero(occupied_[level]));
      const ct::tick_t start =
          ct::detail::level_start(elapsed_, level) + s * ct::detail::slot_span(level);
      if (start > now) break;
      occupied_[level] &= ~(std::uint64_t{1} << s);
      linked_node* list = heads_[level * slots + s];
      heads_[level * slots + s] = nullptr;
      elapsed_ = start;
      while (list != nullptr) {
        linked_node* n = list;
        list = n->next;
        n->pprev = nullptr;
        if (n->tick <= now) {
          --size_;
          ++fired;
          if (on_expire_ != nullptr) on_expire_(*n);
        } else {
          file(*n, n->tick);
        }
      }
    }
    elapsed_ = now;
    return fired;
  }

  std::optional<ct::clock::time_point> next_deadline() const noexcept {
    if (overdue_ != nullptr) return scale_.time_of(elapsed_);
    for (unsigned level = 0; level < levels; ++level) {
      if (occupied_[level] == 0) continue;
      const unsigned s = static_cast<unsigned>(std::countr_zero(occupied_[level]));
      return scale_.time_of(ct::detail::level_start(elapsed_, level) +
                            s * ct::detail::slot_span(level));
    }
    return std::nullopt;
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  ct::clock::time_point now() const noexcept { return scale_.time_of(elapsed_); }
  // Memory the wheel holds besides its nodes: the slot heads and bitmaps, nothing per timer.
  std::size_t memory_bytes() const noexcept { return sizeof(*this); }

 private:
  static constexpr unsigned levels = ct::detail::level_count;
  static constexpr unsigned slots = ct::detail::slots_per_level;

  void file(linked_node& n, ct::tick_t t) noexcept {
    n.tick = t;
    linked_node** head = &overdue_;
    if (t > elapsed_) {
      const unsigned level = ct::detail::level_for(elapsed_, t);
      const unsigned s = ct::detail::slot_for(t, level);
      head = &heads_[level * slots + s];
      occupied_[level] |= std::uint64_t{1} << s;
    }
    n.next = *head;
    if (n.next != nullptr) n.next->pprev = &n.next;
    n.pprev = head;
    *head = &n;
  }

  void unlink(linked_node& n) noexcept {
    *n.pprev = n.next;
    if (n.next != nullptr) {
      n.next->pprev = n.pprev;
    } else if (n.pprev >= heads_.data() && n.pprev < heads_.data() + heads_.size() &&
               *n.pprev == nullptr) {  // the slot's last node: clear its bit
      const auto id = static_cast<unsigned>(n.pprev - heads_.data());
      occupied_[id / slots] &= ~(std::uint64_t{1} << (id % slots));
    }
    n.pprev = nullptr;
  }

  std::size_t fire_list(linked_node*& head) noexcept {
    std::size_t fired = 0;
    linked_node* list = head;
    head = nullptr;
    while (list != nullptr) {
      linked_node* n = list;
      list = n->next;
      n->pprev = nullptr;
      --size_;
      ++fired;
      if (on_expire_ != nullptr) on_expire_(*n);
    }
    return fired;
  }

  ct::tick_scale scale_;
  ct::tick_t elapsed_;
  std::size_t size_ = 0;
  expire_fn on_expire_;
  std::array<std::uint64_t, levels> occupied_{};
  std::array<linked_node*, levels * slots> heads_{};
  linked_node* overdue_ = nullptr;
};

}  // namespace cogwheel_bench
