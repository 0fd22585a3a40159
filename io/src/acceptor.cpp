#include "acceptor.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace cogwheel::detail {

acceptor::acceptor(int fd, std::size_t max_unclaimed) noexcept
    : timer_node(timer_node::calls<&acceptor::on_backoff_over>{}), fd_(fd), max_unclaimed_(max_unclaimed == 0 ? 1 : max_unclaimed) {
  on_cqe = &acceptor::on_accept;
  accept_.socket = new_socket_identity();
}

acceptor::~acceptor() {
  closing_ = true;
  release_loop();
  for (const accept_outcome& a : accepted_)
    if (a.fd >= 0) close_descriptor(a.fd);
  if (fd_ >= 0) close_descriptor(fd_);
}

void acceptor::bind_loop() {
  loop_ = &current_loop();
  accept_.fresh = true;  // another loop may have watched it before
  on_shutdown = &acceptor::on_loop_shutdown;
  add_shutdown_hook(*loop_, *this);
}

// Lets go of the loop: the back-off timer, the accept SQE (waiting for its completion) and the
// accept() calls still waiting, which complete with errc::operation_canceled.
void acceptor::release_loop() noexcept {
  if (loop_ == nullptr) return;
  const bool was_closing = std::exchange(closing_, true);
  cancel_timer(*loop_, *this);
  if (armed_ != 0) cancel_all_and_wait(*loop_, *this, armed_);
  while (!waiting_.empty()) {
    accept_operation* op = waiting_.front();
    waiting_.pop_front();
    op->waiting_ = false;
    op->acceptor_ = nullptr;
    op->outcome_ = accept_outcome::failed(ECANCELED);
    post(*loop_, op->later_, op->continuation_);
  }
  shutdown_hook::unlink();
  loop_ = nullptr;
  closing_ = was_closing;
}

void acceptor::on_loop_shutdown(shutdown_hook& h) noexcept {
  auto& self = static_cast<acceptor&>(h);
  self.release_loop();  // a later accept() on another loop binds to that one
}

bool acceptor::try_take(accept_outcome& out) noexcept {
  if (accepted_.empty()) return false;
  out = accepted_.front();
  accepted_.pop_front();
  if (loop_ != nullptr && !closing_) arm_if_room();  // room again
  return true;
}

void acceptor::wait(accept_operation& op) {
  if (loop_ == nullptr) bind_loop();
  waiting_.push_back(&op);
  arm_if_room();
}

void acceptor::unwait(accept_operation& op) noexcept {
  auto it = std::find(waiting_.begin(), waiting_.end(), &op);
  if (it != waiting_.end()) waiting_.erase(it);
}

void acceptor::arm_if_room() {
  // accepted_ is empty whenever someone waits (deliver hands connections over at once), so
  // this also arms for every waiting accept().
  if (scheduled()) return;
  while (armed_ < accept_batch && accepted_.size() + armed_ < max_unclaimed_) {
    accept_.set(io_opcode::accept, fd_, nullptr, 0, SOCK_CLOEXEC);
    ++armed_;
    submit(*loop_, *this, accept_);
  }
}

void acceptor::deliver(accept_outcome outcome) noexcept {
  if (waiting_.empty()) {
    // An error nobody has seen yet is kept once: back-off retries that fail again while no
    // accept() waits do not pile up stale copies for later callers.
    if (outcome.fd < 0 && !accepted_.empty() && accepted_.back().fd < 0)
      accepted_.back() = outcome;
    else
      accepted_.push_back(outcome);
    return;
  }
  accept_operation* op = waiting_.front();
  waiting_.pop_front();
  op->waiting_ = false;
  op->outcome_ = outcome;
  op->continuation_.complete().resume();
}

void acceptor::on_accept(io_completion& c, int res, unsigned /*flags*/) noexcept {
  auto& self = static_cast<acceptor&>(c);
  --self.armed_;
  if (self.closing_) {
    if (res >= 0) close_descriptor(res);
    return;
  }
  // deliver() resumes the accepting coroutine inline, and that coroutine may destroy the
  // listener (and with it this acceptor) before deliver() returns: so deliver() comes last and
  // nothing touches `self` after it.
  if (res == -EMFILE || res == -ENFILE || res == -ENOBUFS || res == -ENOMEM) {
    // Out of descriptors or memory: tell one accept() caller, then wait before trying again
    // (re-arming now would fail again at once: a busy loop). The other SQEs of the batch fail
    // the same way: the last of them reports and starts the back-off.
    if (self.armed_ != 0) return;
    self.backoff_ = std::clamp<clock::duration>(self.backoff_ * 2, min_backoff, max_backoff);
    note_accept_pause(*self.loop_);
    reschedule_timer(*self.loop_, self, loop_now(*self.loop_) + self.backoff_);
    self.deliver(accept_outcome::of_cqe(res));
    return;
  }
  if (res == -ECANCELED) {
    self.arm_if_room();
    return;
  }
  if (res < 0) {
    // Any other error (ECONNABORTED, or the listening socket itself failing: EINVAL once it
    // is shut down) is the caller's to judge, and accepting ahead stops until a caller asks
    // again (wait, try_take): a socket that fails every accept, re-armed here, failed and
    // re-armed in a busy loop. Callers waiting behind the one told still need a request.
    if (self.waiting_.size() > 1) self.arm_if_room();
    self.deliver(accept_outcome::of_cqe(res));
    return;
  }
  self.backoff_ = clock::duration::zero();
  // A connection: accepting goes on (counted into the room before re-arming, so the bound
  // holds).
  if (self.waiting_.empty()) {
    self.deliver(accept_outcome::of_cqe(res));  // queued: nothing is resumed
    self.arm_if_room();
    return;
  }
  self.arm_if_room();
  self.deliver(accept_outcome::of_cqe(res));
}

void acceptor::on_backoff_over(timer::timer_node& n) noexcept {
  auto& self = static_cast<acceptor&>(n);
  if (!self.closing_) self.arm_if_room();
}

accept_operation::~accept_operation() {
  if (waiting_ && acceptor_ != nullptr) acceptor_->unwait(*this);
  if (outcome_.fd >= 0) close_descriptor(outcome_.fd);  // accepted but never taken
}

std::coroutine_handle<> accept_operation::start(continuation c) {
  continuation_ = c;
  if (acceptor_ == nullptr) {
    outcome_ = accept_outcome::failed(EBADF);
    return c.complete();
  }
  if (acceptor_->try_take(outcome_)) return c.complete();
  acceptor_->wait(*this);
  waiting_ = true;
  return std::noop_coroutine();
}

void accept_operation::cancel() noexcept {
  if (!waiting_) return;
  acceptor_->unwait(*this);
  waiting_ = false;
  outcome_ = accept_outcome::failed(ECANCELED);
  post(current_loop(), later_, continuation_);
}

cogwheel::result<tcp_stream> accept_operation::result() {
  if (outcome_.fd < 0) return errno_code(outcome_.error);
  return connected_stream(std::exchange(outcome_.fd, -1));
}

}  // namespace cogwheel::detail
