// The histogram's out-of-line parts: its queries and copies.
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

void histogram::copy_from(const histogram& other) noexcept {
  for (std::size_t i = 0; i < bucket_count; ++i) buckets_[i].store(other.bucket(i), std::memory_order_relaxed);
  count_.store(other.count(), std::memory_order_relaxed);
  sum_.store(other.sum(), std::memory_order_relaxed);
  max_.store(other.max(), std::memory_order_relaxed);
}

}  // namespace cogwheel
