// histogram: a fixed-memory log-linear histogram of unsigned 64-bit values (nanoseconds, by the
// runtime's convention), for one writer and any number of readers.
//
// Buckets: values 0..7 each have their own; above, every power of two [2^e, 2^(e+1)) is cut
// into 8 equal buckets, so a bucket is at most 1/8 of its lower bound wide (a quantile is
// within 12.5% of the true value, never below the smallest recorded value's bucket). 496
// buckets cover every uint64_t: 4 KiB, fixed, nothing allocated when recording.
//
// Threading: record() belongs to one thread (the core that owns the histogram); any thread may
// read or copy it meanwhile. Every cell is a std::atomic written by a relaxed load and store
// (a plain move on x86, no locked instruction), read by relaxed loads: a concurrent copy is
// free of data races and each cell in it is exact, but cells may come from slightly different
// moments (count() may differ from the sum of the buckets by the records in flight).
//
// Overflow: every cell saturates at 2^64 - 1 instead of wrapping (a sum of nanoseconds gets
// there after 584 years of recorded time, or at once from a few huge values): a wrapped sum
// would read as small, and a Prometheus counter that goes down reads as a reset. A saturated
// sum() stays 2^64 - 1; its mean is then a lower bound.
//
// Windows: `later - earlier` (two copies of one histogram) is the histogram of the values
// recorded between them, bucket by bucket (see operator-).
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace cogwheel {

namespace detail {
/// a + b, or 2^64 - 1 when the sum does not fit (an add and a conditional move).
constexpr std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? ~std::uint64_t{0} : r;
}
/// a * b, or 2^64 - 1 when the product does not fit.
constexpr std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? ~std::uint64_t{0} : r;
}
/// later - earlier, clamped at 0 when earlier is larger (a reset, or not earlier at all);
/// 2^64 - 1 when later is saturated (the window's true value is unknown, and at least large).
constexpr std::uint64_t window_difference(std::uint64_t later, std::uint64_t earlier) noexcept {
  if (later == ~std::uint64_t{0}) return later;
  return later > earlier ? later - earlier : 0;
}
}  // namespace detail

/// A log-linear histogram of uint64_t values with 496 fixed buckets (see the file comment);
/// single writer, readers on any thread.
class histogram {
 public:
  /// Buckets of values 0..7, then 8 per power of two up to 2^64.
  static constexpr std::size_t bucket_count = 496;

  histogram() = default;
  /// A copy taken with relaxed loads (may run concurrently with the writer).
  histogram(const histogram& other) noexcept { copy_from(other); }
  /// As the copy constructor.
  histogram& operator=(const histogram& other) noexcept {
    if (this != &other) copy_from(other);
    return *this;
  }

  /// The bucket that holds v.
  static constexpr std::size_t bucket_of(std::uint64_t v) noexcept {
    if (v < 8) return static_cast<std::size_t>(v);
    const unsigned e = 63u - static_cast<unsigned>(std::countl_zero(v));  // >= 3
    return static_cast<std::size_t>((e - 2) * 8 + ((v >> (e - 3)) & 7));
  }
  /// The smallest value bucket i holds.
  static constexpr std::uint64_t bucket_lower(std::size_t i) noexcept {
    if (i < 8) return i;
    const unsigned e = static_cast<unsigned>(i / 8 + 2);
    return (std::uint64_t{8} + i % 8) << (e - 3);
  }
  /// The largest value bucket i holds.
  static constexpr std::uint64_t bucket_upper(std::size_t i) noexcept {
    return i + 1 == bucket_count ? ~std::uint64_t{0} : bucket_lower(i + 1) - 1;
  }

  /// Counts v, n times. Writer thread only. Counts and the sum saturate at 2^64 - 1.
  void record(std::uint64_t v, std::uint64_t n = 1) noexcept {
    bump(buckets_[bucket_of(v)], n);
    bump(count_, n);
    bump(sum_, detail::saturating_mul(v, n));
    if (v > max_.load(std::memory_order_relaxed)) max_.store(v, std::memory_order_relaxed);
  }

  /// How many values were recorded.
  std::uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  /// Their sum, saturated at 2^64 - 1 (584 years of nanoseconds) instead of wrapping: 2^64 - 1
  /// means "at least this much".
  std::uint64_t sum() const noexcept { return sum_.load(std::memory_order_relaxed); }
  /// The largest value recorded (exact), 0 when none.
  std::uint64_t max() const noexcept { return max_.load(std::memory_order_relaxed); }
  /// How many values bucket i holds.
  std::uint64_t bucket(std::size_t i) const noexcept { return buckets_[i].load(std::memory_order_relaxed); }
  /// How many recorded values are at most v, to bucket resolution: a bucket that holds both v
  /// and larger values counts as above v (a lower bound, exact when v is a bucket_upper()).
  std::uint64_t count_at_most(std::uint64_t v) const noexcept;

  /// The q-quantile (q in [0, 1]): the upper bound of the bucket holding the value of rank
  /// ceil(q * count()) (at least 1), capped at max(); 0 when empty. So quantile(1) == max(),
  /// and the result is never below the true quantile and at most 12.5% above it.
  std::uint64_t quantile(double q) const noexcept;

  /// Adds other's counts into this one (both quiescent, or this one owned by the caller);
  /// saturating as record() does.
  void merge(const histogram& other) noexcept;

  /// The values recorded between two copies of one histogram: each bucket, count() and sum()
  /// are `later`'s minus `earlier`'s. Where `earlier` holds more than `later` (it was not
  /// earlier, or the histogram was replaced in between) that cell is 0, never a wrapped
  /// difference; a saturated cell of `later` stays saturated. max() is the largest value the
  /// difference can hold: the upper bound of its highest non-empty bucket, capped at
  /// later.max() (exact when the window's largest value is later's max, otherwise to bucket
  /// resolution); 0 when the difference is empty. Any thread, on copies.
  friend histogram operator-(const histogram& later, const histogram& earlier) noexcept;

 private:
  // Saturating: one writer, so a load, an add with a conditional move, a store.
  static void bump(std::atomic<std::uint64_t>& a, std::uint64_t by) noexcept {
    a.store(detail::saturating_add(a.load(std::memory_order_relaxed), by), std::memory_order_relaxed);
  }
  void copy_from(const histogram& other) noexcept;

  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::uint64_t> max_{0};
  std::array<std::atomic<std::uint64_t>, bucket_count> buckets_{};
};

static_assert(histogram::bucket_of(7) == 7 && histogram::bucket_of(8) == 8 && histogram::bucket_of(15) == 15);
static_assert(histogram::bucket_of(16) == 16 && histogram::bucket_of(17) == 16 && histogram::bucket_of(18) == 17);
static_assert(histogram::bucket_of(~std::uint64_t{0}) == histogram::bucket_count - 1);
static_assert(histogram::bucket_lower(histogram::bucket_of(1000)) <= 1000 &&
              histogram::bucket_upper(histogram::bucket_of(1000)) >= 1000);

}  // namespace cogwheel
