// acceptor: the state behind a tcp_listener: the listening socket, the multishot accept SQE,
// connections accepted before anyone asked for them, the accept() calls waiting, and the
// back-off timer used when descriptors run out. Heap-allocated so its address (the SQE's
// user_data, a timer node) stays put while the listener object moves.
#pragma once

#include <deque>

#include <cogwheel/io/tcp.hpp>
#include <cogwheel/runtime/detail/event_loop.hpp>
#include <cogwheel/timer/node.hpp>

namespace cogwheel::detail {

class acceptor : private io_completion, private timer::timer_node, private shutdown_hook {
 public:
  explicit acceptor(int fd) noexcept;
  acceptor(const acceptor&) = delete;
  acceptor& operator=(const acceptor&) = delete;
  // Withdraws the accept SQE (waiting for its completion), closes connections nobody took,
  // fails waiting accept() calls with errc::operation_canceled, closes the socket.
  ~acceptor();

  int fd() const noexcept { return fd_; }

  // A connection (>= 0) or an error (-errno) that is already there, if any.
  bool try_take(int& out) noexcept;
  void wait(accept_operation& op);
  void unwait(accept_operation& op) noexcept;

 private:
  static constexpr std::chrono::milliseconds min_backoff{1};
  static constexpr std::chrono::milliseconds max_backoff{1000};

  void bind_loop();
  void release_loop() noexcept;
  static void on_loop_shutdown(shutdown_hook& h) noexcept;
  void arm();
  void deliver(int fd_or_error) noexcept;
  static void on_accept(io_completion& c, int res, unsigned flags) noexcept;
  static void on_backoff_over(timer::timer_node& n) noexcept;

  int fd_;
  event_loop* loop_ = nullptr;
  std::deque<int> accepted_;              // connections (or one -errno) nobody has taken yet
  std::deque<accept_operation*> waiting_;  // accept() calls in arrival order
  clock::duration backoff_{0};
  bool armed_ = false;
  bool multishot_ = true;
  bool closing_ = false;
};

}  // namespace cogwheel::detail
