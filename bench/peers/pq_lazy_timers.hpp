// pq_lazy: the timer queue many programs write first. A std::priority_queue of (deadline, timer,
// generation) entries; cancel does not search the heap, it bumps the timer's generation so its
// entry goes stale, and pops skip stale entries. Rescheduling is cancel + push.
//
// Stale entries would pile up without bound under schedule/cancel churn, so the heap is rebuilt
// without them once they outnumber the live ones (the rule of Python's asyncio event loop: more
// than half the heap cancelled). The rebuild is O(heap) after ~live cancels, i.e. O(1) amortized
// per cancel, and it is inside the timed loops like any other cost of the structure.
//
// Time is a tick count (1 ms) passed in by the caller, like the wheel's: this peer runs on the
// same fake clock as timer_bench, so every workload, expire included, is exactly timer_bench's.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <queue>
#include <vector>

#include "workload.hpp"

namespace peers {

class pq_lazy_timers {
 public:
  static constexpr const char* name = "pq_lazy";
  static constexpr bool fake_clock = true;

  // n idle timers; the queue's time is start_tick (timer_bench's start: 1e9 ms).
  explicit pq_lazy_timers(std::size_t n, std::uint64_t start_tick = 1'000'000'000)
      : timers_(new timer[n + 1]), spare_(n), now_(start_tick) {}

  // Precondition: timer i is idle. O(log n).
  void schedule(std::size_t i, milliseconds delay) { push(i, now_ + static_cast<std::uint64_t>(delay.count())); }

  // Idempotent. O(1) amortized (see the rebuild rule above).
  void cancel(std::size_t i) {
    timer& t = timers_[i];
    if (!t.pending) return;
    t.pending = false;
    ++t.generation;
    --live_;
    if (++stale_ > live_ && heap_.size() >= 64) rebuild();
  }

  // Pending timer i's deadline moves bump later: cancel + push (there is no way to move an entry).
  void push_later(std::size_t i, milliseconds bump) {
    const std::uint64_t deadline = timers_[i].deadline + static_cast<std::uint64_t>(bump.count());
    cancel(i);
    push(i, deadline);
  }

  void schedule_spare(milliseconds delay) { schedule(spare_, delay); }
  void cancel_spare() { cancel(spare_); }
  void end_batch() noexcept {}

  // Whether the n pending timers are all still pending (the spare is idle between operations).
  bool holds(std::size_t n) const noexcept { return live_ == n; }
  bool empty() const noexcept { return live_ == 0; }
  std::uint64_t now() const noexcept { return now_; }

  // The earliest live deadline (pops the stale entries in front of it); 0 when empty.
  std::uint64_t next_deadline() {
    drop_stale_top();
    return heap_.empty() ? 0 : heap_.top().tick;
  }

  // Moves the time to now (ticks) and fires every timer due at or before it. Returns how many.
  std::size_t advance(std::uint64_t now) {
    now_ = std::max(now_, now);
    std::size_t fired = 0;
    while (!heap_.empty() && heap_.top().tick <= now_) {
      const entry e = heap_.top();
      heap_.pop();
      timer& t = timers_[e.id];
      if (e.generation != t.generation) {
        --stale_;
        continue;
      }
      t.pending = false;
      --live_;
      ++fired;
    }
    return fired;
  }

 private:
  struct entry {
    std::uint64_t tick;
    std::uint32_t id;
    std::uint32_t generation;  // stale once it differs from the timer's
  };
  struct later {
    bool operator()(const entry& a, const entry& b) const noexcept { return a.tick > b.tick; }
  };
  // std::priority_queue with its container reachable, for the rebuild without stale entries.
  struct queue : std::priority_queue<entry, std::vector<entry>, later> {
    using std::priority_queue<entry, std::vector<entry>, later>::c;
    using std::priority_queue<entry, std::vector<entry>, later>::comp;
  };
  struct timer {
    std::uint64_t deadline = 0;
    std::uint32_t generation = 0;
    bool pending = false;
  };

  void push(std::size_t i, std::uint64_t deadline) {
    timer& t = timers_[i];
    assert(!t.pending);
    t.deadline = deadline;
    t.pending = true;
    ++live_;
    heap_.push(entry{deadline, static_cast<std::uint32_t>(i), t.generation});
  }

  void drop_stale_top() {
    while (!heap_.empty() && heap_.top().generation != timers_[heap_.top().id].generation) {
      heap_.pop();
      --stale_;
    }
  }

  void rebuild() {
    std::vector<entry>& c = heap_.c;
    std::erase_if(c, [this](const entry& e) { return e.generation != timers_[e.id].generation; });
    std::make_heap(c.begin(), c.end(), heap_.comp);
    stale_ = 0;
  }

  std::unique_ptr<timer[]> timers_;  // n timers and the spare (index n)
  std::size_t spare_;
  queue heap_;
  std::uint64_t now_;
  std::size_t live_ = 0;
  std::size_t stale_ = 0;  // entries in heap_ whose timer was cancelled or rescheduled since
};

}  // namespace peers
