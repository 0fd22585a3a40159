// The machinery shared by channel, semaphore and event: a waiter node that lives in the awaiting
// frame, a FIFO of them guarded by the primitive's lock, and the per-loop wake hub through which
// a waiter on another core (or woken from a thread that is no core) is resumed.
//
// A wait, from the waiter's side (its home is the loop whose thread started it):
//   idle -> waiting       start(): linked into the primitive's list, under its lock
//   waiting -> handed     a waker (any thread, under the primitive's lock) unlinks it and gives
//                         it what it waited for (a permit count, a reserved item or slot, or
//                         a refusal); the waiter is then queued to run on its home loop: on the
//                         ready queue directly when the waker runs on that loop, else on that
//                         loop's wake hub (one inbox message per burst)
//   waiting -> handed     cancel() (home thread): unlinked, outcome operation_canceled
//   handed -> done        resumed on its home loop
// A waiter destroyed while handed (its frame went away between wake-up and resumption) gives
// what it was handed back to the primitive (give_back): nothing is lost, nothing taken twice.
//
// Locks: each primitive has one spin_lock held for O(1) pointer work (never across a resume or
// an allocation), and each hub one. Order: primitive lock, then hub lock.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/detail/ready_queue.hpp>

namespace cogwheel::detail {

// A test-and-test-and-set lock for critical sections of a few pointer writes. Not std::mutex:
// uncontended, both are one atomic exchange, but the sections here are so short that a waiter
// is better off spinning than sleeping in a futex; after a burst of spins it yields the CPU, so
// a holder preempted on an oversubscribed machine is not starved.
class spin_lock {
 public:
  void lock() noexcept {
    for (;;) {
      if (!held_.exchange(true, std::memory_order_acquire)) return;
      unsigned spins = 0;
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        } else {
          yield_thread();
          spins = 0;
        }
      }
    }
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  static void yield_thread() noexcept;
  std::atomic<bool> held_{false};
};

// RAII for spin_lock.
class spin_guard {
 public:
  explicit spin_guard(spin_lock& l) noexcept : lock_(l) { lock_.lock(); }
  spin_guard(const spin_guard&) = delete;
  spin_guard& operator=(const spin_guard&) = delete;
  ~spin_guard() { lock_.unlock(); }

 private:
  spin_lock& lock_;
};

class wake_hub;

// One wait, in the awaiting frame. Fields other than `ready` are guarded by the primitive's
// lock while the waiter is linked in its list; `hub_link` by the hub's lock.
struct waiter {
  enum class phase : std::uint8_t { idle, waiting, handed, done };
  enum class outcome : std::uint8_t { granted, refused, canceled };

  waiter* prev = nullptr;  // in the primitive's list
  waiter* next = nullptr;
  waiter* hub_next = nullptr;  // in the home loop's wake hub
  event_loop* home = nullptr;
  ready_node ready;            // on the home loop's ready queue once handed
  continuation resume;         // what the ready node runs (the operation's own callback)
  std::size_t amount = 0;      // permits wanted (semaphore)
  phase state = phase::idle;
  outcome result = outcome::granted;
  bool in_hub = false;  // guarded by the home hub's lock
};

// A FIFO of waiters. Not thread-safe: guarded by its primitive's lock.
class wait_list {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  waiter* front() const noexcept { return head_; }
  void push_back(waiter& w) noexcept {
    w.next = nullptr;
    w.prev = tail_;
    if (tail_ != nullptr)
      tail_->next = &w;
    else
      head_ = &w;
    tail_ = &w;
  }
  void remove(waiter& w) noexcept {
    if (w.prev != nullptr)
      w.prev->next = w.next;
    else
      head_ = w.next;
    if (w.next != nullptr)
      w.next->prev = w.prev;
    else
      tail_ = w.prev;
    w.prev = w.next = nullptr;
  }
  waiter& pop_front() noexcept {
    waiter& w = *head_;
    remove(w);
    return w;
  }

 private:
  waiter* head_ = nullptr;
  waiter* tail_ = nullptr;
};

// Per loop (a member of it, so it lives as long as any message posted to it): waiters of this
// loop woken by other threads. Wakers push under the hub's lock and post the hub's one inbox
// message only when it is not already in flight, so a burst of wake-ups for this loop costs
// one message (and, when the loop sleeps, one eventfd write). Delivered on the loop's thread:
// every waiter queued is moved to the ready queue.
class wake_hub : private remote_message {
 public:
  explicit wake_hub(event_loop& loop) noexcept : loop_(&loop) {
    deliver = &wake_hub::on_deliver;
    discard = &wake_hub::on_discard;
  }
  wake_hub(const wake_hub&) = delete;
  wake_hub& operator=(const wake_hub&) = delete;

  // Any thread, primitive lock held: w (handed, home is this hub's loop) is to resume there.
  void push(waiter& w) noexcept {
    assert(!w.in_hub);
    bool post = false;
    {
      spin_guard g(lock_);
      w.hub_next = nullptr;
      if (tail_ != nullptr)
        tail_->hub_next = &w;
      else
        head_ = &w;
      tail_ = &w;
      w.in_hub = true;
      post = !posted_;
      posted_ = true;
    }
    if (post) post_remote(*loop_, *this);
  }
  // Home thread, primitive lock held: takes w out if still queued here (its frame is going
  // away). Singly linked: the hub holds at most a burst.
  void remove(waiter& w) noexcept {
    spin_guard g(lock_);
    if (!w.in_hub) return;
    waiter* prev = nullptr;
    for (waiter* p = head_; p != nullptr; prev = p, p = p->hub_next) {
      if (p != &w) continue;
      (prev != nullptr ? prev->hub_next : head_) = w.hub_next;
      if (tail_ == &w) tail_ = prev;
      break;
    }
    w.in_hub = false;
  }

 private:
  static void on_deliver(remote_message& m) noexcept;
  static void on_discard(remote_message& m) noexcept;

  event_loop* loop_;
  spin_lock lock_;
  waiter* head_ = nullptr;
  waiter* tail_ = nullptr;
  bool posted_ = false;
};

// The calling thread's loop's hub. Precondition: on a loop thread.
wake_hub& hub_of(event_loop& loop) noexcept;

// Primitive lock held, w linked in nowhere any more (its list removed it): w is handed with
// `r` and queued to run on its home loop.
inline void hand(waiter& w, waiter::outcome r) noexcept {
  assert(w.state == waiter::phase::waiting && !w.ready.queued() && !w.in_hub);
  w.result = r;
  w.state = waiter::phase::handed;
  if (current_loop_if_any() == w.home)
    post(*w.home, w.ready, w.resume);
  else
    hub_of(*w.home).push(w);
}

// Home thread, primitive lock held, w handed and not yet resumed: takes it off whatever queue
// would resume it (its frame is going away). The caller then gives back what it was handed.
inline void unqueue(waiter& w) noexcept {
  hub_of(*w.home).remove(w);
  w.ready.unlink();
  w.state = waiter::phase::done;
}

// Home thread, primitive lock held, w still waiting in `list`: the wait is cut (cancel()); w
// resumes at a coming iteration with outcome canceled.
inline void cancel_waiting(wait_list& list, waiter& w) noexcept {
  list.remove(w);
  hand(w, waiter::outcome::canceled);
}

// Home thread, before linking w: where it lives and what resumes it.
inline void prepare_wait(waiter& w, continuation on_resume) noexcept {
  w.home = &current_loop();
  w.resume = on_resume;
  w.state = waiter::phase::waiting;
}

}  // namespace cogwheel::detail
