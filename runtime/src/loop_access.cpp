// The out-of-line side of <cogwheel/runtime/detail/loop_access.hpp> and <cogwheel/runtime/stats.hpp>:
// what public headers may ask of the calling thread's loop.
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/detail/loop_services.hpp>
#include <cogwheel/runtime/stats.hpp>
#include <cogwheel/runtime/run.hpp>
#include <cogwheel/runtime/time.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "event_loop.hpp"

namespace cogwheel {

namespace detail {

void abort_no_loop() noexcept {
  std::fputs("cogwheel: an awaitable was used on a thread that runs no cogwheel loop "
             "(call it from inside cogwheel::run() or runtime::run())\n",
             stderr);
  std::abort();
}

clock::time_point loop_now(event_loop& loop) noexcept { return loop.now(); }

clock::time_point current_time() noexcept {
  event_loop* loop = event_loop::current();
  return loop != nullptr ? loop->time().current_time() : clock::now();
}

void schedule_timer(event_loop& loop, timer::timer_node& n, clock::time_point at) { loop.time().schedule(n, at); }
void reschedule_timer(event_loop& loop, timer::timer_node& n, clock::time_point at) {
  loop.time().reschedule(n, at);
}
void cancel_timer(event_loop& loop, timer::timer_node& n) noexcept { loop.time().cancel(n); }
clock::duration timer_tick(event_loop& loop) noexcept { return loop.timers().tick(); }
void start_sleep_timer(timer::timer_node& n, clock::time_point deadline) {
  event_loop& loop = current_loop();
  loop.time().schedule(n, deadline <= loop.now() ? clock::time_point::min() : deadline);
}
void reschedule_timer(timer::timer_node& n, clock::time_point at) { current_loop().time().reschedule(n, at); }
void cancel_timer(timer::timer_node& n) noexcept { current_loop().time().cancel(n); }
void post_expired(event_loop& loop, ready_node& node, continuation c) noexcept { loop.post_expired(node, c); }
// Inside the loop's advance(): the thread has a loop (no check).
void post_expired(batch_node& node) noexcept { event_loop::current()->post_expired(node); }
void post(event_loop& loop, ready_node& node, continuation c) noexcept { loop.post(node, c); }

void submit(event_loop& loop, io_completion& op, io_request& req) { loop.submit(op, req); }
void cancel_async(event_loop& loop, io_completion& op) { loop.cancel_async(op); }
void cancel_and_wait(event_loop& loop, io_completion& op, bool& in_flight) { loop.cancel_and_wait(op, in_flight); }
void close_descriptor_after_queued(event_loop& loop, int fd) noexcept { loop.driver().close_after_queued(fd); }

void close_descriptor(int fd) noexcept { ::close(fd); }

// Identities are handed out in blocks: a thread takes 65,536 from the shared counter at once
// and then counts on its own, so cores that accept or connect at a high rate do not each write
// one shared cache line per socket. Never 0 (the counter starts at 1) and never reused: blocks
// are disjoint, and 2^64 identities outlast any process.
std::uint64_t new_socket_identity() noexcept {
  constexpr std::uint64_t block = 65'536;
  static std::atomic<std::uint64_t> next_block{1};
  thread_local std::uint64_t next = 0;
  thread_local std::uint64_t end = 0;
  if (next == end) {
    next = next_block.fetch_add(block, std::memory_order_relaxed);
    end = next + block;
  }
  return next++;
}

void flush_submissions(event_loop& loop) noexcept { loop.driver().flush(); }

void add_shutdown_hook(event_loop& loop, shutdown_hook& h) noexcept { loop.add_shutdown_hook(h); }
void cancel_all_and_wait(event_loop& loop, io_completion& op, const unsigned& in_flight) {
  loop.cancel_all_and_wait(op, in_flight);
}
int add_buffer_group(event_loop& loop, std::uint16_t group, std::byte* memory, std::uint32_t count,
                     std::uint32_t size, std::uint32_t stride) noexcept {
  return loop.driver().add_buffer_group(group, memory, count, size, stride);
}
void give_buffer(event_loop& loop, std::uint16_t group, std::uint16_t id) noexcept {
  loop.driver().give_buffer(group, id);
}
void remove_buffer_group(event_loop& loop, std::uint16_t group) noexcept {
  loop.driver().remove_buffer_group(group);
}
const resolver_options& resolver_settings(event_loop& loop) noexcept { return loop.resolver(); }
void note_accept_pause(event_loop& loop) noexcept { loop.note_accept_pause(); }

unsigned socket_arrives(event_loop& loop) noexcept {
  loop.count_open_sockets(1);
  return loop.core();
}

void socket_departs(event_loop* home, unsigned home_core, int fd, bool unwatch) noexcept {
  event_loop* here = event_loop::current();
  if (here == nullptr || home == nullptr) return;
  if (home == here) {
    if (unwatch) home->driver().unwatch(fd);
    home->count_open_sockets(-1);
    return;
  }
  // Alive means: still the loop of that core in this runtime (compared, never dereferenced
  // before that). (A socket kept from an earlier runtime whose loop stood at the same address
  // is taken for one of this loop's: counted off here though never counted in. Sockets that
  // outlive their runtime are not what the gauge is for.)
  if (here->peer(home_core) != home) return;
  if (unwatch) home->driver().unwatch(fd);  // epoll_ctl on another loop's set: the kernel's lock
  home->count_socket_departed();
}

void count_pooled_buffers(event_loop& loop, int delta) noexcept { loop.count_pooled_buffers(delta); }

void post_remote(event_loop& target, remote_message& m) noexcept { target.post_remote(m); }
event_loop* peer_loop(unsigned core) noexcept { return current_loop().peer(core); }

}  // namespace detail

clock::time_point now() noexcept { return detail::current_time(); }

backend_kind current_backend() { return detail::current_loop().backend(); }
std::size_t pending_timers() { return detail::current_loop().timers().size(); }

}  // namespace cogwheel

namespace cogwheel::detail {

loop_owner::loop_owner(const runtime_options& options) : loop_(new event_loop(options, 0)) {}
loop_owner::~loop_owner() { delete loop_; }

std::coroutine_handle<> loop_owner::finished(void* flag) noexcept {
  *static_cast<bool*>(flag) = true;
  current_loop().nudge();
  return std::noop_coroutine();
}

void loop_owner::run_until(const bool& done) {
  loop_->run_until([&] { return done; });
  loop_->destroy_spawned();
}

}  // namespace cogwheel::detail
