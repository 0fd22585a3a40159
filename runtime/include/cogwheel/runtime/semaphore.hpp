/// @file
/// cogwheel::semaphore: a counting semaphore shared by every core of a runtime, with strict FIFO
/// waiters and move-only permits that give themselves back.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/waiter.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/result.hpp>

namespace cogwheel {

/// A counting semaphore usable from every core (and from threads that are not cores, for
/// try_acquire and release). Waiters are served in strict FIFO order: a request is granted at
/// once only when nobody waits, and the oldest waiter is served first even when a younger one
/// asks for fewer permits (a large request at the head is never starved by small ones behind it;
/// it holds them back until enough permits are free). A mutex is semaphore(1).
///
/// Every acquire is a cancellable operation: with_timeout, with_deadline, deadline scopes and
/// stop requests cut it, and a cut acquire holds no permit. An acquire already granted when the
/// cut arrives completes with its permit (nothing is lost); one whose frame is destroyed after
/// the grant gives the permits back to the next waiter.
///
/// Precondition of the destructor: no task waits on it and no permit is alive.
class semaphore {
 public:
  class permit;
  class acquire_operation;

  /// `permits` free permits to start with.
  explicit semaphore(std::size_t permits) noexcept : available_(permits) {}
  semaphore(const semaphore&) = delete;
  semaphore& operator=(const semaphore&) = delete;

  /// Waits (FIFO) until `n` permits are free, and takes them: `co_await sem.acquire()` yields a
  /// result<permit>, errc::operation_canceled when the wait was cut.
  acquire_operation acquire(std::size_t n = 1) noexcept;
  /// Takes `n` permits if they are free and nobody waits (no barging past waiters).
  std::optional<permit> try_acquire(std::size_t n = 1) noexcept;
  /// Adds `n` permits (beyond those a permit gives back, this grows the limit) and wakes the
  /// waiters at the head of the queue that they now satisfy. Any thread.
  void release(std::size_t n) noexcept {
    detail::spin_guard g(lock_);
    available_ += n;
    grant_waiters();
  }
  /// The permits free now (a snapshot when other cores are at work).
  std::size_t available() const noexcept {
    detail::spin_guard g(lock_);
    return available_;
  }

 private:
  // Lock held: serves the head of the queue while what is free covers it.
  void grant_waiters() noexcept {
    while (!waiters_.empty() && waiters_.front()->amount <= available_) {
      detail::waiter& w = waiters_.pop_front();
      available_ -= w.amount;
      detail::hand(w, detail::waiter::outcome::granted);
    }
  }

  mutable detail::spin_lock lock_;
  std::size_t available_;
  detail::wait_list waiters_;
};

/// Permits taken from a semaphore, given back when destroyed or release()d. Move-only; a
/// moved-from or released permit holds nothing.
class semaphore::permit {
 public:
  /// Holds nothing.
  permit() noexcept = default;
  /// Takes o's permits; `o` holds nothing after.
  permit(permit&& o) noexcept : sem_(std::exchange(o.sem_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  /// Gives back what this held, then takes o's.
  permit& operator=(permit&& o) noexcept {
    if (this != &o) {
      release();
      sem_ = std::exchange(o.sem_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  permit(const permit&) = delete;
  permit& operator=(const permit&) = delete;
  /// Gives the permits back.
  ~permit() { release(); }

  /// Gives the permits back now (waking waiters they satisfy); then holds nothing.
  void release() noexcept {
    if (sem_ != nullptr) std::exchange(sem_, nullptr)->release(std::exchange(count_, 0));
  }
  /// How many permits this holds (0 once released or moved from).
  std::size_t count() const noexcept { return count_; }
  /// Whether it holds any.
  explicit operator bool() const noexcept { return sem_ != nullptr; }

 private:
  friend class semaphore;
  permit(semaphore& s, std::size_t n) noexcept : sem_(&s), count_(n) {}
  semaphore* sem_ = nullptr;
  std::size_t count_ = 0;
};

/// What semaphore::acquire() returns: a cancellable operation (see operation.hpp) yielding
/// result<semaphore::permit>. Awaited once; movable only before it is awaited.
class semaphore::acquire_operation : public operation<acquire_operation> {
 public:
  /// An acquire of `n` permits of `s`, started when awaited (what semaphore::acquire() returns).
  acquire_operation(semaphore& s, std::size_t n) noexcept : sem_(&s), n_(n) {}
  /// Before it is awaited only.
  acquire_operation(acquire_operation&& o) noexcept
      : operation<acquire_operation>(std::move(o)), sem_(o.sem_), n_(o.n_) {}
  acquire_operation& operator=(acquire_operation&&) = delete;
  /// A wait still queued leaves the queue; permits granted but never taken (the frame went away
  /// between the grant and its resumption) go back to the semaphore.
  ~acquire_operation() {
    if (!in_flight_) return;
    detail::spin_guard g(sem_->lock_);
    if (w_.state == detail::waiter::phase::waiting) {
      sem_->waiters_.remove(w_);
      sem_->grant_waiters();  // a big request at the head may have held smaller ones back
    } else if (w_.state == detail::waiter::phase::handed) {
      detail::unqueue(w_);
      if (w_.result == detail::waiter::outcome::granted) {
        sem_->available_ += n_;
        sem_->grant_waiters();
      }
    }
  }

  /// Part of the operation protocol: takes the permits at once when free and nobody waits,
  /// else queues this wait.
  std::coroutine_handle<> start(continuation c) noexcept {
    done_ = c;
    {
      detail::spin_guard g(sem_->lock_);
      if (!sem_->waiters_.empty() || sem_->available_ < n_) {
        detail::prepare_wait(w_, continuation(&acquire_operation::on_resume, this));
        w_.amount = n_;
        sem_->waiters_.push_back(w_);
        in_flight_ = true;
        return std::noop_coroutine();
      }
      sem_->available_ -= n_;
    }
    return c.complete();
  }
  /// Part of the operation protocol: a wait still queued leaves the queue and completes with
  /// errc::operation_canceled; one already granted completes with its permit.
  void cancel() noexcept {
    if (!in_flight_) return;
    detail::spin_guard g(sem_->lock_);
    if (w_.state != detail::waiter::phase::waiting) return;
    detail::cancel_waiting(sem_->waiters_, w_);
    sem_->grant_waiters();
  }
  /// Part of the operation protocol: the permit, or errc::operation_canceled.
  cogwheel::result<permit> result() noexcept {
    if (w_.result == detail::waiter::outcome::canceled) return errc::operation_canceled;
    return permit(*sem_, n_);
  }

 private:
  static std::coroutine_handle<> on_resume(void* p) noexcept {
    auto& self = *static_cast<acquire_operation*>(p);
    self.in_flight_ = false;  // home thread; nothing else touches w_ once handed and resumed
    self.w_.state = detail::waiter::phase::done;
    return self.done_.complete();
  }

  semaphore* sem_;
  std::size_t n_;
  bool in_flight_ = false;  // queued and not yet resumed; home thread only
  continuation done_;
  detail::waiter w_;
};

inline semaphore::acquire_operation semaphore::acquire(std::size_t n) noexcept { return {*this, n}; }

inline std::optional<semaphore::permit> semaphore::try_acquire(std::size_t n) noexcept {
  detail::spin_guard g(lock_);
  if (!waiters_.empty() || available_ < n) return std::nullopt;
  available_ -= n;
  return permit(*this, n);
}

}  // namespace cogwheel
