#include "event_loop.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <cogwheel/runtime/detail/frame_pool.hpp>

#include "cycle_clock.hpp"
#include "loop_registry.hpp"

namespace cogwheel::detail {

event_loop::event_loop(const runtime_options& options, unsigned core)
    : core_(core),
      ready_budget_(options.ready_budget == 0 ? 1 : options.ready_budget),
      resolver_(options.resolver),
      time_(options, metrics_),
      timed_(options.metrics),
      q32_(options.metrics ? ns_per_cycle_q32() : 0),
      stalls_(options.metrics ? options.stall_threshold : clock::duration::zero(), core, q32_) {
  if (this_thread_loop != nullptr)
    throw std::logic_error("cogwheel: this thread already runs a loop (nested run()?)");

  driver_ = make_io_driver(options, metrics_, deferred_);

  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    const int e = errno;
    throw std::system_error(e, std::system_category(), "cogwheel: eventfd for cross-core wake-ups");
  }
  wake_.loop = this;
  wake_.on_cqe = &event_loop::on_wake;
  this_thread_loop = this;
  arm_wake();
  publish_gauges();
  loop_registry::add(*this);
}

void event_loop::shutdown() noexcept {
  if (shut_down_) return;
  destroy_spawned();
  hooks_.drain([](shutdown_hook& h) { h.on_shutdown(h); });
  shut_down_ = true;  // from here on the wake-up read is not re-armed
  if (wake_.in_flight) cancel_and_wait(wake_, wake_.in_flight);
  if (this_thread_loop == this) this_thread_loop = nullptr;
}

event_loop::~event_loop() {
  loop_registry::remove(*this);  // no snapshot reads this loop from here on
  shutdown();
  // Messages that arrived too late to run (a submit_to racing the runtime's stop): their
  // senders' state is released, nothing runs.
  for (remote_message* m = inbox_.exchange(nullptr, std::memory_order_acquire); m != nullptr;) {
    remote_message* next = m->next;
    m->discard(*m);
    m = next;
  }
  close_descriptor(wake_fd_);
  driver_.reset();
}

void event_loop::dispatch_set_aside(std::uint64_t id) noexcept {
  // By index: a dispatched handler may append to these vectors (a deferred completion).
  for (std::vector<completion>* v : {&reaped_, &deferred_}) {
    for (std::size_t i = 0; i < v->size(); ++i) {
      if ((*v)[i].user_data != id) continue;
      const completion copy = (*v)[i];
      (*v)[i].user_data = 0;
      dispatch(copy);
    }
  }
}

void event_loop::cancel_and_wait(io_completion& op, bool (*in_flight)(const void*) noexcept,
                                 const void* state, bool all) {
  const auto id = reinterpret_cast<std::uint64_t>(&op);
  // Completions of op already taken from the ring but not yet dispatched go to it first.
  dispatch_set_aside(id);
  if (!in_flight(state)) return;
  cancel_async(op, all);
  // Queuing the cancel may have set completions aside into deferred_, op's own possibly among
  // them (io_uring: the SQ was full and the kernel refused to submit with EBUSY; epoll: the
  // cancellation itself completes a waiting operation).
  dispatch_set_aside(id);
  std::vector<completion> got;
  while (in_flight(state)) {
    got.clear();
    driver_->wait(-1, got);
    for (const completion& c : got) {
      if (c.user_data == id)
        dispatch(c);
      else
        deferred_.push_back(c);
    }
  }
}

void event_loop::dispatch(const completion& c) noexcept {
  if (c.user_data == 0) return;
  ++metrics_.completions;
  auto* op = reinterpret_cast<io_completion*>(c.user_data);
  op->on_cqe(*op, c.res, c.flags);
}

void event_loop::run_once() {
  if (timed_) {
    run_once_timed();
  } else {
    ++metrics_.iterations;
    time_.tick(kernel_skipped_);
    time_.run_expired();
    // Polled every iteration: a running loop picks messages up without being woken (senders
    // write the eventfd only to a loop that said it is going to sleep, see wait_and_reap).
    if (inbox_.load(std::memory_order_relaxed) != nullptr && !shut_down_) drain_inbox();
    run_ready();
    kernel_skipped_ = skip_kernel();
    if (kernel_skipped_)
      dispatch_set_aside_batch();
    else
      wait_and_reap();
  }
  if (time_.now() >= next_publish_) {
    publish_gauges();
    // Saturating: a paused clock with nothing left to wait for stands at time_point::max().
    const clock::time_point t = time_.now();
    next_publish_ = t < clock::time_point::max() - publish_interval ? t + publish_interval : clock::time_point::max();
  }
}

void event_loop::run_once_timed() {
  // The same steps as run_once, between cycle-counter readings (cheaper than the clock, but not
  // free next to a hot iteration). Every iteration: its busy time (one reading, at its end: its
  // start is the previous one's end, which run_until sets before the first) and the stall
  // detector. The phases cost two or three readings more, so an iteration that follows one
  // that skipped the kernel (the hot path: work ready, nothing to ask the kernel) times them
  // only when picked at random, 1 in phase_sample_every, and then counts for that many; every
  // other iteration (it is about to go to the kernel, microseconds anyway) times them always.
  // The phase histograms are thus an unbiased estimate: count and sum exact in expectation.
  ++metrics_.iterations;
  const std::uint64_t c0 = last_cycles_;
  std::uint64_t weight = 1;
  if (kernel_skipped_) weight = sample_phases() ? phase_sample_every : 0;
  stalls_.iteration_start(c0, metrics_);
  time_.tick(kernel_skipped_, c0);
  time_.run_expired();
  const std::uint64_t c1 = weight != 0 ? cycles() : 0;
  if (inbox_.load(std::memory_order_relaxed) != nullptr && !shut_down_) drain_inbox();
  run_ready();
  const std::uint64_t c2 = weight != 0 ? cycles() : 0;
  wait_cycles_ = wait_blocking_ = 0;
  time_wait_ = weight != 0;
  kernel_skipped_ = skip_kernel();
  if (kernel_skipped_)
    dispatch_set_aside_batch();
  else
    wait_and_reap();
  const std::uint64_t c3 = cycles();
  last_cycles_ = c3;
  if (weight != 0) {
    metrics_.phase(loop_phase::timers).record(cycles_to_ns(c1 - c0, q32_), weight);
    metrics_.phase(loop_phase::tasks).record(cycles_to_ns(c2 - c1, q32_), weight);
    metrics_.phase(loop_phase::kernel_wait).record(cycles_to_ns(wait_cycles_, q32_), weight);
    metrics_.phase(loop_phase::completions).record(cycles_to_ns(c3 - c2 - wait_cycles_, q32_), weight);
  }
  const std::uint64_t busy_ns = cycles_to_ns(c3 - c0 - wait_blocking_, q32_);
  metrics_.iteration_duration.record(busy_ns);
  stalls_.iteration_end(c0, c3, busy_ns, metrics_);
}

bool event_loop::sample_phases() noexcept {
  // xorshift64: cheap, and no period a loop's own rhythm could fall in step with.
  sample_state_ ^= sample_state_ << 13;
  sample_state_ ^= sample_state_ >> 7;
  sample_state_ ^= sample_state_ << 17;
  return (sample_state_ & (phase_sample_every - 1)) == 0;
}

void event_loop::publish_gauges() noexcept {
  const auto levels = time_.timers().pending_per_level();
  for (std::size_t i = 0; i < levels.size(); ++i)
    metrics_.pending_timers_per_level[i].set(static_cast<std::int64_t>(levels[i]));
  metrics_.ready_tasks.set(static_cast<std::int64_t>(ready_.size()));
}

void event_loop::snapshot(core_metrics& out) noexcept {
  publish_gauges();
  metrics_.snapshot(out);
  out.core = core_;
  out.timers = time_.timers().kind();
  out.backend = backend();
}

bool event_loop::skip_kernel() noexcept {
  // With work ready the kernel would only be polled. Nothing can come back from a poll that
  // has not been asked for yet unless SQEs wait (they go in at once) or completions are
  // already there; otherwise the poll is what is skipped, for at most kernel_poll_rounds
  // iterations and kernel_poll_interval of loop time: that is all the latency it adds to I/O.
  if ((ready_.empty() && deferred_.empty()) || stop_requested_) return false;
  if (driver_->kernel_work_pending()) return false;
  if (++rounds_since_kernel_ >= kernel_poll_rounds) return false;
  // After a wait that may have blocked, the kernel was last asked when it returned: this
  // iteration's clock reading is the first one after that.
  if (last_kernel_ == after_the_wait) last_kernel_ = time_.now();
  return time_.now() - last_kernel_ < kernel_poll_interval;
}

void event_loop::run_ready() {
  // Bounded: a coroutine that keeps re-posting itself runs once per iteration, so it starves
  // neither timers nor I/O. A coroutine run here may destroy a frame whose node is further down
  // this batch (a waiter woken, then its task destroyed): the node leaves the queue, which can
  // then run dry before n nodes were popped.
  std::size_t n = ready_.size() < ready_budget_ ? ready_.size() : ready_budget_;
  while (n-- > 0 && !ready_.empty()) {
    ++metrics_.tasks_run;
    ready_.pop().complete().resume();
  }
}

void event_loop::wait_and_reap() {
  // How long to block: not at all while work is ready (or a stop, a nudge, set-aside
  // completions wait); otherwise whatever the time driver allows. The kernel's wait is
  // relative, so the time driver measures it from a fresh clock reading.
  std::int64_t ns = 0;  // a poll
  const bool nudged = std::exchange(nudged_, false);
  if (ready_.empty() && deferred_.empty() && !stop_requested_ && !nudged) ns = time_.wait_ns();
  if (ns != 0) {
    // About to sleep: the frame pool may give memory back now, and may ask to be called again
    // in a while (a chunk not empty long enough yet) to give back the rest.
    const std::int64_t pool_ns = frame_pool_idle();
    if (pool_ns >= 0 && (ns < 0 || pool_ns < ns)) ns = pool_ns;
    // About to sleep: say so before the last look at the inbox (a sender posts, then looks at
    // sleeping_; all four accesses seq_cst, so one side sees the other's write: either the
    // message is found here, or its sender writes the eventfd).
    sleeping_.store(true, std::memory_order_seq_cst);
    if (inbox_.load(std::memory_order_seq_cst) != nullptr) ns = 0;
  }
  rounds_since_kernel_ = 0;
  last_kernel_ = ns == 0 ? time_.now() : after_the_wait;
  if (ns != 0) {
    ++metrics_.kernel_waits;
    // A long sleep (or one until a completion): other threads' snapshots see this core's
    // gauges as they are now, not as they were at the last periodic publication.
    if (ns < 0 || ns > std::chrono::nanoseconds(publish_interval).count()) publish_gauges();
  }
  // Timed when the phases are (time_wait_), and whenever the wait may block: its time is no
  // part of the iteration's busy time.
  if (timed_ && (time_wait_ || ns != 0)) {
    const std::uint64_t c = cycles();
    driver_->wait(ns, deferred_);
    wait_cycles_ = cycles() - c;
    if (ns != 0) wait_blocking_ = wait_cycles_;
  } else {
    driver_->wait(ns, deferred_);  // after anything set aside earlier, in arrival order
  }
  sleeping_.store(false, std::memory_order_relaxed);
  const bool any = dispatch_set_aside_batch();
  time_.after_wait(any || !ready_.empty());
}

bool event_loop::dispatch_set_aside_batch() noexcept {
  reaped_.swap(deferred_);
  const bool any = !reaped_.empty();
  for (std::size_t i = 0; i < reaped_.size(); ++i) {
    const completion c = reaped_[i];  // cancel_and_wait may zero later entries meanwhile
    // Consumed before it runs: if its handler ends in cancel_and_wait for the same owner (a
    // multishot accept whose coroutine closes the listener), that must not find and dispatch
    // this completion, or the ones before it, a second time.
    reaped_[i].user_data = 0;
    dispatch(c);
  }
  reaped_.clear();
  return any;
}

void event_loop::arm_wake() {
  wake_read_.opcode = io_opcode::read;
  wake_read_.fd = wake_fd_;
  wake_read_.addr = &wake_.value;
  wake_read_.len = sizeof wake_.value;
  wake_.in_flight = true;  // first: epoll may complete it inline into the set-aside list
  ++metrics_.submissions;  // its completion is counted too (operations_in_flight)
  driver_->submit(wake_, wake_read_);
}

void event_loop::on_wake(io_completion& op, int /*res*/, unsigned /*flags*/) noexcept {
  auto& w = static_cast<wake_op&>(op);
  w.in_flight = false;
  event_loop& loop = *w.loop;
  ++loop.metrics_.remote_wakeups;
  loop.wake_pending_.store(false);  // before draining: a message posted meanwhile wakes again
  // After shutdown (this is then shutdown's own cancel_and_wait) the loop runs nothing more:
  // messages still arriving, e.g. a submit_to racing the runtime's stop, stay in the inbox and
  // are destroyed with the loop. Run here, they would spawn frames nobody destroys any more.
  if (!loop.shut_down_) loop.drain_inbox();
  if (loop.remote_stop_.load()) loop.stop_requested_ = true;
  if (!loop.shut_down_) loop.arm_wake();
}

void event_loop::drain_inbox() {
  remote_message* m = inbox_.exchange(nullptr, std::memory_order_acquire);
  remote_message* in_order = nullptr;  // the stack reversed: arrival order
  while (m != nullptr) {
    remote_message* next = m->next;
    m->next = in_order;
    in_order = m;
    m = next;
  }
  while (in_order != nullptr) {
    remote_message* next = in_order->next;  // deliver may free the message
    ++metrics_.remote_messages;
    in_order->deliver(*in_order);
    in_order = next;
  }
}

void event_loop::post_remote(remote_message& m) noexcept {
  remote_message* head = inbox_.load(std::memory_order_relaxed);
  do {
    m.next = head;
  } while (!inbox_.compare_exchange_weak(head, &m, std::memory_order_seq_cst, std::memory_order_relaxed));
  // A running loop finds m at its next iteration; only one that sleeps (or is about to) needs
  // the eventfd, and one write per burst wakes it. (On x86 the locked CAS already orders, so
  // this costs the sender nothing over the plain push.)
  if (!sleeping_.load(std::memory_order_seq_cst)) return;
  if (!wake_pending_.exchange(true)) {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
}

void event_loop::request_stop() {
  // Async-signal-safe (runtime::stop() from a SIGINT handler). On the loop's own thread the
  // flag is set directly, and the eventfd is written all the same: a signal that lands between
  // the loop's check of the flag and its io_uring_enter would otherwise leave it asleep.
  if (this_thread_loop == this) stop_requested_ = true;
  remote_stop_.store(true);
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void event_loop::adopt_spawned(spawned_link& l) noexcept {
  ++metrics_.tasks_spawned;
  spawned_.push_back(l);
  post(l.start, l.frame);
}

void event_loop::finish_spawned(spawned_link& l) noexcept {
  l.unlink();
  delete &l;
  nudged_ = true;  // run_until may be waiting for the last spawned task to finish
}

void event_loop::destroy_spawned() noexcept {
  // Destroying a frame may destroy children whose awaiters cancel timers and wait for in-flight
  // operations (which may spawn nothing: the loop is going away).
  while (has_spawned()) {
    spawned_link& l = spawned_.pop_front();
    const std::coroutine_handle<> frame = l.frame;
    delete &l;  // unqueues its start node if it never started
    frame.destroy();
  }
  time_.clear_expired();
  ready_.clear();
}

}  // namespace cogwheel::detail
