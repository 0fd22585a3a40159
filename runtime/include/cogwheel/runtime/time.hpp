/// @file
/// Time as cogwheel sees it: the clock, now() (paused-clock aware), and the saturating
/// arithmetic every deadline goes through, so that "sleep forever" (hours::max()) never wraps
/// around into "complete at once".
#pragma once

#include <chrono>

#include <cogwheel/timer/ticks.hpp>

namespace cogwheel {

/// The clock of every deadline, sleep and timeout: std::chrono::steady_clock, declared once
/// (timer/ticks.hpp) for the timer queues and the runtime alike.
using timer::clock;

/// The current time deadlines count from: clock::now(), or on a loop with a paused clock its
/// virtual time (which jumps to the next deadline when only timers can make progress). Outside
/// a loop: clock::now().
clock::time_point now() noexcept;

namespace detail {

/// now + d without overflow: saturates at time_point::max() / min().
clock::time_point saturating_add(clock::time_point now, clock::duration d) noexcept;

/// d as a clock::duration, saturating at its min()/max() instead of overflowing: the implicit
/// conversion of e.g. hours::max() to nanoseconds wraps around to a negative duration.
template <class Rep, class Period>
constexpr clock::duration saturating_duration(std::chrono::duration<Rep, Period> d) noexcept {
  // long double holds every clock::duration count exactly (64-bit mantissa), so these
  // comparisons are exact where it matters and cannot overflow.
  const long double ns = std::chrono::duration<long double, std::nano>(d).count();
  if (ns >= static_cast<long double>(clock::duration::max().count())) return clock::duration::max();
  if (ns <= static_cast<long double>(clock::duration::min().count())) return clock::duration::min();
  return std::chrono::duration_cast<clock::duration>(d);
}

}  // namespace detail
}  // namespace cogwheel
