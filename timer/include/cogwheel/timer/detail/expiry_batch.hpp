// The batch of nodes one advance() call has found expired, fired after the queue is consistent
// again. Separating "collect" from "fire" lets callbacks schedule, cancel and destroy any timer,
// including ones later in the same batch.
#pragma once

#include <cassert>
#include <cstddef>
#include <vector>

#include <cogwheel/timer/node.hpp>

namespace cogwheel::timer::detail {

class expiry_batch {
 public:
  // Told of each node as it fires (before its callback), with its deadline tick: how a loop
  // measures lateness without a byte more per node. Set by the queue's owner; may be null.
  using fire_observer = void (*)(void* context, tick_t deadline_tick) noexcept;
  void set_observer(fire_observer fn, void* context) noexcept {
    observer_ = fn;
    observer_context_ = context;
  }

  // Precondition: n is in no queue. Postcondition: n is due, at index n.pos_ of this batch.
  void add(timer_node& n) {
    n.state_ = timer_node::state::due;
    n.pos_ = static_cast<std::uint32_t>(nodes_.size());
    nodes_.push_back(&n);
  }

  // Takes a due node out of the batch (cancelled before its turn): it will not fire.
  void remove(timer_node& n) noexcept {
    assert(n.state_ == timer_node::state::due && nodes_[n.pos_] == &n);
    nodes_[n.pos_] = nullptr;
    n.state_ = timer_node::state::idle;
  }

  // Fires every node still in the batch, in the order added, and returns how many fired. Each
  // node is idle when its callback runs. Capacity is kept, so steady state allocates nothing.
  std::size_t fire_all() noexcept {
    std::size_t fired = 0;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      timer_node* n = nodes_[i];
      if (n == nullptr) continue;
      nodes_[i] = nullptr;
      n->state_ = timer_node::state::idle;
      ++fired;
      if (observer_ != nullptr) observer_(observer_context_, n->tick_);
      if (n->on_expire_ != nullptr) n->on_expire_(*n);
    }
    nodes_.clear();
    return fired;
  }

  bool empty() const noexcept { return nodes_.empty(); }
  std::size_t memory_bytes() const noexcept { return nodes_.capacity() * sizeof(timer_node*); }

 private:
  std::vector<timer_node*> nodes_;
  fire_observer observer_ = nullptr;
  void* observer_context_ = nullptr;
};

}  // namespace cogwheel::timer::detail
