// A FIFO of coroutines ready to run, intrusive: each entry is a node inside whoever is waiting
// (an awaiter in a coroutine frame, a spawned task's promise), so posting allocates nothing and
// a frame destroyed while queued unlinks itself (no dangling handle is ever resumed).
// One loop thread only.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/intrusive_list.hpp>

namespace cogwheel::detail {

class ready_queue;
class ready_batch;
class ready_node;

// A waiter's place in the loop's expired batch (ready_batch): what to run, and the links. A node
// destroyed while queued unlinks itself. 32 bytes: a sleep holds one, so every sleeping
// coroutine's frame does, so its size is paid per sleeper; the batch keeps no count, so its nodes need no way
// back to it.
class batch_node : private list_link {
 public:
  batch_node() noexcept : continuation_() {}
  ~batch_node() { list_link::unlink(); }

  bool queued() const noexcept { return linked(); }
  // Sets what the node runs when popped, ahead of a push(n) without one: a waiter that knows
  // its continuation when it starts keeps it here instead of in a copy of its own (24 bytes
  // less in every frame that waits so). Overwrites a kept word.
  void prepare(continuation c) noexcept { std::construct_at(&continuation_, c); }
  // What prepare() (or the last push) set.
  const continuation& prepared() const noexcept { return continuation_; }
  // Before prepare(): one word its owner keeps in the continuation's bytes instead of in a field
  // of its own (a sleep's deadline: 8 bytes less in every sleeping frame). kept() is valid from
  // keep() until prepare() (or a push).
  void keep(std::int64_t word) noexcept { kept_ = word; }
  std::int64_t kept() const noexcept { return kept_; }

 private:
  friend class ready_queue;
  friend class ready_batch;
  friend class ready_node;
  friend class intrusive_list<batch_node>;
  friend class intrusive_list<ready_node>;
  union {
    continuation continuation_;  // what pop() returns
    std::int64_t kept_;          // until prepare(): the owner's word (keep())
  };
};

// A node of the ready queue (or, posted there, of the expired batch). A queued node knows its
// queue, so a node unlinked from outside (its frame destroyed) keeps the queue's count right;
// in the expired batch, which counts nothing, queue_ is null.
class ready_node : public batch_node {
 public:
  ready_node() noexcept = default;
  ~ready_node() { unlink(); }

  void unlink() noexcept;

 private:
  friend class ready_queue;
  friend class ready_batch;
  ready_queue* queue_ = nullptr;
};

// The loop's expired batch: a FIFO like ready_queue that keeps no count (it is always run in
// full), so that its nodes can be batch_nodes.
class ready_batch {
 public:
  ready_batch() noexcept = default;
  // Nodes still queued are let go (unlinked), not run.
  ~ready_batch() { clear(); }

  // Queues n with the continuation n.prepare() gave it. Precondition: !n.queued().
  void push(batch_node& n) noexcept { nodes_.push_back(n); }
  // A ready_node: counted by no queue while here. Precondition: !n.queued().
  void push(ready_node& n, continuation c) noexcept {
    n.prepare(c);
    n.queue_ = nullptr;
    nodes_.push_back(n);
  }
  // Precondition: !empty(). Unlinks the oldest node and returns what it was to run.
  continuation pop() noexcept { return nodes_.pop_front().continuation_; }
  bool empty() const noexcept { return nodes_.empty(); }
  void clear() noexcept {
    while (!empty()) pop();
  }

 private:
  intrusive_list<batch_node> nodes_;
};

class ready_queue {
 public:
  ready_queue() noexcept = default;
  // Nodes still queued are let go (unlinked), not run.
  ~ready_queue() { clear(); }

  // Precondition: !n.queued().
  void push(ready_node& n, continuation c) noexcept {
    n.prepare(c);
    push(n);
  }
  // Queues n with the continuation n.prepare() gave it. Precondition: !n.queued().
  void push(ready_node& n) noexcept {
    n.queue_ = this;
    nodes_.push_back(n);
    ++size_;
  }
  // Precondition: !empty(). Unlinks the oldest node and returns what it was to run.
  continuation pop() noexcept {
    ready_node& n = nodes_.pop_front();
    --size_;
    return n.continuation_;
  }
  bool empty() const noexcept { return nodes_.empty(); }
  std::size_t size() const noexcept { return size_; }
  void clear() noexcept {
    while (!empty()) pop();
  }

 private:
  friend class ready_node;
  intrusive_list<ready_node> nodes_;
  std::size_t size_ = 0;  // nodes_'s length, kept for the loop's per-iteration budget
};

inline void ready_node::unlink() noexcept {
  if (!queued()) return;
  batch_node::list_link::unlink();
  if (queue_ != nullptr) --queue_->size_;
}

}  // namespace cogwheel::detail
