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

#include <utility>

namespace cogwheel::detail {

class fd_operations;

// What an operation in flight on a descriptor puts into its owner's list.
class fd_operation_link {
 public:
  fd_operation_link() noexcept = default;
  fd_operation_link(const fd_operation_link&) = delete;
  fd_operation_link& operator=(const fd_operation_link&) = delete;
  ~fd_operation_link() { unlink(); }

  // Called by close_all() after unlinking: cancel, never resume anything from here.
  void (*on_close)(fd_operation_link&) noexcept = nullptr;

  bool linked() const noexcept { return next_ != nullptr; }
  void unlink() noexcept {
    if (next_ == nullptr) return;
    prev_->next_ = next_;
    next_->prev_ = prev_;
    prev_ = next_ = nullptr;
  }

 private:
  friend class fd_operations;
  fd_operation_link* prev_ = nullptr;
  fd_operation_link* next_ = nullptr;  // null iff not linked
};

class fd_operations {
 public:
  fd_operations() noexcept { head_.prev_ = head_.next_ = &head_; }
  fd_operations(const fd_operations&) = delete;
  fd_operations& operator=(const fd_operations&) = delete;
  // Takes o's operations (they stay linked, now here): a stream may move while it reads.
  fd_operations(fd_operations&& o) noexcept : fd_operations() { take(o); }
  fd_operations& operator=(fd_operations&& o) noexcept {
    if (this != &o) take(o);  // precondition: this list is empty (its owner was closed)
    return *this;
  }
  ~fd_operations() { close_all(); }

  bool empty() const noexcept { return head_.next_ == &head_; }

  void add(fd_operation_link& l) noexcept {
    l.prev_ = head_.prev_;
    l.next_ = &head_;
    head_.prev_->next_ = &l;
    head_.prev_ = &l;
  }

  // Unlinks and cancels every operation. Postcondition: empty().
  void close_all() noexcept {
    while (!empty()) {
      fd_operation_link& l = *head_.next_;
      l.unlink();
      l.on_close(l);
    }
  }

 private:
  void take(fd_operations& o) noexcept {
    if (o.empty()) return;
    head_.next_ = std::exchange(o.head_.next_, &o.head_);
    head_.prev_ = std::exchange(o.head_.prev_, &o.head_);
    head_.next_->prev_ = &head_;
    head_.prev_->next_ = &head_;
  }

  fd_operation_link head_;  // sentinel of a circular list; never "linked" to itself
};

}  // namespace cogwheel::detail
