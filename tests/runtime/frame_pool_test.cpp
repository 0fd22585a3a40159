// Task frames come from per-thread pools: a block freed by its own thread is reused; one freed
// by another thread goes back to its pool and is reused there; a pool whose thread exited is
// adopted by the next thread that needs one, with its blocks still valid; frames above the
// pooled size, and tasks whose frames move between threads (submit_to, a thread that outlives
// its frames), work as before.
#include <cogwheel/runtime/detail/frame_pool.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <cogwheel/runtime/run.hpp>
#include <cogwheel/runtime/runtime.hpp>
#include <cogwheel/runtime/task.hpp>

#include "frame_pool_support.hpp"

namespace cogwheel::detail {
namespace {

TEST(frame_pool, a_block_freed_on_its_thread_is_reused_there) {
  if (!pools_on()) GTEST_SKIP() << "frame pools are off in this build or environment";
  void* a = allocate_frame(352);
  std::memset(a, 0xab, 352);
  free_frame(a, 352);
  EXPECT_EQ(allocate_frame(352), a);
  free_frame(a, 352);
}

TEST(frame_pool, blocks_are_16_byte_aligned_and_distinct) {
  void* a = allocate_frame(24);
  void* b = allocate_frame(24);
  void* c = allocate_frame(max_pooled_frame);
  EXPECT_NE(a, b);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 16, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % 16, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c) % 16, 0u);
  std::memset(c, 1, max_pooled_frame);
  free_frame(a, 24);
  free_frame(b, 24);
  free_frame(c, max_pooled_frame);
}

TEST(frame_pool, a_block_freed_on_another_thread_returns_to_its_pool) {
  if (!pools_on()) GTEST_SKIP() << "frame pools are off in this build or environment";
  void* a = allocate_frame(200);
  std::thread([a] { free_frame(a, 200); }).join();
  // The free list of this size is empty now (a is the only block freed): the next allocation
  // takes the remote stack back and finds a there.
  EXPECT_EQ(allocate_frame(200), a);
  free_frame(a, 200);
}

TEST(frame_pool, a_pool_outlives_its_thread_and_is_adopted) {
  if (!pools_on()) GTEST_SKIP() << "frame pools are off in this build or environment";
  void* kept = nullptr;
  void* freed = nullptr;
  std::thread([&] {
    kept = allocate_frame(1040);
    freed = allocate_frame(1040);
    std::memset(kept, 0x5a, 1040);
    free_frame(freed, 1040);
  }).join();
  // The exited thread's pool is handed to the next thread that needs one: this one's first
  // allocation adopts it, free list included; its blocks are still valid memory.
  std::thread([&] {
    EXPECT_EQ(allocate_frame(1040), freed);
    EXPECT_EQ(static_cast<unsigned char*>(kept)[1039], 0x5a);
    free_frame(kept, 1040);  // the adopting thread owns it now: a local free
    EXPECT_EQ(allocate_frame(1040), kept);
    free_frame(kept, 1040);
    free_frame(freed, 1040);
  }).join();
}

// free_frame's fast path reads the block's chunk header: null must be turned away before that,
// on a thread with a pool as on one without.
TEST(frame_pool, freeing_null_is_a_no_op) {
  void* a = allocate_frame(64);  // this thread has a pool (when pools are on)
  free_frame(nullptr, 64);
  free_frame(nullptr, max_pooled_frame + 1);
  free_frame(a, 64);
  std::thread([] { free_frame(nullptr, 64); }).join();  // no pool on that thread
}

TEST(frame_pool, frames_above_the_pooled_size_come_from_operator_new) {
  void* big = allocate_frame(max_pooled_frame + 1);
  std::memset(big, 0, max_pooled_frame + 1);
  free_frame(big, max_pooled_frame + 1);
}

task<int> add(int a, int b) { co_return a + b; }

// A task carried to another core unstarted (submit_to would run a task it is given).
struct held {
  task<int> t;
};

TEST(frame_pool, a_task_made_on_one_thread_runs_and_is_destroyed_on_another) {
  task<int> t = add(2, 3);  // its frame comes from this thread's pool
  int got = 0;
  std::thread([&] {
    got = run(std::move(t));  // run() destroys it there
  }).join();
  EXPECT_EQ(got, 5);
}

TEST(frame_pool, frames_made_on_one_core_are_freed_on_another_and_reused) {
  runtime rt(runtime_options{.cores = 2});
  int total = 0;
  rt.run([&](unsigned core) -> task<void> {
    if (core != 0) co_return;
    for (int i = 0; i < 500; ++i) {
      // Core 1 makes the frame (from its pool); core 0 runs and destroys it: a remote free, which
      // core 1 takes back on a later allocation.
      held h = co_await submit_to(1, [i] { return held{add(i, 1)}; });
      total += co_await std::move(h.t);
    }
  });
  EXPECT_EQ(total, 500 * 501 / 2);
}

}  // namespace
}  // namespace cogwheel::detail
