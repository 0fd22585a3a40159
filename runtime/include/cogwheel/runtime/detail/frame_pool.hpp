// Where task frames live: per-thread pools of fixed-size blocks carved from 2 MiB chunks that
// the kernel is asked to back with transparent huge pages (madvise). A million sleeping tasks'
// frames are ~350 MB; from malloc on 4 KiB pages, resuming them in deadline order (random in
// memory) takes a TLB miss and a page walk per frame, the largest share of a resumed sleeper's
// cost (bench/README.md, runtime_bench sleepers_expire, has the figures).
//
// Invariants:
//  - Frames of at most max_pooled_frame bytes come from a pool; larger ones from ::operator new.
//    The size handed to free_frame is the size allocate_frame was asked for (the coroutine
//    machinery passes it back), which is how a block's origin is told without a header.
//  - A block belongs to the pool that carved it, recorded once per chunk (the chunk's first
//    bytes; a block's chunk is its address rounded down to 2 MiB). A thread frees its own pool's
//    blocks onto that pool's free lists; another thread's blocks go onto their pool's remote
//    stack (lock-free), which the owning thread takes back when its free list runs dry.
//  - A pool is used by one thread at a time. A thread that exits hands its pool (chunks, free
//    lists, remote stack) to a shared list, and the next thread that needs a pool adopts it;
//    a frame that outlives the thread that made it is still freed correctly (onto the orphaned
//    pool's remote stack).
//  - Memory goes back to the kernel a whole chunk at a time, once every block of the chunk has
//    been free for at least 200 ms (frame_pool_idle, called by the event loop when it is about
//    to sleep; the chunk stays mapped, zero, and is carved again before any new one), and at
//    thread exit for chunks empty then. A steady state that keeps reusing its blocks never
//    releases nor refaults them (docs/frame_pool.md; the decay's invariants are in
//    runtime/src/frame_pool.cpp).
//  - With COGWHEEL_FRAME_POOL=0 in the environment, or built with AddressSanitizer (which must
//    see every frame's allocation to find a use after free), frames come from ::operator new.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cogwheel::detail {

// Frames above this size are not pooled.
inline constexpr std::size_t max_pooled_frame = 2048;

// A task frame of n bytes (16-byte aligned). Throws std::bad_alloc when memory is exhausted.
void* allocate_frame(std::size_t n);
// Returns a frame from allocate_frame(n), on any thread.
void free_frame(void* p, std::size_t n) noexcept;

// The calling thread is about to sleep (its event loop has nothing ready): takes back the blocks
// other threads freed and gives back chunks that have been empty for a whole decay period.
// Returns how long the thread may sleep before calling again for the rest to be given back
// (ns), or -1 when nothing is waiting to be. Cheap when nothing is empty: no clock is read.
std::int64_t frame_pool_idle() noexcept;
// Gives back every chunk of the calling thread's pool that has no live block, now.
void release_free_frames() noexcept;

}  // namespace cogwheel::detail
