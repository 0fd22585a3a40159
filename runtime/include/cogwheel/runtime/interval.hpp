// interval: periodic ticks on a fixed grid (start + k * period), so they never drift.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>

#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/time.hpp>

namespace cogwheel {

// Periodic ticks on a fixed grid (start + k * period), so they never drift. If the loop was
// busy and ticks were missed, next() completes at once for the latest missed grid point and the
// following tick is the next grid point after now: missed ticks are skipped, not replayed in a
// burst; missed_ticks() counts them.
class interval {
 public:
  // The first tick is one period from now. Precondition: period > 0.
  explicit interval(clock::duration period);

  class tick_operation : public operation<tick_operation> {
   public:
    tick_operation(interval& owner, clock::time_point at) noexcept : owner_(&owner), sleep_(at) {}
    std::coroutine_handle<> start(detail::continuation c) { return sleep_.start(c); }
    void cancel() noexcept { sleep_.cancel(); }
    // A tick cut short before its grid point (a timeout, a stop) is no tick: the grid stays
    // put and the next next() waits for the same point, instead of silently losing it.
    void result() noexcept {
      if (detail::current_time() >= sleep_.deadline()) owner_->advance_grid();
    }

   private:
    interval* owner_;
    sleep_operation sleep_;
  };

  // Completes at the next grid point.
  tick_operation next() noexcept { return tick_operation(*this, next_); }

  clock::duration period() const noexcept { return period_; }
  clock::time_point next_tick() const noexcept { return next_; }
  std::uint64_t missed_ticks() const noexcept { return missed_; }

 private:
  void advance_grid() noexcept;

  clock::duration period_;
  clock::time_point next_;
  std::uint64_t missed_ = 0;
};

}  // namespace cogwheel
