// asio: standalone Asio's asio::steady_timer, used the way Asio programs use it: expires_after()
// then async_wait(handler); cancel() to stop it. One io_context (concurrency hint 1, the hint for
// a single-threaded program), driven from the benchmark thread.
//
// What a timer operation costs in Asio, and so what these rows include:
// - async_wait allocates a wait operation for the handler, files the timer in the reactor's
//   binary heap (one per io_context and clock; the timer knows its heap index) under the
//   reactor's mutex, and re-arms the reactor's timerfd when the new timer is the earliest.
// - cancel() takes the timer out of the heap and queues its handler, which then runs with
//   operation_aborted on the next poll. Asio has no way to move a pending deadline: the waiter is
//   cancelled and a new async_wait is started, so reschedule costs what churn does.
// - expires_after() reads steady_clock (a vDSO call); that is the API timeouts are written with.
// The aborted handlers are run by poll() once per batch of operations (end_batch), which also
// calls epoll_wait(0) two or three times: amortized over the batch, a few ns per operation.
// Operations are started from outside io_context::run(), so the wait operations come from
// operator new rather than Asio's per-thread recycling cache; that cache holds two blocks, and
// with a batch of waits cancelled before any of their handlers runs it could serve two at most.
//
// Asio reads the real clock itself (in the reactor, which sleeps on a timerfd), so it cannot be
// driven by the fake clock of timer_bench: pending timers sit an hour ahead so none fires while
// the process runs, and expire arms deadlines over a short real window (arm/run_until_idle).
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "workload.hpp"

namespace peers {

class asio_timers {
 public:
  static constexpr const char* name = "asio";
  static constexpr bool fake_clock = false;
  using clock = std::chrono::steady_clock;

  // n idle timers on their own io_context.
  explicit asio_timers(std::size_t n) {
    timers_.reserve(n + 1);
    for (std::size_t i = 0; i <= n; ++i) timers_.emplace_back(ctx_);
  }
  asio_timers(const asio_timers&) = delete;
  asio_timers& operator=(const asio_timers&) = delete;

  // Timer i (idle) due delay after now (plus the hour that keeps pending timers from firing).
  void schedule(std::size_t i, milliseconds delay) {
    asio::steady_timer& t = timers_[i];
    t.expires_after(far_ahead + delay);
    t.async_wait(on_wait{this});
  }

  void cancel(std::size_t i) { timers_[i].cancel(); }

  // Pending timer i's deadline moves bump later: a new expiry cancels the waiter, so wait again.
  void push_later(std::size_t i, milliseconds bump) {
    asio::steady_timer& t = timers_[i];
    t.expires_at(t.expiry() + bump);
    t.async_wait(on_wait{this});
  }

  void schedule_spare(milliseconds delay) { schedule(timers_.size() - 1, delay); }
  void cancel_spare() { cancel(timers_.size() - 1); }

  // Runs the handlers of the cancelled waits (with operation_aborted), freeing their operations.
  void end_batch() { ctx_.poll(); }

  // Whether the n pending timers are all still pending. Asio does not count its pending timers;
  // that none of them fired is what can be checked.
  bool holds(std::size_t) const noexcept { return fired_ == 0; }

  // expire, on the real clock: begin_arming(lead), then arm(i, at) for each timer: due at
  // `lead + at` after begin_arming. run_until_idle() runs the io_context until every armed
  // timer has fired and returns how many did.
  void begin_arming(clock::duration lead) { base_ = clock::now() + lead; }
  void arm(std::size_t i, milliseconds at) {
    asio::steady_timer& t = timers_[i];
    t.expires_at(base_ + at);
    t.async_wait(on_wait{this});
  }
  std::size_t run_until_idle() {
    const std::size_t before = fired_;
    ctx_.restart();
    ctx_.run();
    return fired_ - before;
  }

 private:
  static constexpr std::chrono::hours far_ahead{1};

  // The completion handler: as small as a handler gets (one pointer), so the wait operation Asio
  // allocates is the smallest it can be.
  struct on_wait {
    asio_timers* self;
    void operator()(const asio::error_code& ec) const noexcept {
      if (ec)
        ++self->aborted_;
      else
        ++self->fired_;
    }
  };

  asio::io_context ctx_{1};
  std::vector<asio::steady_timer> timers_;  // n timers and the spare (last); after ctx_
  clock::time_point base_{};
  std::size_t fired_ = 0;
  std::size_t aborted_ = 0;
};

}  // namespace peers
