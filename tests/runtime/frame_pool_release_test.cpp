// Frame pools give memory back: a burst of frames, once freed, leaves the process's Rss after an
// idle event loop's decay period; a chunk given back and carved again holds frames intact (and
// frames still live elsewhere stay intact); blocks freed by other threads (remote stacks), and
// pools whose thread exited (orphans), are given back and reused correctly.
#include <cogwheel/runtime/detail/frame_pool.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include <cogwheel/runtime/run.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/task.hpp>

#include "frame_pool_support.hpp"

namespace cogwheel::detail {
namespace {

using namespace std::chrono_literals;

std::size_t rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

constexpr std::uintptr_t chunk_mask = ~((std::uintptr_t{2} << 20) - 1);

// Blocks of n bytes, each filled with a byte derived from its index and a seed.
struct burst {
  std::size_t n;
  std::vector<unsigned char*> blocks;
  unsigned char pattern(std::size_t i, unsigned seed) const { return static_cast<unsigned char>(i * 31 + seed) | 1; }
  burst(std::size_t count, std::size_t bytes, unsigned seed) : n(bytes) {
    blocks.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      blocks.push_back(static_cast<unsigned char*>(allocate_frame(n)));
      std::memset(blocks.back(), pattern(i, seed), n);
    }
  }
  // Every byte of every block as written: no two blocks overlap, none was zeroed under it.
  bool intact(unsigned seed) const {
    for (std::size_t i = 0; i < blocks.size(); ++i)
      for (std::size_t k = 0; k < n; ++k)
        if (blocks[i][k] != pattern(i, seed)) return false;
    return true;
  }
  std::set<std::uintptr_t> chunks() const {
    std::set<std::uintptr_t> s;
    for (unsigned char* b : blocks) s.insert(reinterpret_cast<std::uintptr_t>(b) & chunk_mask);
    return s;
  }
  void free_all() {
    for (unsigned char* b : blocks) free_frame(b, n);
    blocks.clear();
  }
};

task<void> idle_for(clock::duration d) { co_await sleep_for(d); }

TEST(frame_pool_release, a_freed_burst_leaves_rss_once_the_loop_has_idled) {
  if (!pools_on()) GTEST_SKIP() << "frame pools are off in this build or environment";
  const std::size_t before = rss_bytes();
  burst b(40000, 512, 1);  // ~20 MiB: ten chunks
  const std::size_t held = rss_bytes();
  ASSERT_GT(held, before + (16u << 20));
  b.free_all();
  // The loop sleeps: it gives back what has been empty for a whole decay period (200 ms; the
  // chunks are given back within two periods).
  run(idle_for(700ms));
  const std::size_t after = rss_bytes();
  // Most of the burst's ten chunks are given back (one may be shared with longer-lived blocks).
  // An absolute figure: under ThreadSanitizer Rss also holds the burst's shadow, which stays.
  EXPECT_LT(after + (16u << 20), held) << "Rss " << before << " -> " << held << " -> " << after;
}

TEST(frame_pool_release, a_loop_idling_until_its_chunks_are_given_back_wakes_a_few_times_not_a_spin) {
  // An idle loop calls frame_pool_idle and sleeps (precisely) as long as it says until it says
  // -1: the chunks emptied are given back. The clock it decides by is coarse (a tick behind at
  // worst): asked to sleep the coarse clock's shortfall, the loop woke before the tick, found
  // the same shortfall, and woke again every few µs until the tick (hundreds of wake-ups).
  if (!pools_on()) GTEST_SKIP() << "frame pools are off in this build or environment";
  for (int round = 0; round < 4; ++round) {  // each round meets two epoch boundaries
    burst b(8000, 512, 3);
    b.free_all();
    int calls = 0;
    std::int64_t ns = 0;
    while ((ns = frame_pool_idle()) > 0 && calls < 1000) {
      ++calls;
      std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
    }
    // Two or three epoch advances, plus one call when the first one is already due.
    EXPECT_LE(calls, 6) << "round " << round;
  }
}

TEST(frame_pool_release, a_chunk_given_back_is_carved_again_with_frames_intact) {
  if (!pools_on()) GTEST_SKIP() << "frame pools are off in this build or environment";
  burst kept(300, 352, 7);  // live throughout: its chunk is never given back
  burst first(20001, 400, 2);  // ~8 MiB: four chunks; the last run of 32 not used up
  const std::set<std::uintptr_t> first_chunks = first.chunks();
  const std::size_t held = rss_bytes();
  first.free_all();
  release_free_frames();
  EXPECT_LT(rss_bytes(), held - (4u << 20));
  ASSERT_TRUE(kept.intact(7));
  // Carved again, sizes mixed: the chunks given back are reused (zeroed by the kernel, their
  // headers written anew), every block distinct and holding what was written.
  burst second(20001, 400, 3);
  burst third(5000, 96, 4);
  std::size_t reused = 0;
  for (std::uintptr_t c : second.chunks()) reused += first_chunks.count(c);
  EXPECT_GT(reused, 0u);
  EXPECT_TRUE(second.intact(3));
  EXPECT_TRUE(third.intact(4));
  EXPECT_TRUE(kept.intact(7));
  // Freed, given back and carved a third time, with the blocks of `kept` freed in between.
  second.free_all();
  kept.free_all();
  release_free_frames();
  EXPECT_TRUE(third.intact(4));
  burst fourth(20000, 400, 5);
  EXPECT_TRUE(fourth.intact(5));
  EXPECT_TRUE(third.intact(4));
  fourth.free_all();
  third.free_all();
  release_free_frames();
}

TEST(frame_pool_release, blocks_freed_on_another_thread_are_given_back_and_reused) {
  if (!pools_on()) GTEST_SKIP() << "frame pools are off in this build or environment";
  std::thread([] {
    burst b(20000, 640, 11);
    const std::size_t held = rss_bytes();
    // Freed on another thread: onto this pool's remote stack, still counted live until taken.
    std::thread([&b] { b.free_all(); }).join();
    release_free_frames();  // takes the remote stack back; the chunks are empty and given back
    EXPECT_LT(rss_bytes(), held - (8u << 20));
    burst again(20000, 640, 12);
    EXPECT_TRUE(again.intact(12));
    again.free_all();
  }).join();
}

TEST(frame_pool_release, an_orphaned_pool_is_given_back_once_its_last_frames_are_freed) {
  if (!pools_on()) GTEST_SKIP() << "frame pools are off in this build or environment";
  burst* b = nullptr;
  std::thread([&b] {
    b = new burst(40000, 272, 21);  // ~11 MiB: five chunks
    // Half freed here; the thread exits with the other half live: its pool is orphaned with
    // those chunks in use (and gives back those already empty).
    for (std::size_t i = 0; i < b->blocks.size(); i += 2) free_frame(b->blocks[i], b->n);
    std::vector<unsigned char*> odd;
    for (std::size_t i = 1; i < b->blocks.size(); i += 2) odd.push_back(b->blocks[i]);
    b->blocks = odd;
  }).join();
  // The rest is freed from this thread: onto the orphaned pool's remote stack.
  b->free_all();
  delete b;
  std::thread([] {
    // The first allocation adopts the pool (the only orphan: every earlier thread's pool was
    // adopted in turn), whose blocks are all free now, most of them on its remote stack.
    void* first = allocate_frame(272);
    const std::size_t held = rss_bytes();
    release_free_frames();  // the remote stack taken back: every chunk but `first`'s is empty
    EXPECT_LT(rss_bytes(), held - (4u << 20));
    free_frame(first, 272);
    burst c(20000, 272, 22);
    release_free_frames();
    EXPECT_TRUE(c.intact(22));
    c.free_all();
    release_free_frames();
    burst d(30000, 272, 23);
    EXPECT_TRUE(d.intact(23));
    d.free_all();
  }).join();
}

}  // namespace
}  // namespace cogwheel::detail
