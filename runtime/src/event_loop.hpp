// event_loop: one core's loop, owned by one thread. It is where the rooms of the runtime meet,
// once per iteration (run_once):
//
//   time driver   tick(): the clock read once, the timer queue advanced to it
//                 run_expired(): every waiter whose timer expired resumes, in one batch
//   inbox         messages from other cores, polled (a running loop needs no wake-up)
//   tasks         up to ready_budget coroutines from the ready queue
//   I/O driver    submit what is queued and wait in ONE call (io_uring_enter or epoll_wait),
//                 bounded by the time driver's wait_ns() (zero when work is ready); take every
//                 completion in one pass and dispatch each to its owner. While work is ready
//                 and the kernel holds nothing for us, that poll is skipped for up to 61
//                 iterations or 50 us (skip_kernel): a yield() then costs no syscall, and
//                 completions the driver produced without the kernel (epoll's operations that
//                 succeeded at once) are dispatched without one.
//
// Idle means asleep in the kernel until a completion or the next deadline: no tick.
// The time driver is time_driver.hpp; the I/O driver is io_driver.hpp (io_uring or epoll);
// dispatch, set-aside completions, cancel-and-wait and the cross-core inbox are this class.
//
// Threading: everything here belongs to the loop's thread except post_remote() and
// request_stop(), which any thread may call.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <vector>

#include <cogwheel/runtime/detail/intrusive_list.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/detail/loop_services.hpp>
#include <cogwheel/runtime/detail/ready_queue.hpp>
#include <cogwheel/runtime/detail/waiter.hpp>
#include <cogwheel/runtime/metrics.hpp>
#include <cogwheel/runtime/options.hpp>
#include <cogwheel/timer/queue.hpp>

#include "io_driver.hpp"
#include "live_metrics.hpp"
#include "stall_detector.hpp"
#include "time_driver.hpp"

namespace cogwheel::detail {

// A spawned (detached) task: its frame, its link in its loop's list and the ready node that
// starts it in its place in the ready queue, all that spawn() allocates besides the task's own
// frame (a connection per spawned task pays it once). Owned by the loop from adopt_spawned()
// until the task finishes (finish_spawned) or the loop destroys it at shutdown; allocated with
// new, not from the frame pools: records among the frames leave fewer frames per page for the
// resumes that walk them (runtime_bench sleepers_expire, bench/README.md).
struct spawned_link : list_link {
  std::coroutine_handle<> frame;
  ready_node start;
};

class event_loop {
 public:
  // Sets up the I/O backend (see make_io_driver): throws std::system_error naming the cause and
  // the remedy when none can run, or io_uring was asked for and is unavailable.
  event_loop(const runtime_options& options, unsigned core);
  event_loop(const event_loop&) = delete;
  event_loop& operator=(const event_loop&) = delete;
  // Calls shutdown() if it has not run; then releases the backend.
  ~event_loop();
  // On the loop's thread, once: destroys the spawned coroutines still suspended, withdraws the
  // wake-up read and detaches the loop from the thread. Cross-thread wake-ups stay harmless
  // until destruction.
  void shutdown() noexcept;

  // The loop of the calling thread; nullptr when the thread runs none.
  static event_loop* current() noexcept { return this_thread_loop; }

  unsigned core() const noexcept { return core_; }
  // The loops of the same runtime, indexed by core (just this one under run()).
  void set_peers(const std::atomic<event_loop*>* peers, unsigned count) noexcept {
    peers_ = peers;
    peer_count_ = count;
  }
  event_loop* peer(unsigned core) noexcept {
    if (peers_ == nullptr) return core == core_ ? this : nullptr;
    return core < peer_count_ ? peers_[core].load(std::memory_order_acquire) : nullptr;
  }
  // The timestamp of this iteration (the one clock read).
  clock::time_point now() const noexcept { return time_.now(); }
  timer::timer_queue& timers() noexcept { return time_.timers(); }
  time_driver& time() noexcept { return time_; }
  // This core's metric cells (written here, read by any thread).
  const live_metrics& metrics() const noexcept { return metrics_; }
  // This core's metrics; its gauges derived now (the loop's thread only).
  void snapshot(core_metrics& out) noexcept;
  // Publishes the gauges derived from the loop's own structures into metrics() (pending
  // timers per level, ready tasks), for snapshots taken by other threads.
  void publish_gauges() noexcept;
  bool paused_clock() const noexcept { return time_.paused(); }
  // The backend, for what is not an operation (io's provided buffer groups).
  io_driver& driver() noexcept { return *driver_; }
  backend_kind backend() const noexcept { return driver_->kind(); }
  // What this loop's resolver (io's resolve()) is configured with.
  const resolver_options& resolver() const noexcept { return resolver_; }

  // Starts req on behalf of op (see loop_access.hpp): never fails, never completes inline.
  void submit(io_completion& op, io_request& req) {
    ++metrics_.submissions;
    driver_->submit(op, req);
  }
  // Asks the backend to cancel op's operation and blocks until op's final completion has been
  // dispatched to op (other completions are set aside for the next reap). For destructors of
  // awaiters whose coroutine frame is going away with the buffers the kernel may touch.
  void cancel_and_wait(io_completion& op, bool& in_flight) {
    cancel_and_wait(op, [](const void* f) noexcept { return *static_cast<const bool*>(f); }, &in_flight, false);
  }
  // The same for an owner with several SQEs in flight (all with its user_data): cancels them
  // all and waits until `in_flight` is 0.
  void cancel_all_and_wait(io_completion& op, const unsigned& in_flight) {
    cancel_and_wait(op, [](const void* n) noexcept { return *static_cast<const unsigned*>(n) != 0; }, &in_flight, true);
  }
  // Asks the backend to cancel op's operation; op's completion arrives later as usual.
  void cancel_async(io_completion& op, bool all = false) { driver_->cancel(op, all); }

  // For timer callbacks: queues c into this iteration's expired batch, which the loop resumes
  // in full right after advancing the timers (so advance() itself does only timer work).
  void post_expired(ready_node& node, continuation c) noexcept { time_.post_expired(node, c); }
  void post_expired(batch_node& node) noexcept { time_.post_expired(node); }
  // Queues c to complete in a coming iteration; `node` lives in the waiter (no allocation).
  // How an operation completes "later" when it cannot complete inside cancel().
  void post(ready_node& node, continuation c) noexcept { ready_.push(node, c); }
  // Waiters of this loop woken by other threads (channel, semaphore, event).
  wake_hub& hub() noexcept { return hub_; }

  // Runs iterations until `done` holds or a stop is requested.
  template <class Done>
  void run_until(Done&& done) {
    if (timed_) last_cycles_ = cycles();  // what ran before this call is no iteration's
    while (!done() && !stop_requested_) run_once();
  }
  void run_once();
  // Makes the coming wait a poll, so run_until's condition is checked again before the loop
  // sleeps (whoever completes what the condition watches calls it).
  void nudge() noexcept { nudged_ = true; }

  // Thread-safe: m is delivered on this loop's thread during a coming iteration (or
  // discarded when the loop is destroyed first). Wakes the loop only if no wake-up is pending.
  void post_remote(remote_message& m) noexcept;
  // Thread-safe: makes run_until return after the current iteration.
  void request_stop();
  bool stop_requested() const noexcept { return stop_requested_; }

  // Precondition: !h.linked(). See shutdown_hook.
  void add_shutdown_hook(shutdown_hook& h) noexcept { hooks_.push_back(h); }

  // Spawned (detached) coroutines, destroyed at shutdown if still suspended.
  // Takes `l` (and its frame, which has not started): the frame starts at the next iteration,
  // in its place among everything queued to run (FIFO, within the ready budget).
  void adopt_spawned(spawned_link& l) noexcept;
  // The task of `l` finished: unlinks and frees `l`; the caller destroys the frame.
  void finish_spawned(spawned_link& l) noexcept;
  bool has_spawned() const noexcept { return !spawned_.empty(); }
  void note_spawn_failure() noexcept { ++metrics_.spawn_failures; }
  // A listener paused accepting (out of descriptors or memory) and backs off.
  void note_accept_pause() noexcept { ++metrics_.accept_pauses; }
  void count_open_sockets(int delta) noexcept { metrics_.open_sockets.add(delta); }
  // Another thread's: a socket counted here left (see live_metrics::sockets_departed).
  void count_socket_departed() noexcept { metrics_.sockets_departed.fetch_add(1, std::memory_order_relaxed); }
  void count_pooled_buffers(int delta) noexcept { metrics_.pooled_buffers_in_use.add(delta); }
  // Destroys every spawned coroutine that is still suspended (their awaiters cancel their
  // timers and operations), then drops the ready queue.
  void destroy_spawned() noexcept;

 private:
  struct wake_op : io_completion {
    event_loop* loop = nullptr;
    std::uint64_t value = 0;
    bool in_flight = false;
  };

  // run_once with its phases timed (runtime_options::metrics).
  void run_once_timed();
  // Whether this hot-path iteration times its phases (1 in phase_sample_every, at random).
  bool sample_phases() noexcept;
  void run_ready();
  // True when this iteration may leave the kernel alone (work is ready or completions are set
  // aside, the kernel holds nothing for us, and the last poll is recent enough).
  bool skip_kernel() noexcept;
  // Timed: sets wait_cycles_ when time_wait_ or the wait could block, and then
  // wait_blocking_ too when it could block.
  void wait_and_reap();
  // Dispatches the set-aside completions (and those the driver adds meanwhile go to the next).
  // Returns whether there were any.
  bool dispatch_set_aside_batch() noexcept;
  void cancel_and_wait(io_completion& op, bool (*in_flight)(const void*) noexcept, const void* state, bool all);
  void dispatch(const completion& c) noexcept;
  // Dispatches the completions for user_data `id` that were taken from the ring but not yet
  // dispatched (this iteration's reaped batch, or set aside).
  void dispatch_set_aside(std::uint64_t id) noexcept;
  void arm_wake();
  static void on_wake(io_completion& op, int res, unsigned flags) noexcept;
  void drain_inbox();

  friend struct loop_registry;  // metrics.cpp: snapshots of every loop, from any thread

  unsigned core_;
  const std::atomic<event_loop*>* peers_ = nullptr;
  unsigned peer_count_ = 0;
  unsigned ready_budget_;
  resolver_options resolver_;
  live_metrics metrics_;  // before what counts into it (time_, driver_)
  time_driver time_;  // the clock, the timer queue, the expired batch, the wait bound
  ready_queue ready_;
  std::vector<completion> deferred_;  // completions set aside, dispatched first at the next reap
  std::vector<completion> reaped_;
  std::unique_ptr<io_driver> driver_;  // after what it refers to (metrics_, deferred_)
  // Phase timing (runtime_options::metrics): cycle counts, converted with q32_.
  bool timed_;
  std::uint64_t q32_ = 0;
  // The cycle counter when the last timed iteration ended (or run_until began): the next
  // iteration's start, so a hot-path iteration reads the counter once (a read is not free next
  // to the loop's cheapest iteration).
  std::uint64_t last_cycles_ = 0;
  // Hot-path iterations time their phases 1 in this many (see run_once_timed).
  static constexpr std::uint64_t phase_sample_every = 16;
  std::uint64_t sample_state_ = 0x9e3779b97f4a7c15;  // xorshift64, never 0
  bool time_wait_ = false;          // this iteration times its kernel wait (for the phases)
  std::uint64_t wait_cycles_ = 0;   // this iteration's kernel wait
  std::uint64_t wait_blocking_ = 0; // ... when it could block (excluded from its duration)
  stall_detector stalls_;
  clock::time_point next_publish_{};  // the loop publishes its gauges at least this often:
  static constexpr clock::duration publish_interval = std::chrono::milliseconds(10);
  bool stop_requested_ = false;
  bool shut_down_ = false;
  bool nudged_ = false;
  // The kernel is polled at least every kernel_poll_rounds iterations and kernel_poll_interval
  // of loop time while work is ready (tokio polls its driver every 61 tasks).
  static constexpr unsigned kernel_poll_rounds = 61;
  static constexpr clock::duration kernel_poll_interval = std::chrono::microseconds(50);
  unsigned rounds_since_kernel_ = 0;
  bool kernel_skipped_ = false;  // by the last iteration: it did not block, time barely moved
  clock::time_point last_kernel_{};  // or after_the_wait: when the next tick reads the clock
  static constexpr clock::time_point after_the_wait = clock::time_point::max();
  intrusive_list<spawned_link> spawned_;
  intrusive_list<shutdown_hook> hooks_;

  int wake_fd_ = -1;
  wake_op wake_;
  io_request wake_read_;
  // Messages from other threads: a lock-free stack (pushed by any thread, taken whole by this
  // one and delivered in arrival order).
  // On its own cache line: senders write it, the loop reads it every iteration; the flags
  // below change only around sleeps and wake-ups.
  alignas(64) std::atomic<remote_message*> inbox_{nullptr};
  alignas(64) std::atomic<bool> wake_pending_{false};
  // True while the loop blocks (or is about to) in io_uring_enter: senders wake it only then.
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> remote_stop_{false};
  // After the inbox: its message may sit there until the destructor discards it.
  wake_hub hub_{*this};
};

}  // namespace cogwheel::detail
