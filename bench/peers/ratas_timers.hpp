// ratas: Juho Snellman's hierarchical timer wheel (github.com/jsnell/ratas, header-only,
// src/timer-wheel.h): 9 levels of 256 slots, each slot an intrusive doubly linked list, an event
// per timer with a virtual execute(); a later deadline is applied by relinking (no lazy push);
// no occupancy bitmap. Not packaged anywhere: this peer is compiled in when its header is found
// (CMake: -DCOGWHEEL_RATAS_INCLUDE_DIR=<ratas>/src), and nothing of it is in this repository.
//
// Time is a tick count (1 ms) on the same fake clock as timer_bench and pq_lazy, so every row,
// expire included, is exactly timer_bench's workload. Each timer's callback runs (it counts the
// timer as fired), as cogwheel's do.
#pragma once

#include <timer-wheel.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "workload.hpp"

namespace peers {

class ratas_timers {
 public:
  static constexpr const char* name = "ratas";
  static constexpr bool fake_clock = true;

  // n idle timers; the wheel's time is start_tick (timer_bench's start: 1e9 ms).
  explicit ratas_timers(std::size_t n, std::uint64_t start_tick = 1'000'000'000)
      : wheel_(start_tick), timers_(new timer[n + 1]), spare_(n) {
    for (std::size_t i = 0; i <= n; ++i) timers_[i].live = &live_;
  }

  // Precondition: timer i is idle. delay >= 1 ms (timer_bench's deadlines are).
  void schedule(std::size_t i, milliseconds delay) {
    wheel_.schedule(&timers_[i], static_cast<Tick>(delay.count()));
    ++live_;
  }
  // Idempotent.
  void cancel(std::size_t i) {
    if (!timers_[i].active()) return;
    timers_[i].cancel();
    --live_;
  }
  // Pending timer i's deadline moves bump later: ratas relinks the event (schedule() on an
  // active event).
  void push_later(std::size_t i, milliseconds bump) {
    timer& t = timers_[i];
    wheel_.schedule(&t, t.scheduled_at() + static_cast<Tick>(bump.count()) - wheel_.now());
  }

  void schedule_spare(milliseconds delay) { schedule(spare_, delay); }
  void cancel_spare() { cancel(spare_); }
  void end_batch() noexcept {}

  bool holds(std::size_t n) const noexcept { return live_ == n; }
  bool empty() const noexcept { return live_ == 0; }
  std::uint64_t now() const noexcept { return wheel_.now(); }

  // Moves the time to now (ticks) and fires every timer due at or before it. Returns how many.
  std::size_t advance(std::uint64_t now) {
    if (now <= wheel_.now()) return 0;
    const std::size_t before = live_;
    wheel_.advance(now - wheel_.now());
    return before - live_;
  }

 private:
  // One event per timer: ratas' node (vtable, deadline, slot, next, prev) and the counter its
  // callback decrements.
  struct timer final : TimerEventInterface {
    std::size_t* live = nullptr;
    void execute() override { --*live; }
  };

  TimerWheel wheel_;                 // declared first: the events cancel themselves on destruction
  std::unique_ptr<timer[]> timers_;  // n timers and the spare (index n)
  std::size_t spare_;
  std::size_t live_ = 0;
};

}  // namespace peers
