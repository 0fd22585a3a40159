// A FIFO of coroutines ready to run, intrusive: each entry is a node inside whoever is waiting
// (an awaiter in a coroutine frame, a spawned task's promise), so posting allocates nothing and
// a frame destroyed while queued unlinks itself (no dangling handle is ever resumed).
// One loop thread only.
#pragma once

#include <coroutine>
#include <cstddef>

#include <cogwheel/runtime/continuation.hpp>

namespace cogwheel::detail {

class ready_queue;

class ready_node {
 public:
  ready_node() noexcept = default;
  ready_node(const ready_node&) = delete;
  ready_node& operator=(const ready_node&) = delete;
  ~ready_node() { unlink(); }

  bool queued() const noexcept { return next_ != nullptr; }
  void unlink() noexcept;

 private:
  friend class ready_queue;
  ready_node* prev_ = nullptr;
  ready_node* next_ = nullptr;  // null iff not queued
  continuation continuation_;
  ready_queue* queue_ = nullptr;
};

class ready_queue {
 public:
  ready_queue() noexcept { head_.prev_ = head_.next_ = &head_; }
  ready_queue(const ready_queue&) = delete;
  ready_queue& operator=(const ready_queue&) = delete;
  ~ready_queue() {
    clear();
    head_.prev_ = head_.next_ = nullptr;  // the sentinel is not a queued node
  }

  // Precondition: !n.queued().
  void push(ready_node& n, continuation c) noexcept {
    n.continuation_ = c;
    n.queue_ = this;
    n.prev_ = head_.prev_;
    n.next_ = &head_;
    head_.prev_->next_ = &n;
    head_.prev_ = &n;
    ++size_;
  }
  // Precondition: !empty(). Unlinks the oldest node and returns what it was to run.
  continuation pop() noexcept {
    ready_node* n = head_.next_;
    n->unlink();
    return n->continuation_;
  }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  void clear() noexcept {
    while (!empty()) pop();
  }

 private:
  friend class ready_node;
  ready_node head_;
  std::size_t size_ = 0;
};

inline void ready_node::unlink() noexcept {
  if (next_ == nullptr) return;
  prev_->next_ = next_;
  next_->prev_ = prev_;
  prev_ = next_ = nullptr;
  --queue_->size_;
}

}  // namespace cogwheel::detail
