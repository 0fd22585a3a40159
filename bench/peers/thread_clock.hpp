// What one benchmark thread spent: its CPU time, and how often it went to sleep. Peers that read
// the real clock run their event loop in `expire`; CPU time leaves out the time spent asleep
// waiting for deadlines, and the count of voluntary context switches says how many times the
// loop slept (woke up) to fire one round.
#pragma once

#include <sys/resource.h>
#include <time.h>

#include <cstdint>

namespace peers {

// CPU time of the calling thread: unlike wall time, it does not count time spent descheduled.
inline double thread_cpu_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Voluntary context switches of the calling thread so far: each blocking wait that slept.
inline std::int64_t thread_sleeps() noexcept {
  rusage ru{};
  ::getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nvcsw;
}

}  // namespace peers
