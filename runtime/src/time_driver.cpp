#include "time_driver.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace cogwheel::detail {

time_driver::time_driver(const runtime_options& options)
    : paused_(options.paused_clock),
      measure_(options.measure_timer_work),
      timers_(options.timers, options.tick, clock::now()),
      now_(clock::now()),
      virtual_now_(now_) {}

namespace {

// A cycle counter far cheaper than the clock (clock_gettime measured 20+ ns on a KVM guest,
// the bulk of an iteration that only resumes a yielding task); 0 where there is none.
std::uint64_t cycles() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return 0;
#endif
}

// Below this many cycles since the last clock read, the loop's time is left as it is: at a
// counter of 1 GHz or more (any x86 of the last 15 years) that is under 10 us, a hundredth of
// a 1 ms tick; a counter going backwards (another socket) reads as huge.
constexpr std::uint64_t reuse_cycles = 10'000;

}  // namespace

clock::time_point time_driver::read_clock(bool may_reuse) noexcept {
  if (may_reuse) {
    const std::uint64_t c = cycles();
    if (c != 0 && c - cycles_at_read_ < reuse_cycles) return now_;
  }
  cycles_at_read_ = cycles();
  return clock::now();
}

void time_driver::tick(loop_stats& stats, bool may_reuse) {
  now_ = paused_ ? virtual_now_ : read_clock(may_reuse);
  if (!measure_) {
    stats.timers_fired += timers_.advance(now_);
    return;
  }
  const auto t0 = clock::now();  // a real clock even when the loop's is paused
  stats.timers_fired += timers_.advance(now_);
  stats.timer_ns += static_cast<std::uint64_t>(std::chrono::nanoseconds(clock::now() - t0).count());
}

void time_driver::run_expired() {
  while (!expired_.empty()) expired_.pop().complete().resume();
}

std::int64_t time_driver::wait_ns() noexcept {
  jump_target_.reset();
  const std::optional<clock::time_point> next = timers_.next_deadline();
  if (!next) return -1;
  if (*next <= now_) return 0;
  if (paused_) {
    jump_target_ = *next;  // poll I/O once; if nothing completes, only the timers can move on
    return 0;
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(*next - clock::now()).count();
  return ns > 0 ? ns : 0;
}

void time_driver::after_wait(bool progress, loop_stats& stats) noexcept {
  if (!jump_target_ || progress) return;
  virtual_now_ = *jump_target_;
  jump_target_.reset();
  ++stats.clock_jumps;
}

}  // namespace cogwheel::detail
