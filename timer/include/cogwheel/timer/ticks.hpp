/// @file
/// Conversion between steady_clock time points and the integer ticks timer queues work in.
///
/// Contract: a deadline converts to ticks rounding UP and a current time rounding DOWN, so a
/// timer that fires at the first advance with now_tick >= deadline_tick never fires before its
/// time point, and fires at most one tick after it relative to the advancing timestamps.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>

namespace cogwheel::timer {

/// The clock every timer queue counts in (the same as cogwheel::clock).
using clock = std::chrono::steady_clock;
/// A count of ticks since steady_clock's epoch.
using tick_t = std::uint64_t;

/// Exact unsigned division by a divisor fixed at construction, without a DIV instruction on the
/// hot path. Numerators below 2^63 (every positive time_since_epoch() count, so every deadline
/// and every current time) take one multiply and one shift: with l = ceil(log2 d) and
/// m = ceil(2^(63+l) / d), m * d exceeds 2^(63+l) by less than d <= 2^l, so
/// floor(n * m / 2^(63+l)) == floor(n / d) for every n < 2^63 (Granlund and Montgomery, 1994),
/// and m < 2^64. Larger numerators take an estimate from a 64-bit reciprocal, at most one short,
/// and one compare.
class tick_divider {
 public:
  /// Divides by `divisor`. Precondition: divisor > 0.
  constexpr explicit tick_divider(std::uint64_t divisor) noexcept
      : divisor_(divisor),
        reciprocal_(divisor == 1 ? 0 : ~std::uint64_t{0} / divisor),
        shift_(divisor == 1 ? 0 : ceil_log2(divisor) - 1),
        magic_(divisor == 1 ? 0 : magic_for(divisor, ceil_log2(divisor))) {}

  /// The divisor given at construction.
  constexpr std::uint64_t divisor() const noexcept { return divisor_; }

  /// floor(n / divisor) for every n.
  constexpr std::uint64_t floor_div(std::uint64_t n) const noexcept {
    if (divisor_ == 1) return n;
    if (n < top_bit) [[likely]]
      return static_cast<std::uint64_t>((static_cast<unsigned __int128>(n) * magic_) >> 64) >> shift_;
    // reciprocal_ = floor((2^64 - 1) / d) >= 2^64 / d - 1, so the estimate q is >= n / d - 1
    // (n < 2^64) and never above n / d: q is the true quotient or one short of it.
    auto q = static_cast<std::uint64_t>((static_cast<unsigned __int128>(n) * reciprocal_) >> 64);
    if (n - q * divisor_ >= divisor_) ++q;
    return q;
  }

  /// ceil(n / divisor) for every n.
  constexpr std::uint64_t ceil_div(std::uint64_t n) const noexcept {
    // ceil(n / d) == floor((n - 1) / d) + 1 for n >= 1: one division, no remainder check.
    if (n - 1 < top_bit) [[likely]]
      return floor_div(n - 1) + 1;
    if (n == 0) return 0;
    const std::uint64_t q = floor_div(n);
    return q + (q * divisor_ != n ? 1 : 0);
  }

 private:
  static constexpr std::uint64_t top_bit = std::uint64_t{1} << 63;

  // ceil(log2 d) for d >= 2: 1..64.
  static constexpr unsigned ceil_log2(std::uint64_t d) noexcept {
    unsigned l = 0;
    while (l < 64 && (std::uint64_t{1} << l) < d) ++l;
    return l;
  }
  // ceil(2^(63+l) / d) for d >= 2 and l = ceil_log2(d): below 2^64 (see the class comment).
  static constexpr std::uint64_t magic_for(std::uint64_t d, unsigned l) noexcept {
    const unsigned __int128 p = static_cast<unsigned __int128>(1) << (63 + l);
    return static_cast<std::uint64_t>((p + d - 1) / d);
  }

  std::uint64_t divisor_;
  std::uint64_t reciprocal_;
  unsigned shift_;       // l - 1: the product's high word is shifted by 64 + l - 1 in all
  std::uint64_t magic_;  // m
};

/// The tick of one timer queue: maps time points to ticks counted from steady_clock's epoch.
/// Time points before the epoch map to tick 0; ticks whose time point would overflow map to
/// clock::time_point::max().
class tick_scale {
 public:
  /// A scale of `tick` per tick. Throws std::invalid_argument unless tick > 0.
  explicit tick_scale(clock::duration tick)
      : tick_(tick), divider_(checked_count(tick)) {}

  /// The length of one tick.
  clock::duration tick() const noexcept { return tick_; }

  /// The first tick at or after t (rounds up): a deadline.
  tick_t deadline_tick(clock::time_point t) const noexcept {
    const auto ns = t.time_since_epoch().count();
    return ns <= 0 ? 0 : divider_.ceil_div(static_cast<std::uint64_t>(ns));
  }

  /// The last tick at or before t (rounds down): the current time.
  tick_t now_tick(clock::time_point t) const noexcept {
    const auto ns = t.time_since_epoch().count();
    return ns <= 0 ? 0 : divider_.floor_div(static_cast<std::uint64_t>(ns));
  }

  /// The time point at which tick `t` begins (time_point::max() when that would overflow).
  clock::time_point time_of(tick_t t) const noexcept {
    // A multiply with an overflow flag, not t > max / d: that 64-bit division was most of what
    // timer_wheel::next_deadline() cost (the loop asks it before every wait).
    const auto max = static_cast<std::uint64_t>(clock::duration::max().count());
    std::uint64_t product;
    if (__builtin_mul_overflow(t, divider_.divisor(), &product) || product > max) return clock::time_point::max();
    return clock::time_point(clock::duration(static_cast<clock::rep>(product)));
  }

 private:
  static std::uint64_t checked_count(clock::duration tick) {
    if (tick.count() <= 0) throw std::invalid_argument("cogwheel: timer tick must be positive");
    return static_cast<std::uint64_t>(tick.count());
  }

  clock::duration tick_;
  tick_divider divider_;
};

}  // namespace cogwheel::timer
