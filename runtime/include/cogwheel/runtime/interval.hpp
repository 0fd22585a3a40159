/// @file
/// interval: periodic ticks on a fixed grid (start + k * period), so they never drift.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>

#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/time.hpp>

namespace cogwheel {

/// Periodic ticks on a fixed grid (start + k * period), so they never drift. If the loop was
/// busy and ticks were missed, next() completes at once for the latest missed grid point and the
/// following tick is the next grid point after now: missed ticks are skipped, not replayed in a
/// burst; missed_ticks() counts them.
class interval {
 public:
  /// The first tick is one period from now. Precondition: period > 0.
  explicit interval(clock::duration period);

  /// What next() returns: an operation (operation.hpp) that completes at the next grid point.
  class tick_operation : public operation<tick_operation> {
   public:
    /// Waits for the grid point `at` of `owner`.
    tick_operation(interval& owner, clock::time_point at) noexcept : owner_(&owner), at_(at), sleep_(at) {}
    /// The operation protocol (operation.hpp): starts the wait.
    std::coroutine_handle<> start(detail::continuation c) { return sleep_.start(c); }
    /// The operation protocol: ends the wait at the next iteration.
    void cancel() noexcept { sleep_.cancel(); }
    /// The operation protocol: the outcome. A tick cut short before its grid point (a timeout,
    /// a stop) is no tick: the grid stays put and the next next() waits for the same point,
    /// instead of silently losing it.
    void result() noexcept {
      if (detail::current_time() >= at_) owner_->advance_grid();
    }

   private:
    interval* owner_;
    clock::time_point at_;  // the grid point (a started sleep no longer tells its deadline)
    sleep_operation sleep_;
  };

  /// Completes at the next grid point.
  tick_operation next() noexcept { return tick_operation(*this, next_); }

  /// The period given at construction.
  clock::duration period() const noexcept { return period_; }
  /// The grid point the next next() waits for.
  clock::time_point next_tick() const noexcept { return next_; }
  /// How many grid points were skipped because the loop was busy past them.
  std::uint64_t missed_ticks() const noexcept { return missed_; }

 private:
  void advance_grid() noexcept;

  clock::duration period_;
  clock::time_point next_;
  std::uint64_t missed_ = 0;
};

}  // namespace cogwheel
