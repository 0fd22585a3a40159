#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/sleep.hpp>

#include <stdexcept>

namespace cogwheel {

namespace detail {

clock::time_point saturating_add(clock::time_point now, clock::duration d) noexcept {
  if (d > clock::duration::zero() && now > clock::time_point::max() - d) return clock::time_point::max();
  if (d < clock::duration::zero() && now < clock::time_point::min() - d) return clock::time_point::min();
  return now + d;
}

clock::time_point current_time() noexcept {
  event_loop* loop = event_loop::current();
  if (loop != nullptr && loop->paused_clock()) return loop->now();
  return clock::now();
}

}  // namespace detail

deadline::deadline(clock::duration from_now)
    : timer_node(&deadline::on_expire),
      loop_(&detail::current_loop()),
      expiry_(detail::saturating_add(detail::current_time(), from_now)) {
  waiters_.prev_ = waiters_.next_ = &waiters_;
  loop_->timers().schedule(*this, expiry_);
}

deadline::~deadline() {
  loop_->timers().cancel(*this);
  // Waiters still attached (operations that outlive the deadline, against its contract) are
  // let go rather than left pointing here.
  while (waiters_.next_ != &waiters_) waiters_.next_->unlink();
  waiters_.prev_ = waiters_.next_ = nullptr;
}

void deadline::reset(clock::duration from_now) {
  reset_to(detail::saturating_add(detail::current_time(), from_now));
}

void deadline::reset_to(clock::time_point expiry) {
  expiry_ = expiry;
  fired_ = false;
  loop_->timers().reschedule(*this, expiry_);
}

bool deadline::expired() const noexcept { return fired_ || detail::current_time() >= expiry_; }

void deadline::on_expire(timer::timer_node& n) noexcept {
  auto& self = static_cast<deadline&>(n);
  self.fired_ = true;
  // Each waiter is unlinked before it is told, so one that detaches meanwhile, or a waiter
  // attached by what it runs, is handled: the list is walked until it is empty.
  while (self.waiters_.next_ != &self.waiters_) {
    detail::deadline_waiter& w = *self.waiters_.next_;
    w.unlink();
    w.on_deadline(w);
  }
}

interval::interval(clock::duration period)
    : period_(period), next_(detail::saturating_add(detail::current_time(), period)) {
  if (period <= clock::duration::zero()) throw std::invalid_argument("cogwheel::interval: period must be positive");
}

void interval::advance_grid() noexcept {
  const clock::time_point now = detail::current_time();
  next_ = detail::saturating_add(next_, period_);
  if (next_ <= now) {
    // Busy loop: skip the grid points already behind us, keeping the phase.
    const auto behind = (now - next_) / period_ + 1;
    missed_ += static_cast<std::uint64_t>(behind);
    next_ += behind * period_;
  }
}

}  // namespace cogwheel
