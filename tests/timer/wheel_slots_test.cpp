// Where the wheel's slots live and when they come due: wheel-only behaviours (the named edge
// behaviours shared with the heap are in behaviour_test.cpp). docs/timer.md.
#include <cogwheel/timer/ticks.hpp>
#include <cogwheel/timer/wheel.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <new>
#include <vector>

#include "probe.hpp"

namespace {

using namespace cogwheel::timer;
using namespace std::chrono_literals;
using cogwheel::timer_test::probe;

constexpr clock::time_point t0{1000h};  // a typical steady_clock reading: days after boot

// The wheel's memory follows its timers: a slot holds an array sized to its entries, and a
// level's slot headers exist once a timer was filed there (issue 27 item 3). Before, every slot
// header was in the wheel (32.7 KB) and every occupied slot held a 2 KiB block: ~180 bytes per
// timer here.
TEST(timer_wheel_memory, a_thousand_timers_over_a_minute_cost_under_64_bytes_each) {
  timer_wheel wheel(1ms, t0);
  EXPECT_LT(wheel.memory_bytes(), 8192u);
  std::vector<std::unique_ptr<probe>> probes;
  for (int i = 1; i <= 1000; ++i) {
    probes.push_back(std::make_unique<probe>());
    wheel.schedule(*probes.back(), t0 + i * 60ms);
  }
  wheel.advance(t0 + 1ms);  // files the staged timers
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
  EXPECT_LT(wheel.memory_bytes() / 1000, 64u);
  std::size_t fired = 0;
  for (auto now = t0; fired < 1000; now += 1ms) fired += wheel.advance(now);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
}

// A slot comes due at the least deadline filed into it, not at its first tick: a lone timer a
// minute ahead (level 2) fires from where it was filed, and a loop that sleeps until
// next_deadline() wakes once for it. Before, the wheel reported each slot start on the way down
// (4,096 ms slots, then 64 ms slots) and moved the timer twice: three wake-ups for one timer.
TEST(timer_wheel_due, a_lone_timer_a_minute_ahead_wakes_its_loop_once_and_never_moves) {
  timer_wheel wheel(1ms, t0);
  probe p;
  const auto deadline = t0 + 59'999ms;
  wheel.schedule(p, deadline);
  wheel.advance(t0);  // files the staged timer
  int wake_ups = 0;
  for (auto at = wheel.next_deadline(); at && p.fired == 0; at = wheel.next_deadline()) {
    ++wake_ups;
    EXPECT_EQ(*at, deadline);
    wheel.advance(*at);
    EXPECT_EQ(wheel.invariant_violation(), nullptr);
  }
  EXPECT_EQ(p.fired, 1);
  EXPECT_EQ(wake_ups, 1);
  EXPECT_EQ(wheel.moved(), 0u);
}

// The level's own slot may hold timers while the wheel's time is inside its span: here a slot of
// level 1 that came due at 100 ms fires one timer and keeps none, and one filed into the same
// 64 ms span later goes to level 0. A cancelled earliest timer leaves the slot's due tick early
// (a bound, never late).
TEST(timer_wheel_due, a_cancelled_earliest_timer_makes_its_slot_come_due_early_never_late) {
  timer_wheel wheel(1ms, t0);
  probe early, late, later;
  wheel.schedule(early, t0 + 100ms);
  wheel.schedule(late, t0 + 120ms);
  wheel.advance(t0);
  EXPECT_EQ(wheel.next_deadline(), t0 + 100ms);
  EXPECT_TRUE(wheel.cancel(early));
  EXPECT_EQ(wheel.next_deadline(), t0 + 100ms);  // the bound stays
  EXPECT_EQ(wheel.advance(t0 + 100ms), 0u);      // comes due, fires nothing, moves `late` down
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
  EXPECT_EQ(wheel.next_deadline(), t0 + 120ms);
  wheel.schedule(later, t0 + 125ms);
  EXPECT_EQ(wheel.advance(t0 + 120ms), 1u);
  EXPECT_EQ(late.fired, 1);
  EXPECT_EQ(wheel.next_deadline(), t0 + 125ms);
  EXPECT_EQ(wheel.advance(t0 + 125ms), 1u);
  EXPECT_EQ(later.fired, 1);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
}

// A cancel only logs the node (the slot's live count and occupancy bit follow at the log's
// flush), yet next_deadline() stays exact when a slot's last timer is cancelled: it applies the
// log first, so a loop does not wake for a slot that holds only cancelled timers.
TEST(timer_wheel_due, cancelling_a_slots_last_timer_moves_next_deadline_to_the_next_slot) {
  timer_wheel wheel(1ms, t0);
  probe soon, later;
  wheel.schedule(soon, t0 + 10ms);
  wheel.schedule(later, t0 + 1000ms);
  wheel.advance(t0);  // files both
  EXPECT_EQ(wheel.next_deadline(), t0 + 10ms);
  EXPECT_TRUE(wheel.cancel(soon));
  EXPECT_EQ(wheel.next_deadline(), t0 + 1000ms);
  EXPECT_EQ(wheel.pending_per_level()[0], 0u);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
  EXPECT_EQ(wheel.advance(t0 + 1000ms), 1u);
  EXPECT_EQ(later.fired, 1);
}

// A timer cancelled and scheduled again at once with a deadline no earlier than before goes back
// into the entry it left (as a lazy reschedule() would): not staged, not filed again, and still
// exact. Large wheels only by default (timer_wheel::requeue()); the test lowers the bound.
TEST(timer_wheel_requeue, a_replaced_timeout_goes_back_into_its_entry_and_fires_on_time) {
  timer_wheel wheel(1ms, t0);
  probe a, b, c;
  wheel.schedule(a, t0 + 5000ms);
  wheel.schedule(b, t0 + 5100ms);
  wheel.schedule(c, t0 + 5200ms);
  wheel.advance(t0);  // files all three (level 2: more than 4,096 ms ahead)
  ASSERT_EQ(wheel.pending_per_level()[2], 3u);
  // Below the size bound (2^18 by default) the timer is filed at once (timer_wheel::file_now()),
  // here into level 2 as well: 6,000 ms is after the slot that comes due first (5,000 ms).
  EXPECT_TRUE(wheel.cancel(a));
  wheel.schedule(a, t0 + 6000ms);
  EXPECT_EQ(wheel.pending_per_level()[2], 3u);
  EXPECT_EQ(wheel.pending_per_level()[detail::level_count], 0u);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
  wheel.set_requeue_min_size(1);
  EXPECT_TRUE(wheel.cancel(b));
  wheel.schedule(b, t0 + 7000ms);
  EXPECT_EQ(wheel.pending_per_level()[2], 3u);  // b is back, beside a and c
  EXPECT_EQ(wheel.pending_per_level()[detail::level_count], 0u);
  EXPECT_EQ(wheel.size(), 3u);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
  // An earlier deadline is staged and filed where it belongs.
  EXPECT_TRUE(wheel.cancel(c));
  wheel.schedule(c, t0 + 3000ms);
  EXPECT_EQ(wheel.pending_per_level()[detail::level_count], 1u);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
  EXPECT_EQ(wheel.advance(t0 + 2999ms), 0u);
  EXPECT_EQ(wheel.advance(t0 + 3000ms), 1u);
  EXPECT_EQ(c.fired, 1);
  EXPECT_EQ(wheel.advance(t0 + 5999ms), 0u);
  EXPECT_EQ(wheel.advance(t0 + 6000ms), 1u);
  EXPECT_EQ(a.fired, 1);
  EXPECT_EQ(wheel.advance(t0 + 6999ms), 0u);
  EXPECT_EQ(b.fired, 0);
  EXPECT_EQ(wheel.advance(t0 + 7000ms), 1u);
  EXPECT_EQ(b.fired, 1);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
}

// The wheel recognises the timer cancelled last by its address only. A node destroyed after its
// cancel and another built at that address is a new timer whose fields say nothing of the old
// entry: scheduled before that entry's slot comes due, it must not go back there (it would fire
// late). The slot's due tick is what decides, not the node.
TEST(timer_wheel_requeue, a_new_node_at_a_cancelled_nodes_address_is_not_put_back_late) {
  timer_wheel wheel(1ms, t0);
  wheel.set_requeue_min_size(1);
  probe keep;
  wheel.schedule(keep, t0 + 5100ms);
  alignas(probe) unsigned char storage[sizeof(probe)];
  probe* old_node = new (storage) probe;
  wheel.schedule(*old_node, t0 + 5000ms);
  wheel.advance(t0);  // files both in one level-2 slot, due at 5,000 ms
  EXPECT_TRUE(wheel.cancel(*old_node));
  old_node->~probe();
  probe* fresh = new (storage) probe;  // tick 0, slot 0, index 0
  wheel.schedule(*fresh, t0 + 10ms);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
  EXPECT_EQ(wheel.advance(t0 + 9ms), 0u);
  EXPECT_EQ(wheel.advance(t0 + 10ms), 1u);
  EXPECT_EQ(fresh->fired, 1);
  fresh->~probe();
  EXPECT_EQ(wheel.advance(t0 + 5100ms), 1u);
  EXPECT_EQ(keep.fired, 1);
}

// Small wheels file a replaced timeout at once (timer_wheel::file_now()), without the
// update_next_work() that filing staged nodes ends with: only deadlines that lower none of the
// bounds advance() and next_deadline() answer from. An earlier one is staged. Filed at once,
// b at 10 ms would sit in a level-0 slot that no advance() before 5,000 ms looks at (the O(1)
// path compares with next_work_, 5,000 ms), and next_deadline() would report 5,000 ms (the
// cancelled b's old slot still holds a, so nothing forgets next_due_).
TEST(timer_wheel_file_now, a_replaced_timeout_before_the_next_slot_due_is_staged_not_filed) {
  timer_wheel wheel(1ms, t0);
  probe a, b;
  wheel.schedule(a, t0 + 5000ms);
  wheel.schedule(b, t0 + 6000ms);
  wheel.advance(t0);  // files both in one level-2 slot, due at 5,000 ms
  ASSERT_EQ(wheel.next_deadline(), t0 + 5000ms);
  EXPECT_TRUE(wheel.cancel(b));
  wheel.schedule(b, t0 + 10ms);
  EXPECT_EQ(wheel.pending_per_level()[detail::level_count], 1u);  // staged
  EXPECT_EQ(wheel.next_deadline(), t0 + 10ms);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
  EXPECT_EQ(wheel.advance(t0 + 9ms), 0u);
  EXPECT_EQ(wheel.advance(t0 + 10ms), 1u);
  EXPECT_EQ(b.fired, 1);
  // At or after the bound it is filed at once, and still exact.
  EXPECT_TRUE(wheel.cancel(a));
  wheel.schedule(a, t0 + 5500ms);
  EXPECT_EQ(wheel.pending_per_level()[2], 1u);
  // Back in the slot it left, which still comes due at 5,000 ms (a cancel leaves a slot's due
  // earlier, never later): early, as next_deadline() may be after a cancel.
  EXPECT_EQ(wheel.next_deadline(), t0 + 5000ms);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
  EXPECT_EQ(wheel.advance(t0 + 5499ms), 0u);
  EXPECT_EQ(wheel.advance(t0 + 5500ms), 1u);
  EXPECT_EQ(a.fired, 1);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
}

// The bound rises when next_deadline() learns a later next slot (the one that came due first
// was emptied by a cancel): a filing at once between the two would make it report the later one.
TEST(timer_wheel_file_now, the_bound_follows_next_deadline_when_the_first_slot_empties) {
  timer_wheel wheel(1ms, t0);
  probe a, c, d, e;
  wheel.schedule(a, t0 + 5000ms);   // level 2, [4,096, 8,192) ms
  wheel.schedule(c, t0 + 9000ms);   // level 2, [8,192, 12,288) ms
  wheel.schedule(d, t0 + 20000ms);  // level 2, [16,384, 20,480) ms, with e
  wheel.schedule(e, t0 + 20100ms);
  wheel.advance(t0);
  ASSERT_EQ(wheel.next_deadline(), t0 + 5000ms);
  EXPECT_TRUE(wheel.cancel(a));
  EXPECT_EQ(wheel.next_deadline(), t0 + 9000ms);  // a's slot emptied: the next one
  EXPECT_TRUE(wheel.cancel(d));
  wheel.schedule(d, t0 + 6000ms);  // before 9,000 ms: staged (d's old slot still holds e)
  EXPECT_EQ(wheel.next_deadline(), t0 + 6000ms);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
  EXPECT_EQ(wheel.advance(t0 + 5999ms), 0u);
  EXPECT_EQ(wheel.advance(t0 + 6000ms), 1u);
  EXPECT_EQ(d.fired, 1);
  EXPECT_EQ(wheel.advance(t0 + 20100ms), 2u);
}

}  // namespace
