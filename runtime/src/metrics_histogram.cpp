// The histogram's out-of-line parts: its queries, copies and differences.
#include <cogwheel/runtime/histogram.hpp>

#include <cmath>

namespace cogwheel {

std::uint64_t histogram::count_at_most(std::uint64_t v) const noexcept {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < bucket_count && bucket_upper(i) <= v; ++i) n += bucket(i);
  return n;
}

std::uint64_t histogram::quantile(double q) const noexcept {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) total += bucket(i);
  if (total == 0) return 0;
  q = q < 0 ? 0 : (q > 1 ? 1 : q);
  auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total)));
  if (rank == 0) rank = 1;
  if (rank > total) rank = total;
  const std::uint64_t top = max();
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    seen += bucket(i);
    if (seen >= rank) return bucket_upper(i) < top ? bucket_upper(i) : top;
  }
  return top;
}

void histogram::merge(const histogram& other) noexcept {
  for (std::size_t i = 0; i < bucket_count; ++i) bump(buckets_[i], other.bucket(i));
  bump(count_, other.count());
  bump(sum_, other.sum());
  if (other.max() > max()) max_.store(other.max(), std::memory_order_relaxed);
}

histogram operator-(const histogram& later, const histogram& earlier) noexcept {
  histogram d;
  std::size_t top = histogram::bucket_count;  // the highest non-empty bucket of d, if any
  for (std::size_t i = 0; i < histogram::bucket_count; ++i) {
    const std::uint64_t n = detail::window_difference(later.bucket(i), earlier.bucket(i));
    d.buckets_[i].store(n, std::memory_order_relaxed);
    if (n != 0) top = i;
  }
  d.count_.store(detail::window_difference(later.count(), earlier.count()), std::memory_order_relaxed);
  d.sum_.store(detail::window_difference(later.sum(), earlier.sum()), std::memory_order_relaxed);
  if (top != histogram::bucket_count) {
    const std::uint64_t upper = histogram::bucket_upper(top);
    d.max_.store(upper < later.max() ? upper : later.max(), std::memory_order_relaxed);
  }
  return d;
}

void histogram::copy_from(const histogram& other) noexcept {
  for (std::size_t i = 0; i < bucket_count; ++i) buckets_[i].store(other.bucket(i), std::memory_order_relaxed);
  count_.store(other.count(), std::memory_order_relaxed);
  sum_.store(other.sum(), std::memory_order_relaxed);
  max_.store(other.max(), std::memory_order_relaxed);
}

}  // namespace cogwheel
