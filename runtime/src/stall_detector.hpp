// stall_detector: finds the loop iterations that blocked the core (a blocking call or a long
// computation in user code) and says so on stderr, once per burst of such iterations, with
// what the first one did; each one is counted (core_metrics::stalls).
//
// An iteration is a stall when its time outside the kernel's wait passed the threshold AND
// its thread used CPU for at least half of the threshold: a guest whose host took the CPU
// away (steal) or a thread preempted by another raises no alarm. The thread's CPU clock is a
// system call, so it is read only when the wall time passed the threshold, and otherwise at
// most once per quarter threshold of loop time (a mark); the iteration's CPU time is then at
// least (CPU now - CPU at the mark) - (wall time from the mark to the iteration's start).
//
// Threading: the loop's thread only.
#pragma once

#include <cstdint>

#include <cogwheel/runtime/options.hpp>

#include "live_metrics.hpp"

namespace cogwheel::detail {

class stall_detector {
 public:
  // threshold 0 (or metrics off): never reports (the threshold becomes unreachable).
  stall_detector(clock::duration threshold, unsigned core, std::uint64_t ns_per_cycle_q32) noexcept;

  bool enabled() const noexcept { return threshold_ns_ != off; }

  // At an iteration's start (cycle counter c0).
  void iteration_start(std::uint64_t c0, const live_metrics& m) noexcept {
    if (c0 - mark_cycles_ > refresh_cycles_) refresh_mark(c0);
    fired_at_start_ = m.timers_fired.value();
    completions_at_start_ = m.completions.value();
    tasks_at_start_ = m.tasks_run.value();
  }
  // At its end: it started at c0, ends at c_end, and was busy (outside a blocking wait) busy_ns.
  void iteration_end(std::uint64_t c0, std::uint64_t c_end, std::uint64_t busy_ns, live_metrics& m) noexcept {
    if (busy_ns < threshold_ns_) {
      in_burst_ = false;
      return;
    }
    judge(c0, c_end, busy_ns, m);
  }

 private:
  void refresh_mark(std::uint64_t c) noexcept;
  [[gnu::cold]] void judge(std::uint64_t c0, std::uint64_t c_end, std::uint64_t busy_ns, live_metrics& m) noexcept;

  static constexpr std::uint64_t off = ~std::uint64_t{0};
  std::uint64_t threshold_ns_;
  std::uint64_t refresh_cycles_;
  std::uint64_t q32_;
  unsigned core_;
  bool in_burst_ = false;
  std::uint64_t mark_cycles_ = 0;
  std::uint64_t mark_cpu_ns_ = 0;
  std::uint64_t fired_at_start_ = 0;
  std::uint64_t completions_at_start_ = 0;
  std::uint64_t tasks_at_start_ = 0;
};

}  // namespace cogwheel::detail
