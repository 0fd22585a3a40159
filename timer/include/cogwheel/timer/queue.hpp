/// @file
/// timer_queue: a timer_wheel or a timer_heap chosen at run time.
#pragma once

#include <array>
#include <variant>

#include <cogwheel/timer/heap.hpp>
#include <cogwheel/timer/kind.hpp>
#include <cogwheel/timer/wheel.hpp>

namespace cogwheel::timer {

/// A timer_wheel or a timer_heap chosen at run time, so one program (the runtime, a benchmark)
/// runs identical work on either. Dispatch is one well-predicted branch, no virtual call. Each
/// member has the contract of the same member of timer_wheel (wheel.hpp) and timer_heap.
class timer_queue {
  template <class F>
  decltype(auto) visit(F&& f) {
    if (auto* w = std::get_if<timer_wheel>(&queue_)) return f(*w);
    return f(*std::get_if<timer_heap>(&queue_));
  }
  template <class F>
  decltype(auto) visit(F&& f) const {
    if (const auto* w = std::get_if<timer_wheel>(&queue_)) return f(*w);
    return f(*std::get_if<timer_heap>(&queue_));
  }

 public:
  /// A queue of `kind` whose time starts at `start`, counting in ticks of `tick`.
  explicit timer_queue(timer_kind kind = timer_kind::wheel,
                       clock::duration tick = std::chrono::milliseconds(1),
                       clock::time_point start = {}) {
    if (kind == timer_kind::wheel)
      queue_.emplace<timer_wheel>(tick, start);
    else
      queue_.emplace<timer_heap>(tick, start);
  }

  /// Which queue this is.
  timer_kind kind() const noexcept {
    return std::holds_alternative<timer_wheel>(queue_) ? timer_kind::wheel : timer_kind::heap;
  }

  /// Files n to fire at t. Precondition: !n.scheduled(). O(1) on the wheel, O(log n) on the heap.
  void schedule(timer_node& n, clock::time_point t) { visit([&](auto& q) { q.schedule(n, t); }); }
  /// Removes n if it is pending; returns whether it was (a second cancel is a no-op).
  bool cancel(timer_node& n) noexcept { return visit([&](auto& q) { return q.cancel(n); }); }
  /// Moves n's deadline to t, scheduling it if idle. O(1) on the wheel (a later deadline lazily).
  void reschedule(timer_node& n, clock::time_point t) {
    visit([&](auto& q) { q.reschedule(n, t); });
  }
  /// Moves the queue's time to `now` and fires every timer due by then, in one batch; returns
  /// how many fired. Precondition: not called from inside an expiry callback.
  std::size_t advance(clock::time_point now) { return visit([&](auto& q) { return q.advance(now); }); }
  /// The earliest time at which advance() may have work, never later than the earliest
  /// deadline; nullopt when empty.
  std::optional<clock::time_point> next_deadline() const noexcept {
    return visit([&](const auto& q) { return q.next_deadline(); });
  }
  /// How many timers are pending.
  std::size_t size() const noexcept { return visit([](const auto& q) { return q.size(); }); }
  /// Whether no timer is pending.
  bool empty() const noexcept { return size() == 0; }
  /// The length of one tick.
  clock::duration tick() const noexcept { return visit([](const auto& q) { return q.tick(); }); }
  /// The queue's time: the last tick advanced to.
  clock::time_point now() const noexcept { return visit([](const auto& q) { return q.now(); }); }
  /// Calls `fn(context, ...)` for each run of timers fired with the same deadline tick (the
  /// runtime's lateness histogram; see detail::expiry_batch::set_observer).
  void set_fire_observer(detail::expiry_batch::fire_observer fn, void* context) noexcept {
    visit([&](auto& q) { q.set_fire_observer(fn, context); });
  }
  /// Pending timers per wheel level, then overdue and unfiled (timer_wheel::pending_per_level);
  /// a heap puts them all at index 0. O(occupied slots): for metrics, not for a timer callback.
  std::array<std::size_t, detail::level_count + 1> pending_per_level() const noexcept {
    if (const auto* w = std::get_if<timer_wheel>(&queue_)) return w->pending_per_level();
    std::array<std::size_t, detail::level_count + 1> out{};
    out[0] = size();
    return out;
  }

 private:
  std::variant<std::monostate, timer_wheel, timer_heap> queue_;
};

}  // namespace cogwheel::timer
