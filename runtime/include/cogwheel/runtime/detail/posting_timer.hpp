// posting_timer: the timer of a timeout race (timeout_awaiter<Op>) or of a submitted task's
// budget (budget_awaiter<T>), whose expiry queues a prepared continuation into its loop's
// expired batch.
#pragma once

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/detail/ready_queue.hpp>
#include <cogwheel/timer/node.hpp>

namespace cogwheel::detail {

// One expiry callback for every awaiter template that races a timer. A timer_node names its
// callback by a 1-byte index into a process-wide table of at most 255 (timer/node.hpp): a
// callback that were a static member of a class template would take one entry per operation
// type a program puts under a timeout, and a large program would run out (and abort). So the
// template's part is only the continuation, prepared once the awaiter's address is final.
class posting_timer : public timer::timer_node {
 protected:
  posting_timer() noexcept : timer_node(timer_node::calls<&posting_timer::on_expire>{}) {}

  // Before the timer is filed, where `this` is final (await_suspend): its expiry queues c into
  // loop's expired batch, which runs right after the timer queue's advance().
  void arm_expiry(event_loop& loop, continuation c) noexcept {
    loop_ = &loop;
    expired_.prepare(c);
  }

  event_loop* loop_ = nullptr;  // null until arm_expiry()

 private:
  static void on_expire(timer::timer_node& n) noexcept {
    auto& self = static_cast<posting_timer&>(n);
    post_expired(*self.loop_, self.expired_, self.expired_.prepared());
  }

  ready_node expired_;  // queued in the expired batch between the timer firing and the continuation
};

}  // namespace cogwheel::detail
