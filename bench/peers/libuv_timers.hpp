// libuv: uv_timer_t handles on one uv_loop_t, used through the public API: uv_timer_start,
// uv_timer_stop, and uv_timer_again with uv_timer_set_repeat to push a deadline later (libuv's
// documented way to restart an idle timer; inside it is stop + start, as uv_timer_start on an
// active timer would be).
//
// libuv keeps timers in a binary min-heap of pointers: the heap node is inside the handle, and
// insert and remove walk from the root to the last position (log n pointer hops, each a likely
// cache miss at a million timers), then sift. Nothing is allocated per operation.
//
// libuv's time is the loop's cached time (uv_now), which only moves in uv_update_time and
// uv_run. The pending-timer workloads never run the loop, so that time stands still for them just
// like timer_bench's fake clock. expire must run the loop, and uv_run reads the real clock, so it
// arms deadlines over a short real window (arm/run_until_idle).
#pragma once

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "workload.hpp"

namespace peers {

class libuv_timers {
 public:
  static constexpr const char* name = "libuv";
  static constexpr bool fake_clock = false;

  // n idle timers on their own loop.
  explicit libuv_timers(std::size_t n) : count_(n + 1), timers_(new uv_timer_t[n + 1]) {
    check(uv_loop_init(&loop_), "uv_loop_init");
    loop_.data = this;
    for (std::size_t i = 0; i < count_; ++i) check(uv_timer_init(&loop_, &timers_[i]), "uv_timer_init");
  }
  libuv_timers(const libuv_timers&) = delete;
  libuv_timers& operator=(const libuv_timers&) = delete;
  // Handles must be closed, and the close callbacks run, before the loop may be closed.
  ~libuv_timers() {
    for (std::size_t i = 0; i < count_; ++i) uv_close(reinterpret_cast<uv_handle_t*>(&timers_[i]), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
  }

  // Timer i (idle) due delay after the loop's time.
  void schedule(std::size_t i, milliseconds delay) {
    uv_timer_start(&timers_[i], on_fire, static_cast<std::uint64_t>(delay.count()), 0);
  }

  void cancel(std::size_t i) { uv_timer_stop(&timers_[i]); }

  // Pending timer i's deadline moves bump later: repeat = time left + bump, then restart.
  void push_later(std::size_t i, milliseconds bump) {
    uv_timer_t* t = &timers_[i];
    uv_timer_set_repeat(t, uv_timer_get_due_in(t) + static_cast<std::uint64_t>(bump.count()));
    uv_timer_again(t);
  }

  void schedule_spare(milliseconds delay) { schedule(count_ - 1, delay); }
  void cancel_spare() { cancel(count_ - 1); }
  void end_batch() noexcept {}

  // Whether the n pending timers are all still pending (the spare is idle between operations).
  bool holds(std::size_t n) const noexcept { return loop_.active_handles == n; }

  // How long the loop would sleep: from the earliest timer and the loop's time, in ms.
  int next_deadline() const noexcept { return uv_backend_timeout(&loop_); }

  // expire, on the real clock: begin_arming(lead) brings the loop's time up to date, then
  // arm(i, at) makes timer i due `lead + at` after it. run_until_idle() runs the loop until every
  // armed timer has fired and returns how many did.
  void begin_arming(std::chrono::steady_clock::duration lead) {
    uv_update_time(&loop_);
    lead_ms_ = static_cast<std::uint64_t>(std::chrono::ceil<milliseconds>(lead).count());
  }
  void arm(std::size_t i, milliseconds at) {
    uv_timer_start(&timers_[i], on_fire, lead_ms_ + static_cast<std::uint64_t>(at.count()), 0);
  }
  std::size_t run_until_idle() {
    const std::size_t before = fired_;
    uv_run(&loop_, UV_RUN_DEFAULT);
    return fired_ - before;
  }

 private:
  static void on_fire(uv_timer_t* t) { ++static_cast<libuv_timers*>(t->loop->data)->fired_; }

  static void check(int rc, const char* what) {
    if (rc == 0) return;
    std::fprintf(stderr, "%s: %s\n", what, uv_strerror(rc));
    std::abort();
  }

  uv_loop_t loop_{};
  std::size_t count_;                     // n timers and the spare (last)
  std::unique_ptr<uv_timer_t[]> timers_;
  std::uint64_t lead_ms_ = 0;
  std::size_t fired_ = 0;
};

}  // namespace peers
