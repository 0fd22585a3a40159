/// @file
/// timer_node: the intrusive hook a timer queue links.
#pragma once

#include <cstdint>

#include <cogwheel/timer/detail/expire_registry.hpp>
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

  /// Names a callback at compile time, for the constructor and set_on_expire():
  /// `timer_node(timer_node::calls<&my_type::on_expire>{})`. The cheap way: the callback's index
  /// in the process-wide callback table is looked up once per callback, not once per node.
  template <expire_fn F>
  struct calls {};

  /// An idle node that calls `on_expire` when it fires (set it later with set_on_expire()).
  /// The node stores the callback as a 1-byte index into a process-wide table (that keeps the
  /// node 16 bytes): a process may use at most 255 distinct callbacks, however many nodes use
  /// them, and aborts with a message on the 256th. Looks the callback up in that table (a short
  /// scan, and a lock the first time a callback is seen); calls<F> skips the scan.
  explicit timer_node(expire_fn on_expire) noexcept
      : on_expire_(detail::register_expire_callback(on_expire)) {}
  /// An idle node without a callback (set it later with set_on_expire()).
  timer_node() noexcept : on_expire_(0) {}
  /// An idle node that calls F when it fires, without a table lookup.
  template <expire_fn F>
  explicit timer_node(calls<F>) noexcept : on_expire_(detail::expire_index<F>()) {}
  timer_node(const timer_node&) = delete;             ///< Not copyable: a queue holds its address.
  timer_node& operator=(const timer_node&) = delete;  ///< Not copyable: a queue holds its address.
  /// Precondition, checked in every build: not scheduled (the process aborts otherwise).
  ~timer_node() {
    if (state_ != state::idle) destroyed_while_scheduled();
  }

  /// Sets the expiry callback (looked up as by the constructor). Precondition: not scheduled.
  void set_on_expire(expire_fn fn) noexcept { on_expire_ = detail::register_expire_callback(fn); }
  /// Sets the expiry callback to F without a table lookup. Precondition: not scheduled.
  template <expire_fn F>
  void set_on_expire(calls<F>) noexcept {
    on_expire_ = detail::expire_index<F>();
  }

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

  // The callback, for expiry_batch::fire_all(): the function is the registry's entry at this
  // index (0: none).
  expire_fn expire_callback() const noexcept { return detail::expire_callback_at(on_expire_); }

  // 16 bytes in all. pos_ is the index in the slot's array, the heap array or the due batch;
  // slot_ names the wheel slot (unused by the heap); on_expire_ indexes detail::expire_table.
  tick_t tick_ = 0;
  std::uint32_t pos_ = 0;
  std::uint16_t slot_ = 0;
  state state_ = state::idle;
  std::uint8_t on_expire_;
};

// With the wheel's 8-byte slot entry, a pending timer costs 24 bytes of queue bookkeeping.
static_assert(sizeof(timer_node) == 16, "timer_node is 16 bytes: tick, pos, slot, state, callback index");

}  // namespace cogwheel::timer
