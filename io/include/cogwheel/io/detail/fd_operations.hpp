// fd_operations: what cogwheel keeps of one socket (a tcp_stream's, a udp_socket's) besides
// its descriptor: the operations in flight on it, so that closing the descriptor stops them
// first; the socket's identity; and the loop whose backend watches it.
//
// Why: an SQE names its descriptor by number. A close() that only called ::close(fd) would
// leave in-flight operations holding the old file (the peer sees no FIN until they end) and
// let a follow-up SQE (write_all after a partial write) name a number the next accept() may
// already have reused, sending one connection's bytes to another. So:
//
//   - an operation links itself here when it starts and unlinks when it completes for good;
//   - close_all() unlinks every linked operation and cancels it: it gets no follow-up SQE and
//     completes soon with errc::operation_canceled (or with what it transferred, if that raced
//     ahead). Only then may the owner ::close() the number.
//
// Identity and home: a backend may remember things about a descriptor (epoll: registered in
// its set, made non-blocking). That memory belongs to the socket, not to the number: each
// request carries the socket's identity (never reused), so a socket that takes a closed one's
// number starts clean. Its home is the loop it was opened on or last used on: that core counts
// it as open (core_metrics::open_sockets), and a socket that moves to another core leaves the
// old loop's set, and its count, when its first operation starts on the new one.
//
// Threading: the list belongs to the loop thread the operations run on. An owner with
// operations in flight must be closed on that thread (checked: misuse aborts with a message);
// an owner with none may move to another core.
#pragma once

#include <cstdint>
#include <utility>

#include <cogwheel/runtime/detail/intrusive_list.hpp>
#include <cogwheel/runtime/detail/loop_services.hpp>

namespace cogwheel::detail {

// A socket found copied byte for byte rather than moved (two owners of one descriptor, each
// closing it): reported, then abort. g++ 12 does this to a temporary that owns a socket in a
// co_await expression (`co_await submit_to(1, [s = std::move(stream)] {...})`): the lambda is
// duplicated into the frame and both copies are destroyed. Name such a temporary first.
[[noreturn]] void abort_copied_bytewise() noexcept;

// What an operation in flight on a descriptor puts into its owner's list.
struct fd_operation_link : list_link {
  // Called by close_all() after unlinking: cancel, never resume anything from here.
  void (*on_close)(fd_operation_link&) noexcept = nullptr;
};

class fd_operations {
 public:
  fd_operations() noexcept = default;
  // Takes o's operations (they stay linked, now here): a stream may move while it reads. The
  // socket's identity and home come along; o keeps none.
  fd_operations(fd_operations&& o) noexcept
      : socket_(o.socket_), home_(std::exchange(o.home_, nullptr)), home_core_(o.home_core_) {
    if (!o.ops_.well_formed()) abort_copied_bytewise();
    ops_ = std::move(o.ops_);
  }
  // Precondition: this list is empty and the socket has left its home (its owner was closed).
  fd_operations& operator=(fd_operations&& o) noexcept {
    if (this != &o) {
      if (!o.ops_.well_formed()) abort_copied_bytewise();
      ops_ = std::move(o.ops_);
      socket_ = o.socket_;
      home_ = std::exchange(o.home_, nullptr);
      home_core_ = o.home_core_;
    }
    return *this;
  }
  ~fd_operations() { close_all(); }

  bool empty() const noexcept { return ops_.empty(); }
  // The socket's identity (io_request::socket); 0 until set by its owner.
  std::uint64_t socket() const noexcept { return socket_; }
  void set_socket(std::uint64_t id) noexcept { socket_ = id; }
  // The socket is opened on `loop` (nullptr: on no loop thread; then its first operation is
  // where it arrives).
  void open_on(event_loop* loop) noexcept {
    if (loop == nullptr) return;
    home_ = loop;
    home_core_ = socket_arrives(*loop);
  }
  // An operation on descriptor fd starts on `loop`: true when the socket arrives there (first
  // use, or from another loop, which then stops watching and counting it). The hot path is the
  // comparison.
  bool arrive(event_loop& loop, int fd) noexcept {
    if (home_ == &loop) return false;
    depart(fd, true);
    home_ = &loop;
    home_core_ = socket_arrives(loop);
    return true;
  }
  // The socket leaves its home: handed out (`unwatch`), or closing (not: a closed descriptor
  // leaves every epoll set by itself).
  void depart(int fd, bool unwatch) noexcept {
    if (home_ != nullptr) socket_departs(std::exchange(home_, nullptr), home_core_, fd, unwatch);
  }
  void add(fd_operation_link& l) noexcept { ops_.push_back(l); }
  // Unlinks and cancels every operation. Postcondition: empty().
  void close_all() noexcept {
    ops_.drain([](fd_operation_link& l) { l.on_close(l); });
  }

 private:
  intrusive_list<fd_operation_link> ops_;
  std::uint64_t socket_ = 0;
  event_loop* home_ = nullptr;  // watches and counts it; compared, followed only while alive
  unsigned home_core_ = 0;
};

}  // namespace cogwheel::detail
