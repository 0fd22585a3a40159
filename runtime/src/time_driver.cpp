#include "time_driver.hpp"

#include "cycle_clock.hpp"

#include <optional>
#include <utility>

namespace cogwheel::detail {

time_driver::time_driver(const runtime_options& options, live_metrics& metrics)
    : metrics_(metrics),
      paused_(options.paused_clock),
      measure_(options.measure_timer_work),
      lateness_(options.metrics),
      tick_ns_(static_cast<std::uint64_t>(std::chrono::nanoseconds(options.tick).count())),
      timers_(options.timers, options.tick, clock::now()),
      now_(clock::now()),
      virtual_now_(now_) {
  if (lateness_) timers_.set_fire_observer(&time_driver::on_fire, this);
}

void time_driver::on_fire(void* self, timer::tick_t deadline_tick, std::size_t count) noexcept {
  // Deadline tick 0 is the epoch: how the runtime files a timer that is due now (a deadline
  // already reached, a cancelled sleep), which is not late whenever it fires.
  if (deadline_tick == 0) return;
  auto& d = *static_cast<time_driver*>(self);
  const std::uint64_t due_ns = deadline_tick * d.tick_ns_;
  d.metrics_.timer_lateness.record(d.now_ns_ > due_ns ? d.now_ns_ - due_ns : 0, count);
}

namespace {

// Below this many cycles since the last clock read, the loop's time is left as it is: at a
// counter of 1 GHz or more (any x86 of the last 15 years) that is under 10 us, a hundredth of
// a 1 ms tick; a counter going backwards (another socket) reads as huge.
constexpr std::uint64_t reuse_cycles = 10'000;

}  // namespace

clock::time_point time_driver::read_clock(bool may_reuse, std::uint64_t cycles_now) noexcept {
  if (may_reuse && have_cycle_counter && cycles_now - cycles_at_read_ < reuse_cycles) return now_;
  cycles_at_read_ = cycles_now;
  return clock::now();
}

void time_driver::tick(bool may_reuse, std::uint64_t cycles_now) {
  now_ = paused_ ? virtual_now_ : read_clock(may_reuse, cycles_now);
  const auto since_epoch = now_.time_since_epoch().count();
  now_ns_ = since_epoch > 0 ? static_cast<std::uint64_t>(since_epoch) : 0;
  if (!measure_) {
    metrics_.timers_fired += timers_.advance(now_);
    return;
  }
  const auto t0 = clock::now();  // a real clock even when the loop's is paused
  metrics_.timers_fired += timers_.advance(now_);
  metrics_.timer_work_ns += static_cast<std::uint64_t>(std::chrono::nanoseconds(clock::now() - t0).count());
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

void time_driver::after_wait(bool progress) noexcept {
  // The target is good for this wait only: kept past a wait that made progress, it would make a
  // later iteration that does not ask wait_ns() (work was ready) jump over the timers that
  // progress filed meanwhile (a connection parked with its own timer, found late by
  // tests/http/timeouts_test).
  const std::optional<clock::time_point> target = std::exchange(jump_target_, std::nullopt);
  if (!target || progress) return;
  virtual_now_ = *target;
  ++metrics_.clock_jumps;
}

}  // namespace cogwheel::detail
