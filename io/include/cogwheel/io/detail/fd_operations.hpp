// fd_operations: the operations in flight on one descriptor (a tcp_stream's, a udp_socket's),
// so that closing the descriptor stops them first.
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
// Threading: the list belongs to the loop thread the operations run on. An owner with
// operations in flight must be closed on that thread (checked: misuse aborts with a message);
// an owner with none may move to another core.
#pragma once

#include <cogwheel/runtime/detail/intrusive_list.hpp>

namespace cogwheel::detail {

// What an operation in flight on a descriptor puts into its owner's list.
struct fd_operation_link : list_link {
  // Called by close_all() after unlinking: cancel, never resume anything from here.
  void (*on_close)(fd_operation_link&) noexcept = nullptr;
};

class fd_operations {
 public:
  fd_operations() noexcept = default;
  // Takes o's operations (they stay linked, now here): a stream may move while it reads.
  fd_operations(fd_operations&& o) noexcept = default;
  // Precondition: this list is empty (its owner was closed).
  fd_operations& operator=(fd_operations&& o) noexcept = default;
  ~fd_operations() { close_all(); }

  bool empty() const noexcept { return ops_.empty(); }
  void add(fd_operation_link& l) noexcept { ops_.push_back(l); }
  // Unlinks and cancels every operation. Postcondition: empty().
  void close_all() noexcept {
    ops_.drain([](fd_operation_link& l) { l.on_close(l); });
  }

 private:
  intrusive_list<fd_operation_link> ops_;
};

}  // namespace cogwheel::detail
