// intrusive_list<Node>: a circular doubly linked list of nodes that live in their owners (a
// waiter in a coroutine frame, an operation, a listener, a spawned task's promise), so linking
// allocates nothing and a node destroyed while linked unlinks itself. One loop thread only.
// The project's one linked list: the ready queue, the spawned tasks, deadline waiters, shutdown
// hooks, a socket's operations, the resolver's waiters, the epoll backend's waiting requests
// and the Redis connection's reply waiters are all built on it.
//
// Node derives from list_link. The list is a sentinel link; moving a list moves its nodes.
#pragma once

#include <utility>

namespace cogwheel::detail {

class list_link {
 public:
  list_link() noexcept = default;
  list_link(const list_link&) = delete;
  list_link& operator=(const list_link&) = delete;
  ~list_link() { unlink(); }

  bool linked() const noexcept { return next_ != nullptr; }
  // A no-op when not linked.
  void unlink() noexcept {
    if (next_ == nullptr) return;
    prev_->next_ = next_;
    next_->prev_ = prev_;
    prev_ = next_ = nullptr;
  }

 private:
  template <class>
  friend class intrusive_list;
  list_link* prev_ = nullptr;
  list_link* next_ = nullptr;  // null iff not linked
};

template <class Node>
class intrusive_list {
 public:
  intrusive_list() noexcept { head_.prev_ = head_.next_ = &head_; }
  intrusive_list(const intrusive_list&) = delete;
  intrusive_list& operator=(const intrusive_list&) = delete;
  // Takes o's nodes (they stay linked, now here).
  intrusive_list(intrusive_list&& o) noexcept : intrusive_list() { take(o); }
  // Precondition: this list is empty.
  intrusive_list& operator=(intrusive_list&& o) noexcept {
    if (this != &o) take(o);
    return *this;
  }
  // Nodes still linked are let go (unlinked), not touched otherwise.
  ~intrusive_list() {
    while (!empty()) head_.next_->unlink();
    head_.prev_ = head_.next_ = nullptr;  // the sentinel is not a linked node
  }

  bool empty() const noexcept { return head_.next_ == &head_; }
  // False for a list that was copied byte for byte instead of moved: its ends still point at
  // the original's sentinel. (g++ 12 makes such copies of a temporary in a co_await expression:
  // see fd_operations.)
  bool well_formed() const noexcept { return head_.next_->prev_ == &head_ && head_.prev_->next_ == &head_; }
  // Precondition: !empty().
  Node& front() noexcept { return static_cast<Node&>(*head_.next_); }
  // The oldest node, or null when empty.
  Node* first() noexcept { return empty() ? nullptr : &front(); }
  // The node after n, or null when n is the newest. Precondition: n is linked in this list.
  Node* after(Node& n) noexcept {
    list_link* next = static_cast<list_link&>(n).next_;
    return next == &head_ ? nullptr : static_cast<Node*>(next);
  }
  // Precondition: !empty(). Unlinks the oldest node and returns it.
  Node& pop_front() noexcept {
    Node& n = front();
    static_cast<list_link&>(n).unlink();
    return n;
  }

  // Precondition: !n.linked().
  void push_back(Node& n) noexcept {
    list_link& l = n;
    l.prev_ = head_.prev_;
    l.next_ = &head_;
    head_.prev_->next_ = &l;
    head_.prev_ = &l;
  }

  // Unlinks each node before calling f on it, until the list is empty: f may unlink or destroy
  // other nodes, and nodes f links meanwhile are taken too.
  template <class F>
  void drain(F&& f) {
    while (!empty()) f(pop_front());
  }

 private:
  void take(intrusive_list& o) noexcept {
    if (o.empty()) return;
    head_.next_ = std::exchange(o.head_.next_, &o.head_);
    head_.prev_ = std::exchange(o.head_.prev_, &o.head_);
    head_.next_->prev_ = &head_;
    head_.prev_->next_ = &head_;
  }

  list_link head_;
};

}  // namespace cogwheel::detail
