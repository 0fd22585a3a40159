/// @file
/// timer_node: the intrusive hook a timer queue links.
#pragma once

#include <cstdint>

#include <cogwheel/timer/ticks.hpp>

namespace cogwheel::timer {

class timer_wheel;
class timer_heap;
namespace detail {
class expiry_batch;
}

/// The intrusive hook a timer queue links. It lives inside its owner (typically an awaiter
/// inside a coroutine frame), so scheduling a timer allocates nothing.
///
/// Ownership: the node belongs to its owner; a queue only refers to it between schedule and
/// fire/cancel. Destroying a node that is still scheduled is a precondition violation that is
/// checked in every build (the process aborts with a message): a dangling pointer inside a
/// queue would otherwise corrupt memory much later. Owners cancel in their destructors.
class timer_node {
 public:
  /// Called once when the timer expires, after the node has left the queue (so the callback may
  /// schedule it again, or destroy it). Runs inside advance(); must not throw.
  using expire_fn = void (*)(timer_node&) noexcept;

  /// An idle node that calls `on_expire` when it fires (set it later with set_on_expire()).
  explicit timer_node(expire_fn on_expire = nullptr) noexcept : on_expire_(on_expire) {}
  timer_node(const timer_node&) = delete;             ///< Not copyable: a queue holds its address.
  timer_node& operator=(const timer_node&) = delete;  ///< Not copyable: a queue holds its address.
  /// Precondition, checked in every build: not scheduled (the process aborts otherwise).
  ~timer_node() {
    if (state_ != state::idle) destroyed_while_scheduled();
  }

  /// Sets the expiry callback. Precondition: not scheduled.
  void set_on_expire(expire_fn fn) noexcept { on_expire_ = fn; }

  /// True from schedule until it fires or is cancelled.
  bool scheduled() const noexcept { return state_ != state::idle; }

  /// The deadline in ticks of the queue that holds it (meaningful while scheduled).
  tick_t deadline_tick() const noexcept { return tick_; }

 private:
  friend class timer_wheel;
  friend class timer_heap;
  friend class detail::expiry_batch;

  enum class state : std::uint8_t {
    idle,      // in no queue
    queued,    // in a wheel slot, the wheel's overdue list, or a heap
    due,       // expired, in the batch that advance() is about to fire
  };

  [[noreturn]] static void destroyed_while_scheduled() noexcept;

  // The queue's bookkeeping: 16 bytes. pos_ is the index in the slot's vector, the heap array
  // or the due batch; slot_ names the wheel slot (unused by the heap).
  tick_t tick_ = 0;
  std::uint32_t pos_ = 0;
  std::uint16_t slot_ = 0;
  state state_ = state::idle;
  expire_fn on_expire_;
};

static_assert(sizeof(timer_node) <= 32, "the wheel's bookkeeping per node is at most 32 bytes");

}  // namespace cogwheel::timer
