#include <cogwheel/runtime/deadline.hpp>

#include <cassert>

namespace cogwheel {

deadline::deadline(clock::duration from_now)
    : timer_node(timer_node::calls<&deadline::on_expire>{}),
      expiry_(detail::saturating_add(detail::current_time(), from_now)),
      loop_(&detail::current_loop()) {
  detail::schedule_timer(*loop_, *this, expiry_);
}

// Waiters still attached (operations that outlive the deadline, against its contract) are let
// go by the list rather than left pointing here.
deadline::~deadline() { detail::cancel_timer(*loop_, *this); }

void deadline::reset(clock::duration from_now) {
  reset_to(detail::saturating_add(detail::current_time(), from_now));
}

void deadline::reset_to(clock::time_point expiry) {
  const bool later = expiry > expiry_;
  expiry_ = expiry;
  fired_ = false;
  assert(&detail::current_loop() == loop_ && "a deadline is reset on the core that created it");
  detail::reschedule_timer(*this, expiry_);  // the thread's loop: loop_ stays cold (deadline.hpp)
  if (later && maybe_dependents_) {
    maybe_dependents_ = false;  // before the drain: a dependent that links itself again sets it
    // Taken out first: a dependent that still comes after this deadline links itself again.
    detail::intrusive_list<detail::deadline_waiter> told(std::move(dependents_));
    told.drain([](detail::deadline_waiter& w) { w.on_deadline(w); });
  }
}

bool deadline::expired() const noexcept { return fired_ || detail::current_time() >= expiry_; }

void deadline::on_expire(timer::timer_node& n) noexcept {
  auto& self = static_cast<deadline&>(n);
  self.fired_ = true;
  detail::post_expired(*self.loop_, self.expired_, detail::continuation(&deadline::release_waiters, &self));
}

std::coroutine_handle<> deadline::release_waiters(void* p) noexcept {
  auto& self = *static_cast<deadline*>(p);
  if (!self.fired_) return std::noop_coroutine();  // reset since it expired
  // Each waiter is unlinked before it is told, so one that detaches meanwhile is handled.
  self.waiters_.drain([](detail::deadline_waiter& w) { w.on_deadline(w); });
  return std::noop_coroutine();
}

}  // namespace cogwheel
