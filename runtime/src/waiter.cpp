// The out-of-line parts of the coordination primitives' wait machinery (detail/waiter.hpp).
#include <cogwheel/runtime/detail/waiter.hpp>

#include <sched.h>

#include "event_loop.hpp"

namespace cogwheel::detail {

void spin_lock::yield_thread() noexcept { ::sched_yield(); }

wake_hub& hub_of(event_loop& loop) noexcept { return loop.hub(); }

void wake_hub::on_deliver(remote_message& m) noexcept {
  auto& hub = static_cast<wake_hub&>(m);
  spin_guard g(hub.lock_);
  for (waiter* w = hub.head_; w != nullptr;) {
    waiter* next = w->hub_next;
    w->in_hub = false;
    assert(!w->ready.queued() && w->state == waiter::phase::handed);
    post(*hub.loop_, w->ready, w->resume);
    w = next;
  }
  hub.head_ = hub.tail_ = nullptr;
  hub.posted_ = false;  // a push from now on posts again
}

void wake_hub::on_discard(remote_message& m) noexcept {
  // The loop is going away: its waiters' frames were destroyed with it (and took themselves
  // out); nothing is left to resume.
  auto& hub = static_cast<wake_hub&>(m);
  spin_guard g(hub.lock_);
  hub.head_ = hub.tail_ = nullptr;
  hub.posted_ = false;
}

}  // namespace cogwheel::detail
