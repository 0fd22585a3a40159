// The wheel's pool of slot arrays (timer/detail/entry_slot.hpp): what a released slot touches,
// and that its arrays come back. Free blocks are listed inside a few free blocks (carriers), so
// emptying a slot of many blocks writes one block in 254, not all of them (threaded through each
// block, a slot of 140,000 timers emptied by a visit cost the idle pattern's longest advance(),
// 13-21 us).
#include <cogwheel/timer/detail/entry_slot.hpp>
#include <cogwheel/timer/wheel.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <vector>

#include "probe.hpp"

namespace {

using namespace cogwheel::timer;
using cogwheel::timer::detail::block_entries;
using cogwheel::timer::detail::block_pool;
using cogwheel::timer::detail::entry_slot;
using namespace std::chrono_literals;

// Fills `sl` with `count` entries pointing at `nodes` (never fired: the slot alone).
void fill(entry_slot& sl, block_pool& pool, std::vector<timer_node>& nodes) {
  for (timer_node& n : nodes) sl.add(&n, pool, 0, [] {});
}

TEST(block_pool, releasing_a_slot_of_many_blocks_writes_only_its_first_block) {
  block_pool pool;
  std::vector<timer_node> nodes(10 * block_entries);
  entry_slot sl;
  fill(sl, pool, nodes);
  ASSERT_EQ(sl.block_count(), 10u);
  std::vector<timer_node**> blocks;
  for (std::uint32_t b = 0; b < sl.block_count(); ++b) blocks.push_back(sl.block(b));
  sl.release(pool);
  // Every block but the first (the pool's first carrier) still holds what the slot wrote:
  // release() read the table of blocks, not the blocks (threaded into a free list one by one,
  // each block's first word was overwritten, and each was a cache miss).
  for (std::size_t b = 1; b < blocks.size(); ++b)
    for (std::uint32_t i = 0; i < block_entries; ++i)
      ASSERT_EQ(blocks[b][i], &nodes[b * block_entries + i]) << "block " << b << " entry " << i;
  EXPECT_EQ(pool.allocated(), pool.free_count());
}

TEST(block_pool, a_released_slots_blocks_and_table_come_back_and_nothing_more_is_allocated) {
  block_pool pool;
  std::vector<timer_node> nodes(10 * block_entries + 7);
  entry_slot first;
  fill(first, pool, nodes);
  std::set<timer_node**> blocks;
  for (std::uint32_t b = 0; b < first.block_count(); ++b) blocks.insert(first.block(b));
  const std::size_t allocated = pool.allocated();
  const std::size_t bytes = pool.memory_bytes();
  first.release(pool);
  EXPECT_EQ(pool.free_count(), allocated);
  // A slot of the same size, twice over, from what the pool holds: the same blocks, no new array.
  for (int round = 0; round < 2; ++round) {
    entry_slot again;
    fill(again, pool, nodes);
    std::set<timer_node**> reused;
    for (std::uint32_t b = 0; b < again.block_count(); ++b) reused.insert(again.block(b));
    EXPECT_EQ(reused, blocks);
    EXPECT_EQ(pool.allocated(), allocated);
    EXPECT_EQ(pool.memory_bytes(), bytes);
    EXPECT_EQ(pool.free_count() + again.block_count() + 1, allocated);  // + its table
    for (std::uint32_t i = 0; i < again.size; ++i) ASSERT_EQ(again.at(i), &nodes[i]);
    again.release(pool);
    EXPECT_EQ(pool.free_count(), allocated);
  }
}

TEST(block_pool, bundles_and_single_arrays_mix_and_the_pool_frees_them_all) {
  // Two slots released as bundles, smaller slots as single arrays, then taken in another order;
  // ASan reports a leak or a double free if the destructor misses or repeats one.
  block_pool pool;
  std::vector<timer_node> nodes(3 * block_entries);
  std::vector<std::unique_ptr<entry_slot>> slots;
  for (int i = 0; i < 6; ++i) {
    slots.push_back(std::make_unique<entry_slot>());
    const std::size_t count = i % 2 == 0 ? nodes.size() : 100;
    for (std::size_t k = 0; k < count; ++k) slots.back()->add(&nodes[k], pool, 0, [] {});
  }
  for (auto& s : slots) s->release(pool);
  EXPECT_EQ(pool.allocated(), pool.free_count());
  for (int i = 5; i >= 0; --i) {
    const std::size_t count = i % 3 == 0 ? nodes.size() + block_entries : 37;
    for (std::size_t k = 0; k < count; ++k) slots[i]->add(&nodes[k % nodes.size()], pool, 0, [] {});
  }
  for (int i = 0; i < 3; ++i) slots[i]->release(pool);
  // In use: slot 3's 4 blocks and its table, slots 4 and 5's arrays of 64.
  EXPECT_EQ(pool.allocated(), pool.free_count() + 7);
  for (int i = 3; i < 6; ++i) slots[i]->release(pool);
  EXPECT_EQ(pool.allocated(), pool.free_count());
}

// The wheel: a slot of a hundred thousand pushed-back timers emptied by a visit, refilled, and
// emptied again, with the wheel consistent throughout and its memory no larger the second time.
TEST(block_pool, a_wheel_reuses_a_visited_slots_blocks) {
  constexpr clock::time_point t0{1000h};
  timer_wheel wheel(1ms, t0);
  constexpr int n = 100'000;
  std::vector<cogwheel::timer_test::probe> probes(n);
  for (auto& p : probes) wheel.schedule(p, t0 + 20'000ms);  // one level-2 slot
  wheel.advance(t0 + 1ms);
  std::size_t bytes = 0;
  for (int round = 0; round < 3; ++round) {
    const auto base = t0 + round * 10'000ms;
    // Push every deadline ten seconds on; the visits move them before the slot comes due.
    for (auto& p : probes) wheel.reschedule(p, base + 30'000ms);
    for (auto now = base + 1ms; now < base + 10'000ms; now += 1ms) wheel.advance(now);
    ASSERT_EQ(wheel.invariant_violation(), nullptr);
    if (round == 1) {
      bytes = wheel.memory_bytes();
    } else if (round == 2) {
      EXPECT_LE(wheel.memory_bytes(), bytes);
    }
  }
  EXPECT_GE(wheel.moved(), 2u * n);  // the visits moved every timer, round after round
  for (auto& p : probes) EXPECT_EQ(p.fired, 0);
  for (auto& p : probes) wheel.cancel(p);
  EXPECT_EQ(wheel.invariant_violation(), nullptr);
}

}  // namespace
