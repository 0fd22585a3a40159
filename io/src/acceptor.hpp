// acceptor: the state behind a tcp_listener: the listening socket, the accept SQE, connections
// accepted before anyone asked for them, the accept() calls waiting, and the back-off timer
// used when descriptors run out. Heap-allocated so its address (the SQE's user_data, a timer
// node) stays put while the listener object moves.
//
// Back-pressure: at most `max_unclaimed` connections are held accepted but not yet taken by an
// accept() call. One single-shot accept SQE is in flight at a time, armed only while there is
// room, so the bound is exact; when it is reached the kernel's backlog applies, and accepting
// resumes as soon as accept() takes a connection. Single-shot SQEs, up to `accept_batch` at a
// time, each counted as taking room: a multishot accept would take a whole burst of
// connections in one go, past any bound.
#pragma once

#include <deque>

#include <cogwheel/io/tcp.hpp>
#include <cogwheel/runtime/detail/loop_services.hpp>
#include <cogwheel/timer/node.hpp>

namespace cogwheel::detail {

class acceptor : private io_completion, private timer::timer_node, private shutdown_hook {
 public:
  acceptor(int fd, std::size_t max_unclaimed) noexcept;
  acceptor(const acceptor&) = delete;
  acceptor& operator=(const acceptor&) = delete;
  // Withdraws the accept SQE (waiting for its completion), closes connections nobody took,
  // fails waiting accept() calls with errc::operation_canceled, closes the socket.
  ~acceptor();

  int fd() const noexcept { return fd_; }

  // A connection or an error that is already there, if any.
  bool try_take(accept_outcome& out) noexcept;
  void wait(accept_operation& op);
  void unwait(accept_operation& op) noexcept;

 private:
  static constexpr std::chrono::milliseconds min_backoff{1};
  static constexpr std::chrono::milliseconds max_backoff{1000};
  // Accept SQEs in flight at most: a burst of connections is taken this many per iteration.
  static constexpr unsigned accept_batch = 8;

  void bind_loop();
  void release_loop() noexcept;
  static void on_loop_shutdown(shutdown_hook& h) noexcept;
  // Arms accept SQEs while there is room (in-flight ones count as taken) and no back-off runs.
  void arm_if_room();
  void deliver(accept_outcome outcome) noexcept;
  static void on_accept(io_completion& c, int res, unsigned flags) noexcept;
  static void on_backoff_over(timer::timer_node& n) noexcept;

  int fd_;
  event_loop* loop_ = nullptr;
  std::size_t max_unclaimed_;              // >= 1
  std::deque<accept_outcome> accepted_;   // connections (or one error) nobody has taken yet
  std::deque<accept_operation*> waiting_;  // accept() calls in arrival order
  clock::duration backoff_{0};
  unsigned armed_ = 0;  // accepts in flight, all submissions of accept_
  io_request accept_;  // .socket: the listening socket's identity
  bool closing_ = false;
};

}  // namespace cogwheel::detail
