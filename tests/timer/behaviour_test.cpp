// Named edge behaviours of the timer queues, each run on timer_wheel, timer_heap and on
// timer_queue holding either (so timer_queue's dispatch runs the same checks). The contract:
// docs/design.md and the comments of wheel.hpp, heap.hpp and node.hpp.
#include <cogwheel/timer/heap.hpp>
#include <cogwheel/timer/node.hpp>
#include <cogwheel/timer/queue.hpp>
#include <cogwheel/timer/ticks.hpp>
#include <cogwheel/timer/wheel.hpp>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "probe.hpp"

namespace {

using namespace cogwheel::timer;
using namespace std::chrono_literals;
using cogwheel::timer_test::probe;

constexpr clock::time_point t0{1000h};  // a typical steady_clock reading: days after boot
constexpr clock::time_point tp_max = clock::time_point::max();
constexpr clock::time_point tp_min = clock::time_point::min();
constexpr auto year = std::chrono::hours(24 * 365);

// timer_queue fixed to one kind, constructible like the wheel and the heap.
template <timer_kind Kind>
struct queue_of : timer_queue {
  explicit queue_of(clock::duration tick = 1ms, clock::time_point start = {})
      : timer_queue(Kind, tick, start) {}
};

template <class Queue>
class timer_behaviour : public ::testing::Test {};

using queue_types =
    ::testing::Types<timer_wheel, timer_heap, queue_of<timer_kind::wheel>, queue_of<timer_kind::heap>>;

struct queue_type_names {
  template <class T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, timer_wheel>) return "wheel";
    else if constexpr (std::is_same_v<T, timer_heap>) return "heap";
    else if constexpr (std::is_same_v<T, queue_of<timer_kind::wheel>>) return "queue_wheel";
    else return "queue_heap";
  }
};

TYPED_TEST_SUITE(timer_behaviour, queue_types, queue_type_names);

TYPED_TEST(timer_behaviour, fires_no_earlier_than_deadline) {
  for (const clock::duration tick : {clock::duration(1ms), clock::duration(100us)}) {
    TypeParam q(tick, t0);
    std::array<probe, 40> nodes;
    std::array<clock::time_point, 40> deadline;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      deadline[i] = t0 + static_cast<int>(i) * 37us + static_cast<int>(i % 3) * 1ns;  // on and off tick boundaries
      q.schedule(nodes[i], deadline[i]);
    }
    for (clock::time_point now = t0; now < t0 + 3ms; now += 7us) {
      q.advance(now);
      for (std::size_t i = 0; i < nodes.size(); ++i)
        if (nodes[i].fired) {
          EXPECT_LE(deadline[i], now) << "node " << i << ", tick " << tick.count();
        }
    }
    for (const probe& n : nodes) EXPECT_EQ(n.fired, 1);
  }
}

TYPED_TEST(timer_behaviour, fires_at_first_advance_at_or_after_deadline) {
  TypeParam q(1ms, t0);
  probe on_tick, off_tick;
  const clock::time_point d = t0 + 5ms;
  q.schedule(on_tick, d);
  q.schedule(off_tick, d + 1ns);  // rounds up to the next tick: d + 1ms

  EXPECT_EQ(q.advance(d - 1ns), 0u);
  EXPECT_EQ(q.advance(d), 1u);
  EXPECT_EQ(on_tick.fired, 1);
  EXPECT_EQ(q.advance(d + 1ms - 1ns), 0u);  // at or after off_tick's deadline, within its tick
  EXPECT_EQ(q.advance(d + 1ms), 1u);        // ...so at most one tick late
  EXPECT_EQ(off_tick.fired, 1);
}

TYPED_TEST(timer_behaviour, cancel_after_fire_is_noop) {
  TypeParam q(1ms, t0);
  probe n;
  q.schedule(n, t0 + 1ms);
  ASSERT_EQ(q.advance(t0 + 1ms), 1u);
  EXPECT_FALSE(n.scheduled());
  EXPECT_FALSE(q.cancel(n));
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.advance(t0 + 1h), 0u);
  EXPECT_EQ(n.fired, 1);
}

TYPED_TEST(timer_behaviour, double_cancel_returns_false_the_second_time) {
  TypeParam q(1ms, t0);
  probe n, never;
  q.schedule(n, t0 + 10ms);
  EXPECT_TRUE(q.cancel(n));
  EXPECT_FALSE(q.cancel(n));
  EXPECT_FALSE(q.cancel(never));
  EXPECT_EQ(q.size(), 0u);
  EXPECT_FALSE(q.next_deadline().has_value());
  EXPECT_EQ(q.advance(t0 + 1s), 0u);
  EXPECT_EQ(n.fired, 0);
}

TYPED_TEST(timer_behaviour, cancel_of_a_due_timer_from_an_earlier_callback_in_the_same_batch_prevents_it_firing) {
  // Pairs on the same tick and on different wheel levels; the firing order within a batch is
  // unspecified, so each cancels the other and exactly one may fire.
  for (const clock::duration second : {clock::duration(1ms), clock::duration(2ms), clock::duration(5s)}) {
    TypeParam q(1ms, t0);
    probe a, b;
    bool a_cancelled_b = false, b_cancelled_a = false;
    a.action = [&](probe&) { a_cancelled_b = q.cancel(b); };
    b.action = [&](probe&) { b_cancelled_a = q.cancel(a); };
    q.schedule(a, t0 + 1ms);
    q.schedule(b, t0 + second);
    EXPECT_EQ(q.advance(t0 + 10s), 1u);
    EXPECT_EQ(a.fired + b.fired, 1);
    EXPECT_EQ(a_cancelled_b, a.fired == 1);
    EXPECT_EQ(b_cancelled_a, b.fired == 1);
    EXPECT_FALSE(a.scheduled());
    EXPECT_FALSE(b.scheduled());
    EXPECT_EQ(q.size(), 0u);
    EXPECT_EQ(q.advance(t0 + 20s), 0u);
  }
}

TYPED_TEST(timer_behaviour, destroying_a_due_node_from_an_earlier_callback_is_safe) {
  for (const clock::duration second : {clock::duration(1ms), clock::duration(5s)}) {
    TypeParam q(1ms, t0);
    std::optional<probe> a, b;
    a.emplace();
    b.emplace();
    int fired = 0;
    a->action = [&](probe&) {
      ++fired;
      if (b) {
        q.cancel(*b);
        b.reset();
      }
    };
    b->action = [&](probe&) {
      ++fired;
      if (a) {
        q.cancel(*a);
        a.reset();
      }
    };
    q.schedule(*a, t0 + 1ms);
    q.schedule(*b, t0 + second);
    EXPECT_EQ(q.advance(t0 + 10s), 1u);
    EXPECT_EQ(fired, 1);
    EXPECT_NE(a.has_value(), b.has_value());
    EXPECT_EQ(q.size(), 0u);
  }
}

std::optional<timer_node>* self_destroying = nullptr;

TYPED_TEST(timer_behaviour, destroying_a_node_from_its_own_callback_is_safe) {
  TypeParam q(1ms, t0);
  std::optional<timer_node> n;
  n.emplace([](timer_node&) noexcept { self_destroying->reset(); });
  self_destroying = &n;
  probe later;
  q.schedule(*n, t0 + 1ms);
  q.schedule(later, t0 + 1ms);
  EXPECT_EQ(q.advance(t0 + 1ms), 2u);
  EXPECT_FALSE(n.has_value());
  EXPECT_EQ(later.fired, 1);
}

TYPED_TEST(timer_behaviour, schedule_from_callback_with_past_deadline_fires_at_next_advance_not_this_one) {
  // wheel.hpp: "Timers scheduled by those callbacks with a deadline at or before `now` fire at
  // the next advance, not this one."
  TypeParam q(1ms, t0);
  probe a, past, at_now, self;
  a.action = [&](probe&) {
    q.schedule(past, t0 - 1s);
    q.schedule(at_now, t0 + 5ms);
    q.reschedule(self, t0);
  };
  self.action = [&](probe& s) {
    if (s.fired == 1) q.schedule(s, t0 + 5ms);  // re-arms itself once, at the advance's time
  };
  q.schedule(a, t0 + 5ms);
  EXPECT_EQ(q.advance(t0 + 5ms), 1u);
  EXPECT_EQ(past.fired + at_now.fired + self.fired, 0);
  EXPECT_EQ(q.size(), 3u);
  ASSERT_TRUE(q.next_deadline().has_value());
  EXPECT_LE(*q.next_deadline(), q.now());

  EXPECT_EQ(q.advance(t0 + 5ms), 3u);  // the same time: still the next advance
  EXPECT_EQ(past.fired, 1);
  EXPECT_EQ(at_now.fired, 1);
  EXPECT_EQ(self.fired, 1);
  EXPECT_EQ(q.size(), 1u);  // self, re-armed for t0 + 5ms from its callback
  EXPECT_EQ(q.advance(t0 + 5ms), 1u);
  EXPECT_EQ(self.fired, 2);
  EXPECT_EQ(q.size(), 0u);
}

TYPED_TEST(timer_behaviour, reschedule_from_callback) {
  TypeParam q(1ms, t0);
  clock::time_point now = t0;
  probe periodic, later, earlier, trigger;
  std::vector<clock::duration> periodic_at, later_at, earlier_at;
  periodic.action = [&](probe& p) {
    periodic_at.push_back(now - t0);
    q.reschedule(p, now + 5ms);  // idle inside its callback: reschedule schedules it
  };
  later.action = [&](probe&) { later_at.push_back(now - t0); };
  earlier.action = [&](probe&) { earlier_at.push_back(now - t0); };
  trigger.action = [&](probe&) {
    q.reschedule(later, t0 + 20ms);   // was t0 + 10ms
    q.reschedule(earlier, t0 + 3ms);  // was an hour away
  };
  q.schedule(periodic, t0 + 5ms);
  q.schedule(later, t0 + 10ms);
  q.schedule(earlier, t0 + 1h);
  q.schedule(trigger, t0 + 1ms);
  for (now = t0; now <= t0 + 30ms; now += 1ms) q.advance(now);
  EXPECT_EQ(periodic_at, (std::vector<clock::duration>{5ms, 10ms, 15ms, 20ms, 25ms, 30ms}));
  EXPECT_EQ(later_at, std::vector<clock::duration>{20ms});
  EXPECT_EQ(earlier_at, std::vector<clock::duration>{3ms});
  q.advance(t0 + 2h);
  EXPECT_EQ(earlier.fired, 1);
  EXPECT_TRUE(q.cancel(periodic));
}

TYPED_TEST(timer_behaviour, now_going_backwards_is_noop) {
  TypeParam q(1ms, t0);
  probe overdue, pending;
  q.advance(t0 + 100ms);
  q.schedule(overdue, t0 + 90ms);
  q.schedule(pending, t0 + 120ms);
  EXPECT_EQ(q.advance(t0 + 50ms), 0u);
  EXPECT_EQ(q.advance(t0 + 99ms), 0u);
  EXPECT_EQ(q.advance(tp_min), 0u);
  EXPECT_EQ(q.now(), t0 + 100ms);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_TRUE(overdue.scheduled());
  EXPECT_EQ(q.advance(t0 + 100ms + 999us), 1u);  // the same tick is not backwards
  EXPECT_EQ(overdue.fired, 1);
  EXPECT_EQ(q.advance(t0 + 119ms), 0u);
  EXPECT_EQ(q.advance(t0 + 1ms), 0u);
  EXPECT_EQ(q.now(), t0 + 119ms);
  EXPECT_EQ(q.advance(t0 + 120ms), 1u);
  EXPECT_EQ(pending.fired, 1);
}

TYPED_TEST(timer_behaviour, zero_duration_fires_at_next_advance) {
  TypeParam q(1ms, t0 + 250us);  // the queue's time is t0: rounded down to a tick
  ASSERT_EQ(q.now(), t0);
  probe n, m;
  q.schedule(n, q.now());
  EXPECT_EQ(q.advance(q.now()), 1u);
  EXPECT_EQ(n.fired, 1);
  q.advance(t0 + 7ms);
  q.schedule(m, q.now());
  EXPECT_EQ(q.advance(t0 + 7ms), 1u);
  EXPECT_EQ(m.fired, 1);
}

TYPED_TEST(timer_behaviour, deadline_at_time_point_max_is_kept_and_reported) {
  for (const clock::duration tick : {clock::duration(1ms), clock::duration(100us), clock::duration(1ns)}) {
    const tick_scale scale(tick);
    TypeParam q(tick, t0);
    probe n;
    q.schedule(n, tp_max);
    ASSERT_TRUE(q.next_deadline().has_value());
    EXPECT_LE(*q.next_deadline(), tp_max);
    for (clock::time_point now = t0; now < tp_max - 60 * year; now += 50 * year) EXPECT_EQ(q.advance(now), 0u);
    EXPECT_EQ(q.advance(tp_max - tick), 0u);
    EXPECT_EQ(q.size(), 1u);
    EXPECT_TRUE(n.scheduled());
    EXPECT_EQ(q.next_deadline(), tp_max) << "tick " << tick.count();
    // The last time point is the start of a tick only if the tick divides it: then it fires.
    const bool reachable = scale.now_tick(tp_max) >= scale.deadline_tick(tp_max);
    EXPECT_EQ(q.advance(tp_max), reachable ? 1u : 0u) << "tick " << tick.count();
    EXPECT_EQ(n.fired, reachable ? 1 : 0);
    EXPECT_EQ(q.cancel(n), !reachable);
  }
}

TYPED_TEST(timer_behaviour, deadline_before_clock_epoch_fires_at_next_advance) {
  for (const clock::time_point start : {clock::time_point{}, t0}) {
    TypeParam q(1ms, start);
    probe a, b, c;
    q.schedule(a, clock::time_point(-1s));
    q.schedule(b, tp_min);
    q.reschedule(c, clock::time_point(-1ns));
    EXPECT_EQ(q.size(), 3u);
    EXPECT_EQ(q.advance(start), 3u);
    EXPECT_EQ(a.fired + b.fired + c.fired, 3);
  }
}

TYPED_TEST(timer_behaviour, far_deadline_fires_exactly_on_time_after_year_jump) {
  std::uint64_t x = 0x243f6a8885a308d3ull;
  auto random = [&x](std::uint64_t n) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x % n;
  };
  const clock::duration steps[] = {1ns, 999us, 1ms, 64ms, 1s, 1h, 24h, 30 * 24h, year};
  for (const clock::duration tick : {clock::duration(1ms), clock::duration(100us)}) {
    for (const clock::duration distance : {year, 10 * year, 100 * year}) {
      for (int round = 0; round < 20; ++round) {
        const tick_scale scale(tick);
        TypeParam q(tick, t0);
        probe n;
        const clock::time_point deadline = t0 + distance + 7ms + 300us + clock::duration(random(1000));
        const clock::time_point on_time = scale.time_of(scale.deadline_tick(deadline));
        q.schedule(n, deadline);
        clock::time_point now = t0;
        // Mixed small and large steps; close in near the deadline so its tick is hit exactly.
        while (n.fired == 0) {
          const clock::duration left = on_time - now;
          clock::duration step = steps[random(std::size(steps))] * static_cast<int>(1 + random(3));
          if (step > left) step = random(4) == 0 ? left : left / 2 + tick / 2;
          now += step;
          q.advance(now);
          if (now < on_time) {
            ASSERT_EQ(n.fired, 0) << "fired early at now " << (now - t0).count() << " ns";
          }
          if (now >= on_time) {
            ASSERT_EQ(n.fired, 1) << "not fired at now " << (now - t0).count() << " ns, due "
                                  << (on_time - t0).count() << " ns";
          }
        }
        EXPECT_EQ(q.size(), 0u);
      }
    }
  }
}

TYPED_TEST(timer_behaviour, advancing_a_year_over_an_empty_wheel_is_instant) {
  TypeParam q(1ms, t0);
  EXPECT_EQ(q.advance(t0 + year), 0u);
  EXPECT_EQ(q.now(), t0 + year);
  EXPECT_EQ(q.advance(t0 + 100 * year), 0u);
  probe n;
  q.schedule(n, t0 + 100 * year + 1ms);
  EXPECT_EQ(q.next_deadline(), t0 + 100 * year + 1ms);  // exact: one tick away, level 0
  EXPECT_EQ(q.advance(t0 + 100 * year + 1ms), 1u);
}

TYPED_TEST(timer_behaviour, lazy_reschedule_later_fires_at_new_deadline_not_old) {
  // From level 0 to a higher level, within one level, and from a high level to a higher one.
  const std::pair<clock::duration, clock::duration> moves[] = {
      {10ms, 5s}, {10ms, 11ms}, {10ms, 10ms + 500us}, {3s, 4s}, {2h, 400 * 24h}};
  for (const auto& [before, after] : moves) {
    const tick_scale scale(1ms);
    TypeParam q(1ms, t0);
    probe n;
    q.schedule(n, t0 + before);
    q.reschedule(n, t0 + after);
    EXPECT_EQ(n.deadline_tick(), scale.deadline_tick(t0 + after));
    EXPECT_EQ(q.size(), 1u);
    EXPECT_EQ(q.advance(t0 + before), 0u) << before.count();
    EXPECT_EQ(q.advance(t0 + before + 1ms), after <= before + 1ms ? 1u : 0u);
    const clock::time_point due = scale.time_of(scale.deadline_tick(t0 + after));
    if (n.fired == 0) {
      EXPECT_EQ(q.advance(due - 1ns), 0u);
      EXPECT_EQ(q.advance(due), 1u) << before.count() << " -> " << after.count();
    }
    EXPECT_EQ(n.fired, 1);
    EXPECT_EQ(q.size(), 0u);
  }
}

TYPED_TEST(timer_behaviour, reschedule_earlier_fires_at_new_deadline) {
  TypeParam q(1ms, t0);
  probe n, idle;
  q.schedule(n, t0 + 1h);
  q.reschedule(n, t0 + 3ms);
  q.reschedule(idle, t0 + 2ms);  // rescheduling an idle node schedules it
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.advance(t0 + 2ms), 1u);
  EXPECT_EQ(idle.fired, 1);
  EXPECT_EQ(n.fired, 0);
  EXPECT_EQ(q.advance(t0 + 3ms), 1u);
  EXPECT_EQ(n.fired, 1);
  EXPECT_EQ(q.advance(t0 + 2h), 0u);
}

TYPED_TEST(timer_behaviour, size_tracks_pending) {
  TypeParam q(1ms, t0);
  std::array<probe, 100> nodes;
  std::size_t size_in_callback = 0;
  nodes[0].action = [&](probe&) { size_in_callback = q.size(); };
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    q.schedule(nodes[i], t0 + static_cast<int>(i) * 1ms);
    EXPECT_EQ(q.size(), i + 1);
  }
  for (std::size_t i = 90; i < nodes.size(); ++i) q.cancel(nodes[i]);
  EXPECT_EQ(q.size(), 90u);
  q.reschedule(nodes[50], t0 + 1h);
  q.reschedule(nodes[95], t0 + 2h);  // idle: scheduled again
  EXPECT_EQ(q.size(), 91u);
  EXPECT_EQ(q.advance(t0 + 49ms), 50u);  // 0..49
  EXPECT_EQ(size_in_callback, 41u);     // due timers have left the queue when callbacks run
  EXPECT_EQ(q.size(), 41u);
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(q.advance(t0 + 3h), 41u);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(q.empty());
}

TYPED_TEST(timer_behaviour, destructor_of_queue_leaves_nodes_idle) {
  std::array<probe, 6> nodes;
  {
    TypeParam q(1ms, t0);
    q.advance(t0 + 1s);
    q.schedule(nodes[0], t0);           // overdue
    q.schedule(nodes[1], t0 + 1s + 1ms);  // level 0
    q.schedule(nodes[2], t0 + 1h);
    q.schedule(nodes[3], t0 + 3 * year);
    q.schedule(nodes[4], tp_max);
    q.schedule(nodes[5], t0 + 1h);
    q.reschedule(nodes[5], t0 + 2h);  // lazily moved
  }
  for (const probe& n : nodes) {
    EXPECT_FALSE(n.scheduled());
    EXPECT_EQ(n.fired, 0);
  }
  TypeParam again(1ms, t0);  // and they can be scheduled on another queue
  for (probe& n : nodes) again.schedule(n, t0 + 1ms);
  EXPECT_EQ(again.advance(t0 + 1ms), nodes.size());
}

TYPED_TEST(timer_behaviour, nodes_cancelled_then_freed_are_never_touched_again) {
  // The owner of a cancelled node may free it at once: nothing in the queue may read it later,
  // whatever the queue batches internally. Under AddressSanitizer a read of a freed node fails.
  // 1,000 nodes so that internal batches (the wheel's cancel log and staging) fill and flush.
  TypeParam q(1ms, t0);
  std::vector<std::unique_ptr<probe>> nodes;
  for (int i = 0; i < 1000; ++i) {
    nodes.push_back(std::make_unique<probe>());
    q.schedule(*nodes.back(), t0 + std::chrono::milliseconds(1 + (i * 7919) % 60'000));
  }
  q.advance(t0);  // filed into slots on every level in use
  std::vector<std::unique_ptr<probe>> kept;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i % 3 == 0) {
      kept.push_back(std::move(nodes[i]));
      continue;
    }
    EXPECT_TRUE(q.cancel(*nodes[i]));
    nodes[i].reset();
    if (i % 5 == 0) {  // interleave new schedules, filed amid the freed entries
      kept.push_back(std::make_unique<probe>());
      q.schedule(*kept.back(), t0 + std::chrono::milliseconds(1 + (i * 104729) % 60'000));
    }
  }
  EXPECT_EQ(q.size(), kept.size());
  std::size_t fired = 0;
  for (clock::time_point now = t0; !q.empty(); now += 1ms) fired += q.advance(now);
  EXPECT_EQ(fired, kept.size());
  for (const auto& n : kept) EXPECT_EQ(n->fired, 1);
}

TYPED_TEST(timer_behaviour, advancing_to_next_deadline_repeatedly_reaches_each_timer_on_time) {
  // What an event loop does: sleep until next_deadline(), advance, repeat. next_deadline() is
  // never later than the earliest deadline, so no timer is late.
  TypeParam q(1ms, t0);
  std::array<probe, 8> nodes;
  const clock::duration at[] = {3ms, 70ms, 4100ms, 5min, 7h, 13 * 24h, 3 * year, 60 * year};
  clock::time_point now = t0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].action = [&, i](probe&) { EXPECT_EQ(now, t0 + at[i]) << "node " << i; };
    q.schedule(nodes[i], t0 + at[i]);
  }
  int wakeups = 0;
  while (auto next = q.next_deadline()) {
    ASSERT_GE(*next, now);
    now = *next;
    q.advance(now);
    ASSERT_LT(++wakeups, 200);
  }
  for (const probe& n : nodes) EXPECT_EQ(n.fired, 1);
}

TYPED_TEST(timer_behaviour, next_deadline_of_an_overdue_timer_is_not_after_now) {
  TypeParam q(1ms, t0);
  probe n;
  q.advance(t0 + 1s);
  q.schedule(n, t0 + 10ms);
  ASSERT_TRUE(q.next_deadline().has_value());
  EXPECT_LE(*q.next_deadline(), q.now());
  EXPECT_EQ(q.advance(q.now()), 1u);
}

TYPED_TEST(timer_behaviour, a_non_positive_tick_is_rejected) {
  EXPECT_THROW(TypeParam(0ns), std::invalid_argument);
  EXPECT_THROW(TypeParam(-1ms), std::invalid_argument);
}

TYPED_TEST(timer_behaviour, destroying_a_scheduled_node_aborts_with_message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto destroy_pending = [] {
    TypeParam q(1ms, t0);
    std::optional<timer_node> n(std::in_place);
    q.schedule(*n, t0 + 1s);
    n.reset();
  };
  EXPECT_DEATH(destroy_pending(), "destroyed while scheduled");
  // A due node (expired, in the batch being fired) counts as scheduled too.
  const auto destroy_due = [] {
    TypeParam q(1ms, t0);
    std::optional<probe> a, b;
    a.emplace();
    b.emplace();
    a->action = [&](probe&) { b.reset(); };
    b->action = [&](probe&) { a.reset(); };
    q.schedule(*a, t0 + 1ms);
    q.schedule(*b, t0 + 1ms);
    q.advance(t0 + 1ms);
  };
  EXPECT_DEATH(destroy_due(), "destroyed while scheduled");
}

TEST(timer_queue, dispatches_to_the_kind_chosen) {
  EXPECT_EQ(timer_queue().kind(), timer_kind::wheel);
  EXPECT_EQ(timer_queue(timer_kind::heap).kind(), timer_kind::heap);

  // A cancelled deadline filed on the wheel's level 1 tells them apart: the wheel still reports
  // the least deadline filed into the slot (a bound), the heap the earliest pending deadline.
  timer_queue as_wheel(timer_kind::wheel, 1ms), as_heap(timer_kind::heap, 100us, t0);
  timer_wheel wheel(1ms);
  timer_heap heap(100us, t0);
  probe a, b, c, d, gone_a, gone_b;
  as_wheel.schedule(gone_a, clock::time_point(90ms));
  wheel.schedule(gone_b, clock::time_point(90ms));
  as_wheel.schedule(a, clock::time_point(100ms));
  wheel.schedule(b, clock::time_point(100ms));
  as_heap.schedule(c, t0 + 100ms);
  heap.schedule(d, t0 + 100ms);
  as_wheel.advance(clock::time_point{});  // files the staged timers into their slots
  wheel.advance(clock::time_point{});
  EXPECT_TRUE(as_wheel.cancel(gone_a));
  EXPECT_TRUE(wheel.cancel(gone_b));
  EXPECT_EQ(as_wheel.next_deadline(), wheel.next_deadline());
  EXPECT_EQ(as_heap.next_deadline(), heap.next_deadline());
  EXPECT_EQ(wheel.next_deadline(), clock::time_point(90ms));
  EXPECT_EQ(as_wheel.tick(), 1ms);
  EXPECT_EQ(as_heap.tick(), 100us);
  EXPECT_EQ(as_heap.now(), t0);
  EXPECT_EQ(as_wheel.size(), 1u);
  EXPECT_TRUE(as_heap.cancel(c));
  EXPECT_TRUE(as_heap.empty());
  EXPECT_EQ(as_wheel.advance(clock::time_point(100ms)), 1u);
  EXPECT_TRUE(wheel.cancel(b));
  EXPECT_TRUE(heap.cancel(d));
}

}  // namespace
