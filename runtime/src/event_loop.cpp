#include "event_loop.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

namespace cogwheel::detail {

thread_local event_loop* event_loop::current_ = nullptr;

namespace {

std::string setup_failure_message(int err, unsigned entries) {
  std::string m = "cogwheel: cannot set up io_uring (" + std::string(std::strerror(err)) + "): ";
  switch (err) {
    case EPERM:
      return m +
             "io_uring is not permitted here. Either the kernel has it disabled "
             "(sysctl kernel.io_uring_disabled is 2, or 1 and this process is not in "
             "kernel.io_uring_group), or a seccomp filter blocks io_uring_setup (container "
             "runtimes' default profiles do). Enable it with 'sysctl -w "
             "kernel.io_uring_disabled=0' or run with a seccomp profile that allows "
             "io_uring_setup, io_uring_enter and io_uring_register.";
    case ENOSYS:
      return m +
             "this kernel has no io_uring (or a seccomp filter hides it). cogwheel needs "
             "Linux 5.19 or later built with CONFIG_IO_URING.";
    case ENOMEM:
      return m + "not enough locked memory for a ring of " + std::to_string(entries) +
             " entries (kernels before 5.12 charge rings to RLIMIT_MEMLOCK). Raise 'ulimit -l' "
             "or lower runtime_options::sq_entries.";
    case EMFILE:
    case ENFILE:
      return m + "no file descriptor left for the ring. Close descriptors or raise 'ulimit -n'.";
    default:
      return m + "the kernel rejected the ring parameters (sq_entries " + std::to_string(entries) +
             "); use a power of two up to 32768.";
  }
}

unsigned round_up_pow2(unsigned v) {
  unsigned p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace

event_loop::event_loop(const runtime_options& options, unsigned core)
    : core_(core),
      ready_budget_(options.ready_budget == 0 ? 1 : options.ready_budget),
      time_(options) {
  if (current_ != nullptr)
    throw std::logic_error("cogwheel: this thread already runs a loop (nested run()?)");
  spawned_.prev = spawned_.next = &spawned_;

  const unsigned sq = round_up_pow2(options.sq_entries == 0 ? 1 : options.sq_entries);
  const unsigned cq = options.cq_entries == 0 ? 4 * sq : round_up_pow2(options.cq_entries);
  // Preferred set-up first (one issuer, task work deferred to our own io_uring_enter: measured
  // cheaper per completion), then fallbacks for older kernels.
  const unsigned attempts[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
      IORING_SETUP_COOP_TASKRUN,
      0,
  };
  int err = 0;
  for (unsigned flags : attempts) {
    io_uring_params p{};
    p.flags = flags | IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
    p.cq_entries = cq;
    err = io_uring_queue_init_params(sq, &ring_, &p);
    if (err != -EINVAL) break;
  }
  if (err < 0) throw std::system_error(-err, std::system_category(), setup_failure_message(-err, sq));

  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    const int e = errno;
    io_uring_queue_exit(&ring_);
    throw std::system_error(e, std::system_category(), "cogwheel: eventfd for cross-core wake-ups");
  }
  wake_.loop = this;
  wake_.on_cqe = &event_loop::on_wake;
  current_ = this;
  arm_wake();
}

void event_loop::shutdown() noexcept {
  if (shut_down_) return;
  destroy_spawned();
  hooks_.drain([](shutdown_hook& h) { h.on_shutdown(h); });
  shut_down_ = true;  // from here on the wake-up read is not re-armed
  if (wake_.in_flight) cancel_and_wait(wake_, wake_.in_flight);
  if (current_ == this) current_ = nullptr;
}

event_loop::~event_loop() {
  shutdown();
  // Messages that arrived too late to run (a submit_to racing the runtime's stop): their
  // senders' state is released, nothing runs.
  for (remote_message* m = inbox_.exchange(nullptr, std::memory_order_acquire); m != nullptr;) {
    remote_message* next = m->next;
    m->discard(*m);
    m = next;
  }
  ::close(wake_fd_);
  io_uring_queue_exit(&ring_);
}

io_uring_sqe* event_loop::get_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    ++stats_.sq_full_flushes;
    const int r = io_uring_submit(&ring_);
    if (r == -EBUSY || r == -EAGAIN) {
      // The kernel holds completions we have not consumed: set them aside, then retry.
      io_uring_get_events(&ring_);
      drain_cq(deferred_);
    } else if (r < 0 && r != -EINTR) {
      std::fprintf(stderr, "cogwheel: io_uring_submit failed: %s\n", std::strerror(-r));
      std::abort();
    }
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void event_loop::cancel_async(io_completion& op, bool all) {
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_cancel64(sqe, reinterpret_cast<std::uint64_t>(&op), all ? IORING_ASYNC_CANCEL_ALL : 0);
  io_uring_sqe_set_data64(sqe, 0);  // its own outcome does not matter: op's completion does
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

void event_loop::dispatch_set_aside(std::uint64_t id) noexcept {
  // By index: a dispatched handler may append to these vectors (a deferred completion).
  for (std::vector<cqe_copy>* v : {&reaped_, &deferred_}) {
    for (std::size_t i = 0; i < v->size(); ++i) {
      if ((*v)[i].user_data != id) continue;
      const cqe_copy copy = (*v)[i];
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
  // Queuing the cancel may have found the SQ full and the kernel refusing to submit (EBUSY:
  // completions pending), in which case get_sqe() set the CQ aside into deferred_, op's own
  // completion possibly among them.
  dispatch_set_aside(id);
  std::vector<cqe_copy> got;
  while (in_flight(state)) {
    const int r = io_uring_submit_and_wait(&ring_, 1);
    if (r < 0 && r != -EINTR && r != -ETIME && r != -EBUSY) {
      std::fprintf(stderr, "cogwheel: waiting for a cancelled operation failed: %s\n", std::strerror(-r));
      std::abort();
    }
    got.clear();
    drain_cq(got);
    for (const cqe_copy& c : got) {
      if (c.user_data == id)
        dispatch(c);
      else
        deferred_.push_back(c);
    }
  }
}

void event_loop::drain_cq(std::vector<cqe_copy>& out) {
  // Counted before peeking: io_uring_peek_batch_cqe flushes the kernel's overflow list itself
  // when it finds the CQ empty, so by the time the loop below sees an empty CQ the flag is
  // usually gone again (and a count taken only there stayed at 0).
  if (io_uring_cq_has_overflow(&ring_)) ++stats_.cq_overflows;
  for (;;) {
    io_uring_cqe* cqes[64];
    const unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, 64);
    for (unsigned i = 0; i < n; ++i) out.push_back(cqe_copy{cqes[i]->user_data, cqes[i]->res, cqes[i]->flags});
    io_uring_cq_advance(&ring_, n);
    if (n > 0) continue;
    if (!io_uring_cq_has_overflow(&ring_)) return;
    io_uring_get_events(&ring_);  // the kernel kept completions the CQ had no room for: fetch them
  }
}

void event_loop::dispatch(const cqe_copy& c) noexcept {
  if (c.user_data == 0) return;
  ++stats_.completions;
  auto* op = reinterpret_cast<io_completion*>(c.user_data);
  op->on_cqe(*op, c.res, c.flags);
}

void event_loop::run_once() {
  ++stats_.iterations;
  time_.tick(stats_, kernel_skipped_);
  time_.run_expired();
  // Polled every iteration: a running loop picks messages up without being woken (senders
  // write the eventfd only to a loop that said it is going to sleep, see wait_and_reap).
  if (inbox_.load(std::memory_order_relaxed) != nullptr && !shut_down_) drain_inbox();
  run_ready();
  kernel_skipped_ = skip_kernel();
  if (!kernel_skipped_) wait_and_reap();
}

bool event_loop::skip_kernel() noexcept {
  // With work ready the kernel would only be polled. Nothing can come back from a poll that
  // has not been asked for yet unless SQEs wait (they go in at once) or completions are
  // already there; otherwise the poll is what is skipped, for at most kernel_poll_rounds
  // iterations and kernel_poll_interval of loop time: that is all the latency it adds to I/O.
  if (ready_.empty() || !deferred_.empty() || stop_requested_) return false;
  if (io_uring_sq_ready(&ring_) != 0 || io_uring_cq_ready(&ring_) != 0) return false;
  if (++rounds_since_kernel_ >= kernel_poll_rounds) return false;
  return time_.now() - last_kernel_ < kernel_poll_interval;
}

void event_loop::run_ready() {
  // Bounded: a coroutine that keeps re-posting itself runs once per iteration, so it starves
  // neither timers nor I/O.
  std::size_t n = ready_.size() < ready_budget_ ? ready_.size() : ready_budget_;
  while (n-- > 0) ready_.pop().complete().resume();
}

void event_loop::wait_and_reap() {
  // How long to block: not at all while work is ready (or a stop, a nudge, set-aside
  // completions wait); otherwise whatever the time driver allows. The kernel's wait is
  // relative, so the time driver measures it from a fresh clock reading.
  __kernel_timespec ts{};  // zero: poll
  __kernel_timespec* timeout = &ts;
  const bool nudged = std::exchange(nudged_, false);
  if (ready_.empty() && deferred_.empty() && !stop_requested_ && !nudged) {
    const std::int64_t ns = time_.wait_ns();
    if (ns < 0) {
      timeout = nullptr;  // nothing due ever: sleep until a completion
    } else {
      ts.tv_sec = ns / 1'000'000'000;
      ts.tv_nsec = ns % 1'000'000'000;
    }
  }
  bool poll = timeout == &ts && ts.tv_sec == 0 && ts.tv_nsec == 0;
  if (!poll) {
    // About to sleep: say so before the last look at the inbox (a sender posts, then looks at
    // sleeping_; all four accesses seq_cst, so one side sees the other's write: either the
    // message is found here, or its sender writes the eventfd).
    sleeping_.store(true, std::memory_order_seq_cst);
    if (inbox_.load(std::memory_order_seq_cst) != nullptr) {
      ts = {};
      timeout = &ts;
      poll = true;
    }
  }
  rounds_since_kernel_ = 0;
  last_kernel_ = time_.now();
  int r;
  if (poll) {
    // Not a wait with a zero timeout: the kernel arms a timer for that too, which measured
    // ~15 us per call on 6.18 (every yield() paid it). Submitting with GETEVENTS runs the
    // deferred task work and flushes overflow just the same, and returns at once.
    r = io_uring_submit_and_get_events(&ring_);
  } else {
    ++stats_.waits;
    io_uring_cqe* cqe = nullptr;
    r = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, timeout, nullptr);
  }
  sleeping_.store(false, std::memory_order_relaxed);
  if (r < 0 && r != -ETIME && r != -EINTR && r != -EBUSY && r != -EAGAIN) {
    std::fprintf(stderr, "cogwheel: io_uring_enter failed: %s\n", std::strerror(-r));
    std::abort();
  }

  drain_cq(deferred_);  // after anything set aside earlier, in arrival order
  reaped_.swap(deferred_);
  const bool any = !reaped_.empty();
  for (std::size_t i = 0; i < reaped_.size(); ++i) {
    const cqe_copy c = reaped_[i];  // cancel_and_wait may zero later entries meanwhile
    // Consumed before it runs: if its handler ends in cancel_and_wait for the same owner (a
    // multishot accept whose coroutine closes the listener), that must not find and dispatch
    // this completion, or the ones before it, a second time.
    reaped_[i].user_data = 0;
    dispatch(c);
  }
  reaped_.clear();
  time_.after_wait(any || !ready_.empty(), stats_);
}

void event_loop::arm_wake() {
  io_uring_sqe* sqe = get_sqe(wake_);
  io_uring_prep_read(sqe, wake_fd_, &wake_.value, sizeof wake_.value, 0);
  wake_.in_flight = true;
}

void event_loop::on_wake(io_completion& op, int /*res*/, unsigned /*flags*/) noexcept {
  auto& w = static_cast<wake_op&>(op);
  w.in_flight = false;
  event_loop& loop = *w.loop;
  ++loop.stats_.remote_wakeups;
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
    ++stats_.remote_messages;
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
  if (current_ == this) stop_requested_ = true;
  remote_stop_.store(true);
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void event_loop::link_spawned(spawned_link& l) noexcept {
  l.prev = spawned_.prev;
  l.next = &spawned_;
  spawned_.prev->next = &l;
  spawned_.prev = &l;
}

void event_loop::unlink_spawned(spawned_link& l) noexcept {
  l.prev->next = l.next;
  l.next->prev = l.prev;
  l.prev = l.next = &l;
  nudged_ = true;  // run_until may be waiting for the last spawned task to finish
}

void event_loop::destroy_spawned() noexcept {
  // Destroying a frame unlinks it (the promise's destructor), and may destroy children whose
  // awaiters cancel timers and wait for in-flight operations.
  while (has_spawned()) spawned_.next->frame.destroy();
  time_.clear_expired();
  ready_.clear();
}

}  // namespace cogwheel::detail
