#include "time_driver.hpp"

namespace cogwheel::detail {

time_driver::time_driver(const runtime_options& options)
    : paused_(options.paused_clock),
      measure_(options.measure_timer_work),
      timers_(options.timers, options.tick, clock::now()),
      now_(clock::now()),
      virtual_now_(now_) {}

void time_driver::tick(loop_stats& stats) {
  now_ = paused_ ? virtual_now_ : clock::now();
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
