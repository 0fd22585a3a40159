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
  // Told of the nodes fire_all() fires, by runs: `count` consecutive nodes with this deadline
  // tick (a level-0 slot is one tick, so a run is typically a slot), told once the run ends:
  // how a loop measures lateness without a byte more per node and without a call per node.
  // Set by the queue's owner; may be null.
  using fire_observer = void (*)(void* context, tick_t deadline_tick, std::size_t count) noexcept;
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
    tick_t run_tick = 0;  // the current run of equal deadline ticks, for the observer
    std::size_t run = 0;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      timer_node* n = nodes_[i];
      if (n == nullptr) continue;
      nodes_[i] = nullptr;
      n->state_ = timer_node::state::idle;
      ++fired;
      if (n->tick_ != run_tick) {
        if (run != 0 && observer_ != nullptr) observer_(observer_context_, run_tick, run);
        run_tick = n->tick_;
        run = 0;
      }
      ++run;
      if (const timer_node::expire_fn fn = n->expire_callback(); fn != nullptr) fn(*n);
    }
    if (run != 0 && observer_ != nullptr) observer_(observer_context_, run_tick, run);
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
