// The sockets c-ares opens, watched by the loop: for each socket and direction c-ares asks for
// (its sock_state callback), one poll operation on the loop's backend (io_uring POLL_ADD, or
// epoll readiness). When one completes, the resolver lets c-ares read or write that socket
// (ares_process_fd): c-ares' own non-blocking calls, never a wait. The resolver watches its
// timerfd here too (want/shutdown only: no socket function ever names it).
//
// c-ares creates and closes its sockets through socket_watchers::functions, so that a socket's
// watchers are withdrawn before its number is closed. A socket's polls carry its identity
// (io_request::socket), so a socket that takes a closed one's number is new to the backend.
//
// Ownership: watchers are heap objects owned by this set. A watcher whose socket closed while
// its poll was in flight stays (retired) until that poll's completion arrives; shutdown() waits
// for those.
#pragma once

#include <ares.h>

#include <vector>

#include <cogwheel/runtime/detail/io_request.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>

namespace cogwheel::detail {

class socket_watchers {
 public:
  // process(ctx, read_fd, write_fd) is called when a watched socket is ready (the other is
  // ARES_SOCKET_BAD).
  using process_fn = void (*)(void* ctx, ares_socket_t read_fd, ares_socket_t write_fd) noexcept;

  socket_watchers(event_loop& loop, process_fn process, void* ctx) noexcept
      : loop_(&loop), process_(process), ctx_(ctx) {}
  socket_watchers(const socket_watchers&) = delete;
  socket_watchers& operator=(const socket_watchers&) = delete;
  // Precondition: shutdown() has run.
  ~socket_watchers() = default;

  // c-ares' sock_state callback: watch fd for these directions from now on (false, false: stop).
  void want(ares_socket_t fd, bool readable, bool writable);
  // Stops watching fd for good (c-ares is about to close it).
  void forget(ares_socket_t fd) noexcept;
  // Withdraws every poll and waits for their completions. Afterwards nothing is in flight.
  void shutdown() noexcept;

  // For ares_set_socket_functions, with this set as user data.
  static const ares_socket_functions functions;

 private:
  struct watcher;
  watcher* find(ares_socket_t fd, short events) noexcept;
  void set_wanted(ares_socket_t fd, short events, bool wanted);
  void submit(watcher& w);
  void retire(watcher& w) noexcept;
  static void on_poll(io_completion& c, int res, unsigned flags) noexcept;

  event_loop* loop_;
  process_fn process_;
  void* ctx_;
  std::vector<watcher*> active_;   // at most one per (fd, direction)
  std::vector<watcher*> retired_;  // socket gone, poll completion still to come
  bool shutting_down_ = false;
};

}  // namespace cogwheel::detail
