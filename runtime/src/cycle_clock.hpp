// cycle_clock: the processor's cycle counter, far cheaper than the clock (on a virtual machine
// clock_gettime can cost more than an iteration that only resumes a yielding task), and its conversion to nanoseconds for the loop's phase timings. Where there is no counter
// (not x86), cycles() is the steady clock in nanoseconds.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace cogwheel::detail {

inline constexpr bool have_cycle_counter =
#if defined(__x86_64__) || defined(__i386__)
    true;
#else
    false;
#endif

std::uint64_t steady_ns() noexcept;

inline std::uint64_t cycles() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return steady_ns();
#endif
}

// 2^32 x nanoseconds per cycle, measured once per process against the steady clock (a 2 ms
// spin at the first call; 1.0 without a counter).
std::uint64_t ns_per_cycle_q32() noexcept;

// A cycle count as nanoseconds; `q32` from ns_per_cycle_q32().
inline std::uint64_t cycles_to_ns(std::uint64_t c, std::uint64_t q32) noexcept {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(c) * q32) >> 32);
}

}  // namespace cogwheel::detail
