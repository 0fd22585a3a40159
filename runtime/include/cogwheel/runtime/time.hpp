/// @file
/// Time as cogwheel sees it: the clock, now() (paused-clock aware), and the saturating
/// arithmetic every deadline goes through, so that "sleep forever" (hours::max()) never wraps
/// around into "complete at once".
#pragma once

#include <chrono>
#include <ratio>
#include <type_traits>

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

/// now + d without overflow: saturates at time_point::max() / min(). Inline: every sleep_for
/// computes one, and a call would be a noticeable share of a resumed sleeper's own work.
inline clock::time_point saturating_add(clock::time_point now, clock::duration d) noexcept {
  clock::rep sum;
  if (__builtin_add_overflow(now.time_since_epoch().count(), d.count(), &sum))
    return d > clock::duration::zero() ? clock::time_point::max() : clock::time_point::min();
  return clock::time_point(clock::duration(sum));
}

/// d as a clock::duration, saturating at its min()/max() instead of overflowing: the implicit
/// conversion of e.g. hours::max() to nanoseconds wraps around to a negative duration.
template <class Rep, class Period>
constexpr clock::duration saturating_duration(std::chrono::duration<Rep, Period> d) noexcept {
  // An integral count in whole multiples of the clock's unit (hours, seconds, milliseconds...):
  // compared against the largest count that fits, in integers (no x87 arithmetic on the path
  // of every sleep_for(24h)).
  using factor = std::ratio_divide<Period, clock::period>;
  if constexpr (std::is_integral_v<Rep> && std::is_signed_v<Rep> && factor::den == 1 && sizeof(Rep) <= sizeof(clock::rep)) {
    constexpr clock::rep most = clock::duration::max().count() / factor::num;
    const auto count = static_cast<clock::rep>(d.count());
    if (count > most) return clock::duration::max();
    if (count < -most) return clock::duration::min();
    return clock::duration(count * factor::num);
  }
  // long double holds every clock::duration count exactly (64-bit mantissa), so these
  // comparisons are exact where it matters and cannot overflow.
  const long double ns = std::chrono::duration<long double, std::nano>(d).count();
  if (ns >= static_cast<long double>(clock::duration::max().count())) return clock::duration::max();
  if (ns <= static_cast<long double>(clock::duration::min().count())) return clock::duration::min();
  return std::chrono::duration_cast<clock::duration>(d);
}

}  // namespace detail
}  // namespace cogwheel
