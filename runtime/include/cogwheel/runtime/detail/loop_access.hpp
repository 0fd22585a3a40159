// The narrow interface through which cogwheel's public headers (awaiters, deadlines, socket
// operations) reach the current core's loop without seeing it: event_loop is an opaque type
// here. Its definition, the I/O backends (io_uring, epoll) and the time driver stay in
// runtime/src; each function below is one out-of-line call into them, except the lookup of the
// calling thread's loop (current_loop()), which is one thread-local read.
//
// Threading: every function acts on the loop of the calling thread (or the loop passed in,
// which must be the calling thread's). Nothing here is for other threads.
#pragma once

#include <chrono>
#include <cstdint>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/io_request.hpp>
#include <cogwheel/runtime/detail/ready_queue.hpp>
#include <cogwheel/runtime/time.hpp>
#include <cogwheel/timer/node.hpp>

namespace cogwheel {

namespace detail {

class event_loop;

// The loop the calling thread runs, nullptr when none: set by the loop's constructor, cleared by
// its shutdown(), read here inline. constinit: no TLS init function and no guard, so a read is
// one %fs load instead of a call into runtime/src, and it is taken several times per I/O
// operation (a timed read: the race's timer, the operation's submit, the pool's check). An
// inline variable of default visibility: one per thread across shared libraries too, as
// deadline_refusals (detail/deadline_scope.hpp).
inline constinit thread_local event_loop* this_thread_loop = nullptr;

// Reports an awaitable used on a thread that runs no cogwheel loop, then aborts.
[[noreturn]] void abort_no_loop() noexcept;

// The calling thread's loop; terminates with a message when there is none (a cogwheel
// awaitable used outside run()/runtime::run() is a programming error).
inline event_loop& current_loop() noexcept {
  event_loop* const loop = this_thread_loop;
  if (loop == nullptr) [[unlikely]]
    abort_no_loop();
  return *loop;
}
// The calling thread's loop, or nullptr.
inline event_loop* current_loop_if_any() noexcept { return this_thread_loop; }

// --- time (the loop's time driver) ---
// The timestamp of the loop's current iteration (the one clock read; virtual when paused).
clock::time_point loop_now(event_loop& loop) noexcept;
// The time a new deadline counts from: clock::now(), or the virtual time of a paused clock.
clock::time_point current_time() noexcept;
void schedule_timer(event_loop& loop, timer::timer_node& n, clock::time_point at);
void reschedule_timer(event_loop& loop, timer::timer_node& n, clock::time_point at);
void cancel_timer(event_loop& loop, timer::timer_node& n) noexcept;
// The tick of the loop's timer queue (deadlines filed there round up to it).
clock::duration timer_tick(event_loop& loop) noexcept;
// A sleep's start in one call: files n on the calling thread's loop at `deadline`, or, when the
// loop's time has reached it, as due now (time_point::min(): filed at its own time it would round
// up to the next tick boundary).
void start_sleep_timer(timer::timer_node& n, clock::time_point deadline);
// The same as reschedule_timer and cancel_timer on the calling thread's loop, for a waiter that
// keeps no pointer to its loop (a sleep: 8 bytes less in every sleeping frame). Precondition: n
// was filed by this thread's loop (a node filed elsewhere may be touched on its loop's thread
// only, whichever way).
void reschedule_timer(timer::timer_node& n, clock::time_point at);
void cancel_timer(timer::timer_node& n) noexcept;
// For timer callbacks: c joins this iteration's expired batch, resumed in full right after the
// timer queue's advance() (which therefore does only timer work).
void post_expired(event_loop& loop, ready_node& node, continuation c) noexcept;
// The same with the continuation node.prepare() set, for a waiter that prefetched its own
// state, from a timer callback of the calling thread's loop (which is the one advancing).
void post_expired(batch_node& node) noexcept;

// --- ready queue ---
// c runs in a coming iteration; `node` lives in the waiter (no allocation).
void post(event_loop& loop, ready_node& node, continuation c) noexcept;

// --- I/O (the loop's backend: io_uring or epoll) ---
// Base of everything that owns an operation in flight: the loop calls on_cqe for each of its
// completions. Owners outlive their final completion (their destructors cancel and wait for
// it, see cancel_and_wait).
struct io_completion {
  void (*on_cqe)(io_completion&, int res, unsigned flags) noexcept = nullptr;
  io_request* request = nullptr;  // the one in flight (set by submit)
};
// Starts `req` on behalf of op. Its completion reaches op.on_cqe in a coming iteration, never
// from inside submit. Never fails: a full submission queue is flushed to make room.
void submit(event_loop& loop, io_completion& op, io_request& req);
// Asks the backend to cancel op's operation; op's completion arrives later as usual.
void cancel_async(event_loop& loop, io_completion& op);
// Cancels op's operation and blocks until op's final completion has been dispatched to op
// (`in_flight` false). For destructors of awaiters whose frame is going away.
void cancel_and_wait(event_loop& loop, io_completion& op, bool& in_flight);
// Any thread: a new socket's identity (io_request::socket), never 0 and never reused; taken
// from a block of the calling thread's own (no shared write per socket).
std::uint64_t new_socket_identity() noexcept;
// Closes a descriptor (any thread).
void close_descriptor(int fd) noexcept;
// Closes fd once every request queued on `loop` before this call has
// been handed to the kernel, so none of them can find another socket under the number:
// io_uring queues the close behind them, epoll (whose syscalls ran when they were started)
// closes at once. For a socket whose operations were just cancelled; on the loop's thread.
void close_descriptor_after_queued(event_loop& loop, int fd) noexcept;
// Hands every request queued on `loop` to the kernel now (io_uring: one io_uring_enter; epoll:
// nothing to do). On the loop's thread.
void flush_submissions(event_loop& loop) noexcept;

// --- other cores (thread-safe) ---
// A message to another core's loop, intrusive: it lives in whoever sends it (nothing is
// allocated to post it). Exactly one of deliver (on the target loop's thread, in a coming
// iteration) or discard (the target loop shut down first; on whichever thread destroys it) is
// called, once.
struct remote_message {
  void (*deliver)(remote_message&) noexcept = nullptr;
  void (*discard)(remote_message&) noexcept = nullptr;
  remote_message* next = nullptr;
};
// Thread-safe: queues m on `target` and wakes it if it sleeps (one wake-up per burst).
void post_remote(event_loop& target, remote_message& m) noexcept;
// The loop of `core` in the calling thread's runtime (this loop under run()); nullptr if none.
event_loop* peer_loop(unsigned core) noexcept;

}  // namespace detail
}  // namespace cogwheel
