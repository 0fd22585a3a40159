// timer_queue: a wheel or a heap chosen at run time, so one program (the runtime, a benchmark)
// runs identical work on either. Dispatch is one well-predicted branch, no virtual call.
#pragma once

#include <array>
#include <variant>

#include <cogwheel/timer/heap.hpp>
#include <cogwheel/timer/kind.hpp>
#include <cogwheel/timer/wheel.hpp>

namespace cogwheel::timer {

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
  explicit timer_queue(timer_kind kind = timer_kind::wheel,
                       clock::duration tick = std::chrono::milliseconds(1),
                       clock::time_point start = {}) {
    if (kind == timer_kind::wheel)
      queue_.emplace<timer_wheel>(tick, start);
    else
      queue_.emplace<timer_heap>(tick, start);
  }

  timer_kind kind() const noexcept {
    return std::holds_alternative<timer_wheel>(queue_) ? timer_kind::wheel : timer_kind::heap;
  }

  void schedule(timer_node& n, clock::time_point t) { visit([&](auto& q) { q.schedule(n, t); }); }
  bool cancel(timer_node& n) noexcept { return visit([&](auto& q) { return q.cancel(n); }); }
  void reschedule(timer_node& n, clock::time_point t) {
    visit([&](auto& q) { q.reschedule(n, t); });
  }
  std::size_t advance(clock::time_point now) { return visit([&](auto& q) { return q.advance(now); }); }
  std::optional<clock::time_point> next_deadline() const noexcept {
    return visit([&](const auto& q) { return q.next_deadline(); });
  }
  std::size_t size() const noexcept { return visit([](const auto& q) { return q.size(); }); }
  bool empty() const noexcept { return size() == 0; }
  clock::duration tick() const noexcept { return visit([](const auto& q) { return q.tick(); }); }
  clock::time_point now() const noexcept { return visit([](const auto& q) { return q.now(); }); }
  // See detail::expiry_batch::set_observer.
  void set_fire_observer(detail::expiry_batch::fire_observer fn, void* context) noexcept {
    visit([&](auto& q) { q.set_fire_observer(fn, context); });
  }
  // Pending timers per wheel level, then overdue and unfiled (timer_wheel::pending_per_level);
  // a heap puts them all at index 0.
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
