#include <cogwheel/timer/heap.hpp>

namespace cogwheel::timer {

timer_heap::timer_heap(clock::duration tick, clock::time_point start)
    : scale_(tick), elapsed_(scale_.now_tick(start)) {}

timer_heap::~timer_heap() {
  for (const entry& e : heap_) e.node->state_ = timer_node::state::idle;
}

void timer_heap::push(timer_node& n, tick_t t) {
  n.tick_ = t;
  n.state_ = timer_node::state::queued;
  heap_.push_back(entry{t, &n});
  sift_up(heap_.size() - 1, entry{t, &n});
}

void timer_heap::sift_up(std::size_t i, entry e) noexcept {
  while (i > 0) {
    const std::size_t parent = (i - 1) / arity;
    if (heap_[parent].tick <= e.tick) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, e);
}

void timer_heap::sift_down(std::size_t i, entry e) noexcept {
  const std::size_t n = heap_.size();
  for (;;) {
    const std::size_t first = i * arity + 1;
    if (first >= n) break;
    const std::size_t last = first + arity < n ? first + arity : n;
    std::size_t best = first;
    for (std::size_t c = first + 1; c < last; ++c)
      if (heap_[c].tick < heap_[best].tick) best = c;
    if (heap_[best].tick >= e.tick) break;
    place(i, heap_[best]);
    i = best;
  }
  place(i, e);
}

void timer_heap::erase(timer_node& n) noexcept {
  const std::size_t i = n.pos_;
  assert(i < heap_.size() && heap_[i].node == &n);
  n.state_ = timer_node::state::idle;
  const entry last = heap_.back();
  heap_.pop_back();
  if (i == heap_.size()) return;
  if (i > 0 && heap_[(i - 1) / arity].tick > last.tick)
    sift_up(i, last);
  else
    sift_down(i, last);
}

void timer_heap::reschedule(timer_node& n, clock::time_point deadline) {
  const tick_t t = scale_.deadline_tick(deadline);
  if (n.state_ != timer_node::state::queued) {
    cancel(n);
    push(n, t);
    return;
  }
  const tick_t old = n.tick_;
  n.tick_ = t;
  if (t < old)
    sift_up(n.pos_, entry{t, &n});
  else
    sift_down(n.pos_, entry{t, &n});
}

std::size_t timer_heap::advance(clock::time_point now_tp) {
  assert(!advancing_ && "advance() called from an expiry callback");
  const tick_t now = scale_.now_tick(now_tp);
  if (now < elapsed_) return 0;
  advancing_ = true;
  elapsed_ = now;
  while (!heap_.empty() && heap_.front().tick <= now) {
    timer_node& n = *heap_.front().node;
    erase(n);
    batch_.add(n);
  }
  const std::size_t fired = batch_.fire_all();
  advancing_ = false;
  return fired;
}

}  // namespace cogwheel::timer
