// The reference model of the timer-queue contract that differential_model.hpp checks the
// queues against. It states the contract (docs/contract.md, wheel.hpp) in the plainest
// terms, with its own arithmetic rather than tick_scale's:
//   - a deadline converts to ticks rounding up, a current time rounding down, times before the
//     clock's epoch to tick 0;
//   - advance(now) with now_tick below the queue's tick fires nothing and changes nothing;
//     otherwise the queue's tick becomes now_tick and every timer with deadline_tick <= now_tick
//     fires in that call exactly once, in an unspecified order;
//   - callbacks run after the batch is collected: a timer they (re)schedule fires in a later
//     call even if its deadline has passed; a due timer they cancel does not fire, and that
//     cancel returns true.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <set>
#include <type_traits>
#include <optional>
#include <utility>
#include <vector>

#include <cogwheel/timer/ticks.hpp>

namespace cogwheel::timer::testing {

static_assert(std::is_same_v<clock::duration, std::chrono::nanoseconds>,
              "the model counts steady_clock time in nanoseconds");

using ns_t = std::int64_t;
inline constexpr ns_t ns_max = std::numeric_limits<ns_t>::max();
inline constexpr ns_t ns_min = std::numeric_limits<ns_t>::min();

inline clock::time_point at(ns_t ns) { return clock::time_point(clock::duration(ns)); }
inline ns_t ns_of(clock::time_point t) { return t.time_since_epoch().count(); }

// a + b, saturating at the ends of the clock's range.
inline ns_t sat_add(ns_t a, ns_t b) {
  ns_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? ns_max : ns_min;
}

// The contract's tick arithmetic, written independently of tick_scale (128-bit, no tricks).
struct model_scale {
  ns_t tick;

  tick_t deadline_tick(ns_t t) const noexcept {
    return t <= 0 ? 0 : static_cast<tick_t>((static_cast<unsigned __int128>(t) + tick - 1) / tick);
  }
  tick_t now_tick(ns_t t) const noexcept {
    return t <= 0 ? 0 : static_cast<tick_t>(t / tick);
  }
  // The time point at which tick t begins, or time_point::max() if it is beyond the clock.
  ns_t time_of(tick_t t) const noexcept {
    const unsigned __int128 v = static_cast<unsigned __int128>(t) * static_cast<std::uint64_t>(tick);
    return v > static_cast<unsigned __int128>(ns_max) ? ns_max : static_cast<ns_t>(v);
  }
};

// Pending timers by deadline tick, the queue's tick, and nothing else.
class reference_model {
 public:
  reference_model(ns_t tick, ns_t start, std::uint32_t nodes)
      : scale_{tick}, now_(scale_.now_tick(start)), deadline_(nodes, 0), pending_(nodes, 0) {}

  const model_scale& scale() const noexcept { return scale_; }
  tick_t now() const noexcept { return now_; }
  std::size_t size() const noexcept { return queue_.size(); }
  bool pending(std::uint32_t id) const noexcept { return pending_[id] != 0; }
  tick_t deadline(std::uint32_t id) const noexcept { return deadline_[id]; }
  std::optional<tick_t> earliest() const noexcept {
    if (queue_.empty()) return std::nullopt;
    return queue_.begin()->first;
  }

  void schedule(std::uint32_t id, tick_t t) {
    deadline_[id] = t;
    pending_[id] = 1;
    queue_.emplace(t, id);
  }
  bool cancel(std::uint32_t id) {
    if (!pending_[id]) return false;
    queue_.erase({deadline_[id], id});
    pending_[id] = 0;
    return true;
  }
  void reschedule(std::uint32_t id, tick_t t) {
    cancel(id);
    schedule(id, t);
  }

  // The first half of advance: if now_tick is not behind the model's tick, moves to it and
  // appends every timer due by then to `due` (they leave the model). Returns false if behind.
  bool collect(tick_t now_tick, std::vector<std::uint32_t>& due) {
    if (now_tick < now_) return false;
    now_ = now_tick;
    auto it = queue_.begin();
    for (; it != queue_.end() && it->first <= now_tick; ++it) {
      due.push_back(it->second);
      pending_[it->second] = 0;
    }
    queue_.erase(queue_.begin(), it);
    return true;
  }

 private:
  model_scale scale_;
  tick_t now_;
  std::vector<tick_t> deadline_;
  std::vector<std::uint8_t> pending_;
  std::set<std::pair<tick_t, std::uint32_t>> queue_;
};

}  // namespace cogwheel::timer::testing
