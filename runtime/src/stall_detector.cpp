#include "stall_detector.hpp"

#include <time.h>

#include <cstdio>

#include "cycle_clock.hpp"

namespace cogwheel::detail {

namespace {

std::uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

stall_detector::stall_detector(clock::duration threshold, unsigned core, std::uint64_t ns_per_cycle_q32) noexcept
    : threshold_ns_(threshold.count() > 0
                        ? static_cast<std::uint64_t>(std::chrono::nanoseconds(threshold).count())
                        : off),
      q32_(ns_per_cycle_q32 == 0 ? 1 : ns_per_cycle_q32),
      core_(core) {
  // A quarter threshold, in cycles: (ns << 32) / q32.
  refresh_cycles_ = enabled()
                        ? static_cast<std::uint64_t>((static_cast<unsigned __int128>(threshold_ns_ / 4) << 32) / q32_)
                        : off;
  refresh_mark(cycles());
}

void stall_detector::refresh_mark(std::uint64_t c) noexcept {
  if (!enabled()) return;
  mark_cycles_ = c;
  mark_cpu_ns_ = thread_cpu_ns();
}

void stall_detector::judge(std::uint64_t c0, std::uint64_t c_end, std::uint64_t busy_ns, live_metrics& m) noexcept {
  const std::uint64_t cpu_now = thread_cpu_ns();
  const std::uint64_t cpu_since_mark = cpu_now - mark_cpu_ns_;
  const std::uint64_t wall_before = cycles_to_ns(c0 - mark_cycles_, q32_);  // mark to start
  const std::uint64_t cpu_at_least = cpu_since_mark > wall_before ? cpu_since_mark - wall_before : 0;
  mark_cycles_ = c_end;
  mark_cpu_ns_ = cpu_now;
  if (cpu_at_least < threshold_ns_ / 2) {  // the CPU was taken away, not used
    in_burst_ = false;
    return;
  }
  ++m.stalls;
  if (in_burst_) return;
  in_burst_ = true;
  std::fprintf(stderr,
               "cogwheel: core %u stalled: one loop iteration ran %.1f ms (thread CPU >= %.1f ms, "
               "threshold %.1f ms): %llu timers fired, %llu completions, %llu ready tasks run; "
               "a blocking call or a long computation in a coroutine? (said once per burst)\n",
               core_, static_cast<double>(busy_ns) / 1e6, static_cast<double>(cpu_at_least) / 1e6,
               static_cast<double>(threshold_ns_) / 1e6,
               static_cast<unsigned long long>(m.timers_fired.value() - fired_at_start_),
               static_cast<unsigned long long>(m.completions.value() - completions_at_start_),
               static_cast<unsigned long long>(m.tasks_run.value() - tasks_at_start_));
}

}  // namespace cogwheel::detail
