// libevent: timer events (evtimer_new, i.e. event_new with no descriptor) on one event_base,
// used through the public API: event_add with a relative timeval to arm or re-arm, event_del to
// stop. Re-adding a pending event moves it in place, so reschedule is one call.
//
// libevent keeps timeouts in a binary min-heap of event pointers; each event knows its heap index
// (O(log n) delete), but every comparison reads the deadline from the event itself, a pointer
// hop away. libevent also has "common timeouts" (a sorted queue per duration, O(1) for timeouts
// that all have the same length, such as a fixed idle timeout); the deadlines here are random,
// as in timer_bench, so they are not used.
//
// libevent's time: inside its loop, event_add uses the loop's cached time; outside it (as here,
// the workloads do not run the loop), event_add reads the monotonic clock each call (a vDSO
// clock_gettime). Real time therefore moves under the pending timers, so they sit an hour ahead,
// and expire arms deadlines over a short real window (arm/run_until_idle).
#pragma once

#include <event2/event.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "workload.hpp"

namespace peers {

class libevent_timers {
 public:
  static constexpr const char* name = "libevent";
  static constexpr bool fake_clock = false;

  // n idle timer events on their own event_base.
  explicit libevent_timers(std::size_t n) : count_(n + 1), timers_(new slot[n + 1]) {
    base_ = event_base_new();
    if (base_ == nullptr) fail("event_base_new");
    for (std::size_t i = 0; i < count_; ++i) {
      timers_[i].ev = evtimer_new(base_, on_fire, this);
      if (timers_[i].ev == nullptr) fail("evtimer_new");
    }
  }
  libevent_timers(const libevent_timers&) = delete;
  libevent_timers& operator=(const libevent_timers&) = delete;
  ~libevent_timers() {
    for (std::size_t i = 0; i < count_; ++i) event_free(timers_[i].ev);
    event_base_free(base_);
  }

  // Timer i (idle) due delay after now (plus the hour that keeps pending timers from firing).
  void schedule(std::size_t i, milliseconds delay) {
    slot& s = timers_[i];
    s.deadline_ms = far_ahead_ms + static_cast<std::uint64_t>(delay.count());
    add(s.ev, s.deadline_ms);
  }

  void cancel(std::size_t i) { event_del(timers_[i].ev); }

  // Pending timer i's deadline moves bump later. event_add takes a timeout relative to the time
  // of the call, so the deadline kept here is relative too; it drifts later with the real time
  // that passed since it was set, so the new deadline is always later than the old one.
  void push_later(std::size_t i, milliseconds bump) {
    slot& s = timers_[i];
    s.deadline_ms += static_cast<std::uint64_t>(bump.count());
    add(s.ev, s.deadline_ms);
  }

  void schedule_spare(milliseconds delay) { schedule(count_ - 1, delay); }
  void cancel_spare() { cancel(count_ - 1); }
  void end_batch() noexcept {}

  // Whether the n pending timers are all still pending (the spare is idle between operations).
  bool holds(std::size_t n) const noexcept {
    return static_cast<std::size_t>(event_base_get_num_events(base_, EVENT_BASE_COUNT_ADDED)) == n;
  }

  // expire, on the real clock: begin_arming(lead), then arm(i, at): timer i due `lead + at` after
  // the call (libevent timeouts are relative to when they are added). run_until_idle() runs the
  // loop until every armed timer has fired and returns how many did.
  void begin_arming(std::chrono::steady_clock::duration lead) {
    lead_ms_ = static_cast<std::uint64_t>(std::chrono::ceil<milliseconds>(lead).count());
  }
  void arm(std::size_t i, milliseconds at) {
    add(timers_[i].ev, lead_ms_ + static_cast<std::uint64_t>(at.count()));
  }
  std::size_t run_until_idle() {
    const std::size_t before = fired_;
    event_base_dispatch(base_);  // returns once no event is pending
    return fired_ - before;
  }

 private:
  static constexpr std::uint64_t far_ahead_ms = 3'600'000;

  struct slot {
    event* ev = nullptr;
    std::uint64_t deadline_ms = 0;  // relative to when it was added (see push_later)
  };

  static void add(event* ev, std::uint64_t ms) {
    const timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
    event_add(ev, &tv);
  }
  static void on_fire(evutil_socket_t, short, void* self) { ++static_cast<libevent_timers*>(self)->fired_; }

  [[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "%s failed\n", what);
    std::abort();
  }

  event_base* base_ = nullptr;
  std::size_t count_;              // n timers and the spare (last)
  std::unique_ptr<slot[]> timers_;
  std::uint64_t lead_ms_ = 0;
  std::size_t fired_ = 0;
};

}  // namespace peers
