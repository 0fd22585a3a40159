/// @file
/// cogwheel::channel<T>: a bounded multi-producer multi-consumer queue shared by every core of
/// a runtime, with back-pressure, close, and sends and receives that are cancellable operations.
#pragma once

#include <cassert>
#include <coroutine>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/waiter.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/result.hpp>

namespace cogwheel {

/// A bounded FIFO channel, multi-producer and multi-consumer, usable from every core (try_send,
/// try_receive and close from any thread). send() waits while it is full, receive() while it is
/// empty; waiters are served in FIFO order. The ring of `capacity` items is allocated once, by
/// the constructor; a message allocates nothing (waiters are nodes in the awaiting frames).
///
/// A wait that is woken is handed a reservation, not the value: a receiver woken by a send has
/// an item set aside for it in the ring, a sender woken by a receive a free slot; each takes or
/// fills it when it resumes. So a cut wait takes nothing: a cut receive consumes no item, a cut
/// send enqueues nothing. A wait cut after it was woken completes with what it was woken for
/// (the operation protocol: what raced ahead is not lost); one whose frame is destroyed between
/// its wake-up and its resumption hands its reservation to the next waiter (or back to the
/// channel).
///
/// close(): sends fail from then on with errc::broken_pipe (the value is dropped); receives
/// take what is queued, then fail with errc::broken_pipe. A sender woken before the close but
/// resumed after it fails too.
///
/// T must be nothrow move-constructible (items move under the channel's lock). Precondition of
/// the destructor: no task waits on it; items still queued are destroyed with it.
template <class T>
class channel {
  static_assert(std::is_nothrow_move_constructible_v<T>, "channel<T> moves items under its lock");

 public:
  class send_operation;
  class receive_operation;

  /// A channel holding up to `capacity` items. Precondition: capacity >= 1.
  explicit channel(std::size_t capacity) : ring_(new slot[capacity]), capacity_(capacity) {
    assert(capacity >= 1);
  }
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;
  ~channel() {
    while (size_ > 0) pop_front();
  }

  /// Queues `value`, waiting while the channel is full: result<void>, errc::broken_pipe once
  /// closed, errc::operation_canceled when the wait was cut (the value is then dropped).
  send_operation send(T value) noexcept { return send_operation(*this, std::move(value)); }
  /// Takes the oldest item, waiting while the channel is empty: result<T>, errc::broken_pipe
  /// once closed and drained, errc::operation_canceled when the wait was cut.
  receive_operation receive() noexcept { return receive_operation(*this); }

  /// Queues `value` (moving from it) if there is room and the channel is open; false, with
  /// `value` untouched, when full or closed. Any thread.
  bool try_send(T& value) noexcept {
    detail::spin_guard g(lock_);
    if (closed_ || size_ + reserved_slots_ == capacity_) return false;
    push_back(value);
    wake_receiver();
    return true;
  }
  /// The oldest item not set aside for a woken receiver, if any. Any thread.
  std::optional<T> try_receive() noexcept {
    detail::spin_guard g(lock_);
    if (size_ == reserved_items_) return std::nullopt;
    std::optional<T> v(pop_front());
    wake_sender();
    return v;
  }
  /// Closes the channel: waiting senders fail, and waiting receivers too (none waits while
  /// items are there to take). Idempotent. Any thread.
  void close() noexcept {
    detail::spin_guard g(lock_);
    closed_ = true;
    while (!senders_.empty()) detail::hand(senders_.pop_front(), detail::waiter::outcome::refused);
    while (!receivers_.empty()) detail::hand(receivers_.pop_front(), detail::waiter::outcome::refused);
  }

  /// Items queued (a snapshot when other cores are at work).
  std::size_t size() const noexcept {
    detail::spin_guard g(lock_);
    return size_;
  }
  /// The most items it holds.
  std::size_t capacity() const noexcept { return capacity_; }
  /// Whether close() was called.
  bool closed() const noexcept {
    detail::spin_guard g(lock_);
    return closed_;
  }

 private:
  struct slot {
    alignas(T) unsigned char bytes[sizeof(T)];
  };
  T* at(std::size_t i) noexcept { return std::launder(reinterpret_cast<T*>(ring_[i].bytes)); }

  // --- all below: lock held ---
  void push_back(T& value) noexcept {
    std::size_t i = head_ + size_;
    if (i >= capacity_) i -= capacity_;
    ::new (static_cast<void*>(ring_[i].bytes)) T(std::move(value));
    ++size_;
  }
  T pop_front() noexcept {
    T* p = at(head_);
    T v(std::move(*p));
    p->~T();
    if (++head_ == capacity_) head_ = 0;
    --size_;
    return v;
  }
  // An item nobody has claimed and a receiver waiting: set it aside for the oldest receiver.
  void wake_receiver() noexcept {
    if (receivers_.empty() || size_ == reserved_items_) return;
    ++reserved_items_;
    detail::hand(receivers_.pop_front(), detail::waiter::outcome::granted);
  }
  // A slot nobody has claimed and a sender waiting: set it aside for the oldest sender.
  void wake_sender() noexcept {
    if (senders_.empty() || size_ + reserved_slots_ == capacity_) return;
    ++reserved_slots_;
    detail::hand(senders_.pop_front(), detail::waiter::outcome::granted);
  }

  mutable detail::spin_lock lock_;
  std::unique_ptr<slot[]> ring_;
  const std::size_t capacity_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;            // items in the ring (reserved ones included)
  std::size_t reserved_items_ = 0;  // of those, set aside for woken receivers
  std::size_t reserved_slots_ = 0;  // free slots set aside for woken senders
  bool closed_ = false;
  detail::wait_list senders_;    // only while full
  detail::wait_list receivers_;  // only while nothing unclaimed is queued
};

/// What channel::send() returns: a cancellable operation (see operation.hpp) yielding
/// result<void>. Awaited once; movable only before it is awaited.
template <class T>
class channel<T>::send_operation : public operation<send_operation> {
 public:
  /// A send of `value` into `ch`, started when awaited (what channel::send() returns).
  send_operation(channel& ch, T value) noexcept : ch_(&ch), value_(std::move(value)) {}
  /// Before it is awaited only.
  send_operation(send_operation&& o) noexcept
      : operation<send_operation>(std::move(o)), ch_(o.ch_), value_(std::move(o.value_)) {}
  send_operation& operator=(send_operation&&) = delete;
  /// A wait still queued leaves the queue; a slot set aside for this send but not yet filled
  /// (the frame went away before it resumed) goes to the next sender.
  ~send_operation() {
    if (!in_flight_) return;
    detail::spin_guard g(ch_->lock_);
    if (w_.state == detail::waiter::phase::waiting) {
      ch_->senders_.remove(w_);
    } else if (w_.state == detail::waiter::phase::handed) {
      detail::unqueue(w_);
      if (w_.result == detail::waiter::outcome::granted) {
        --ch_->reserved_slots_;
        ch_->wake_sender();
      }
    }
  }

  /// Part of the operation protocol: queues the value at once when there is room, else waits.
  std::coroutine_handle<> start(continuation c) noexcept {
    {
      detail::spin_guard g(ch_->lock_);
      if (ch_->closed_) {
        outcome_ = errc::broken_pipe;
      } else if (ch_->size_ + ch_->reserved_slots_ < ch_->capacity_) {
        ch_->push_back(value_);
        ch_->wake_receiver();
      } else {
        done_ = c;
        detail::prepare_wait(w_, continuation(&send_operation::on_resume, this));
        ch_->senders_.push_back(w_);
        in_flight_ = true;
        return std::noop_coroutine();
      }
    }
    return c.complete();
  }
  /// Part of the operation protocol: a wait still queued completes with
  /// errc::operation_canceled, enqueuing nothing.
  void cancel() noexcept {
    if (!in_flight_) return;
    detail::spin_guard g(ch_->lock_);
    if (w_.state == detail::waiter::phase::waiting) detail::cancel_waiting(ch_->senders_, w_);
  }
  /// Part of the operation protocol.
  cogwheel::result<void> result() const noexcept { return outcome_; }

 private:
  static std::coroutine_handle<> on_resume(void* p) noexcept {
    auto& self = *static_cast<send_operation*>(p);
    self.in_flight_ = false;
    self.w_.state = detail::waiter::phase::done;
    switch (self.w_.result) {
      case detail::waiter::outcome::granted: {
        channel& ch = *self.ch_;
        detail::spin_guard g(ch.lock_);
        --ch.reserved_slots_;
        if (ch.closed_) {
          self.outcome_ = errc::broken_pipe;
        } else {
          ch.push_back(self.value_);
          ch.wake_receiver();
        }
        break;
      }
      case detail::waiter::outcome::refused: self.outcome_ = errc::broken_pipe; break;
      case detail::waiter::outcome::canceled: self.outcome_ = errc::operation_canceled; break;
    }
    return self.done_.complete();
  }

  channel* ch_;
  T value_;
  cogwheel::result<void> outcome_;
  bool in_flight_ = false;  // queued and not yet resumed; home thread only
  continuation done_;
  detail::waiter w_;
};

/// What channel::receive() returns: a cancellable operation (see operation.hpp) yielding
/// result<T>. Awaited once; movable only before it is awaited.
template <class T>
class channel<T>::receive_operation : public operation<receive_operation> {
 public:
  /// A receive from `ch`, started when awaited (what channel::receive() returns).
  explicit receive_operation(channel& ch) noexcept : ch_(&ch) {}
  /// Before it is awaited only.
  receive_operation(receive_operation&& o) noexcept : operation<receive_operation>(std::move(o)), ch_(o.ch_) {}
  receive_operation& operator=(receive_operation&&) = delete;
  /// A wait still queued leaves the queue; an item set aside for this receive but not yet
  /// taken (the frame went away before it resumed) goes to the next receiver, or stays queued.
  ~receive_operation() {
    if (!in_flight_) return;
    detail::spin_guard g(ch_->lock_);
    if (w_.state == detail::waiter::phase::waiting) {
      ch_->receivers_.remove(w_);
    } else if (w_.state == detail::waiter::phase::handed) {
      detail::unqueue(w_);
      if (w_.result == detail::waiter::outcome::granted) {
        --ch_->reserved_items_;
        ch_->wake_receiver();
      }
    }
  }

  /// Part of the operation protocol: takes an unclaimed item at once, else waits (or fails
  /// with errc::broken_pipe when closed and drained).
  std::coroutine_handle<> start(continuation c) noexcept {
    {
      detail::spin_guard g(ch_->lock_);
      if (ch_->size_ > ch_->reserved_items_) {
        value_.emplace(ch_->pop_front());
        ch_->wake_sender();
      } else if (!ch_->closed_) {
        done_ = c;
        detail::prepare_wait(w_, continuation(&receive_operation::on_resume, this));
        ch_->receivers_.push_back(w_);
        in_flight_ = true;
        return std::noop_coroutine();
      }
    }
    return c.complete();
  }
  /// Part of the operation protocol: a wait still queued completes with
  /// errc::operation_canceled, consuming nothing.
  void cancel() noexcept {
    if (!in_flight_) return;
    detail::spin_guard g(ch_->lock_);
    if (w_.state == detail::waiter::phase::waiting) detail::cancel_waiting(ch_->receivers_, w_);
  }
  /// Part of the operation protocol: the item, errc::broken_pipe or errc::operation_canceled.
  cogwheel::result<T> result() noexcept {
    if (value_) return std::move(*value_);
    if (w_.result == detail::waiter::outcome::canceled) return errc::operation_canceled;
    return errc::broken_pipe;
  }

 private:
  static std::coroutine_handle<> on_resume(void* p) noexcept {
    auto& self = *static_cast<receive_operation*>(p);
    self.in_flight_ = false;
    self.w_.state = detail::waiter::phase::done;
    if (self.w_.result == detail::waiter::outcome::granted) {
      channel& ch = *self.ch_;
      detail::spin_guard g(ch.lock_);
      --ch.reserved_items_;
      self.value_.emplace(ch.pop_front());
      ch.wake_sender();
    }
    return self.done_.complete();
  }

  channel* ch_;
  std::optional<T> value_;
  bool in_flight_ = false;  // queued and not yet resumed; home thread only
  continuation done_;
  detail::waiter w_;
};

}  // namespace cogwheel
