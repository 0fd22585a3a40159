#include "cycle_clock.hpp"

#include <chrono>

namespace cogwheel::detail {

std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

std::uint64_t ns_per_cycle_q32() noexcept {
  static const std::uint64_t q32 = [] {
    if (!have_cycle_counter) return std::uint64_t{1} << 32;
    const std::uint64_t t0 = steady_ns();
    const std::uint64_t c0 = cycles();
    std::uint64_t t1 = t0;
    while (t1 - t0 < 2'000'000) t1 = steady_ns();
    const std::uint64_t c1 = cycles();
    if (c1 <= c0) return std::uint64_t{1} << 32;
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(t1 - t0) << 32) / (c1 - c0));
  }();
  return q32;
}

}  // namespace cogwheel::detail
