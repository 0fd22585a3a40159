/// @file
/// timer_heap: the wheel's twin on a 4-ary min-heap, for comparison on identical work. Same
/// interface and the same tick contract as timer_wheel. The array holds (deadline, node) pairs so
/// comparisons stay inside the array; each node knows its index, so cancel and reschedule are
/// O(log n) without a search.
///
/// Not thread-safe: one heap belongs to one thread.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <cogwheel/timer/detail/expiry_batch.hpp>
#include <cogwheel/timer/node.hpp>
#include <cogwheel/timer/ticks.hpp>

namespace cogwheel::timer {

/// The wheel's twin on a 4-ary min-heap (see the file comment): the same contract as
/// timer_wheel, with O(log n) schedule, cancel and reschedule. Not copyable; one thread.
class timer_heap {
 public:
  /// As timer_wheel's: ticks of `tick`, the heap's time starting at `start`.
  explicit timer_heap(clock::duration tick = std::chrono::milliseconds(1),
                      clock::time_point start = {});
  timer_heap(const timer_heap&) = delete;
  timer_heap& operator=(const timer_heap&) = delete;
  /// Cancels every pending timer (their nodes become idle; none fires).
  ~timer_heap();

  /// As timer_wheel::schedule. Precondition: !n.scheduled(). O(log n).
  void schedule(timer_node& n, clock::time_point deadline) {
    assert(!n.scheduled());
    push(n, scale_.deadline_tick(deadline));
  }

  /// As timer_wheel::cancel. O(log n).
  bool cancel(timer_node& n) noexcept {
    switch (n.state_) {
      case timer_node::state::idle:
        return false;
      case timer_node::state::due:
        batch_.remove(n);
        return true;
      case timer_node::state::queued:
        erase(n);
        return true;
    }
    return false;
  }

  /// Moves n's deadline (scheduling it if idle). O(log n).
  void reschedule(timer_node& n, clock::time_point deadline);

  /// As timer_wheel::advance: fires every timer whose deadline tick is reached, in one batch.
  /// O(k log n) for k timers fired.
  std::size_t advance(clock::time_point now);

  /// The earliest deadline (exact, at tick resolution); nullopt when empty. O(1).
  std::optional<clock::time_point> next_deadline() const noexcept {
    if (heap_.empty()) return std::nullopt;
    return scale_.time_of(heap_.front().tick);
  }

  /// Timers pending. O(1).
  std::size_t size() const noexcept { return heap_.size(); }
  /// size() == 0.
  bool empty() const noexcept { return heap_.empty(); }
  /// The tick length given at construction.
  clock::duration tick() const noexcept { return scale_.tick(); }
  /// The conversions between time points and ticks the heap uses.
  const tick_scale& scale() const noexcept { return scale_; }
  /// The heap's time: the last tick advanced to.
  clock::time_point now() const noexcept { return scale_.time_of(elapsed_); }
  /// Sets (or with nullptr clears) the function told of the timers each advance() fires, by
  /// runs: `count` consecutive nodes with one deadline tick, told once the run ends, with
  /// `context`. How a loop measures lateness without a byte more per node or a call per node.
  /// The observer must not touch the queue.
  void set_fire_observer(detail::expiry_batch::fire_observer fn, void* context) noexcept {
    batch_.set_observer(fn, context);
  }
  /// Bytes the heap holds besides its nodes (as timer_wheel::memory_bytes).
  std::size_t memory_bytes() const noexcept {
    return sizeof(*this) + heap_.capacity() * sizeof(entry) + batch_.memory_bytes();
  }

 private:
  static constexpr std::size_t arity = 4;
  struct entry {
    tick_t tick;
    timer_node* node;
  };

  void push(timer_node& n, tick_t t);
  void erase(timer_node& n) noexcept;
  void place(std::size_t i, entry e) noexcept {
    heap_[i] = e;
    e.node->pos_ = static_cast<std::uint32_t>(i);
  }
  void sift_up(std::size_t i, entry e) noexcept;
  void sift_down(std::size_t i, entry e) noexcept;

  tick_scale scale_;
  tick_t elapsed_;
  bool advancing_ = false;
  std::vector<entry> heap_;
  detail::expiry_batch batch_;
};

}  // namespace cogwheel::timer
