/// @file
/// when_any: runs tasks concurrently on the current core; the first to finish wins. The others
/// are then asked to stop (their pending operation completes with errc::operation_canceled) and
/// awaited: when co_await when_any(...) returns, every child has finished and its frame is gone
/// with the awaiter, so nothing a loser held (a socket, a timer) outlives the race.
///
/// Children are started in argument order; once one has finished, those not yet started are
/// never started. A stop request (a timeout above it) is passed on to every running child; the
/// winner is then whichever finishes first anyway (typically with operation_canceled).
///
/// The outcome: the winner's index and its value (std::monostate for task<void>). If the winner
/// threw, its exception is rethrown; what the losers return or throw is dropped, so a loser that
/// produced something it owns (a connected stream) releases it when the awaiter goes.
#pragma once

#include <array>
#include <coroutine>
#include <cstddef>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/when_all.hpp>

namespace cogwheel {

/// What co_await when_any(a, b, ...) gives: `index` is the winner's position among the
/// arguments, and `value` holds its value at that same index (std::get<I>(value), or std::visit
/// when every task has the same type).
template <class... Ts>
struct when_any_result {
  std::size_t index = 0;  ///< the winner's position among when_any's arguments
  std::variant<detail::when_all_value_t<Ts>...> value;  ///< its value, at alternative `index`
};

namespace detail {

// Counts running children like when_all_latch, and remembers which finished first. Each child
// completes through its own slot (the slot knows its index).
//
// Invariant: once winner_ is set, every other child's stop source has been asked to stop.
class when_any_latch : private cancel_hook {
 public:
  static constexpr std::size_t no_winner = static_cast<std::size_t>(-1);

  struct slot {
    when_any_latch* latch = nullptr;
    std::size_t index = 0;
  };

  when_any_latch(std::span<slot> slots, std::span<stop_source> stops) noexcept
      : pending_(slots.size() + 1), slots_(slots), stops_(stops) {
    for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = slot{this, i};
  }
  when_any_latch(const when_any_latch&) = delete;
  when_any_latch& operator=(const when_any_latch&) = delete;
  ~when_any_latch() {
    if (parent_stop_ != nullptr) parent_stop_->detach(*this);
  }

  bool decided() const noexcept { return winner_ != no_winner; }
  std::size_t winner() const noexcept { return winner_; }
  continuation child_continuation(std::size_t i) noexcept { return continuation(&when_any_latch::on_child_done, &slots_[i]); }
  // A child that is never started (a winner was known first) counts as finished.
  void skip() noexcept { --pending_; }

  // Call after starting (or skipping) every child. Returns whether the parent must stay
  // suspended.
  template <class Promise>
  bool arm(std::coroutine_handle<Promise> parent) noexcept {
    parent_ = parent;
    if (--pending_ == 0) return false;
    parent_stop_ = stop_source_of(parent);
    if (parent_stop_ != nullptr) {
      if (parent_stop_->stop_requested()) stop_all();
      parent_stop_->attach(*this, &when_any_latch::on_parent_stop);
    }
    return true;
  }

 private:
  static std::coroutine_handle<> on_child_done(void* p) noexcept {
    auto& s = *static_cast<slot*>(p);
    when_any_latch& self = *s.latch;
    if (self.winner_ == no_winner) {
      self.winner_ = s.index;
      for (std::size_t i = 0; i < self.stops_.size(); ++i)
        if (i != s.index) self.stops_[i].request_stop();
    }
    if (--self.pending_ != 0) return std::noop_coroutine();
    if (self.parent_stop_ != nullptr) {
      self.parent_stop_->detach(self);
      self.parent_stop_ = nullptr;
    }
    return self.parent_;
  }
  static void on_parent_stop(cancel_hook& h) noexcept { static_cast<when_any_latch&>(h).stop_all(); }
  void stop_all() noexcept {
    for (stop_source& s : stops_) s.request_stop();
  }

  std::size_t pending_;
  std::size_t winner_ = no_winner;
  std::span<slot> slots_;
  std::span<stop_source> stops_;
  std::coroutine_handle<> parent_;
  stop_source* parent_stop_ = nullptr;
};

template <class... Ts>
class when_any_awaiter {
 public:
  using result_type = when_any_result<Ts...>;

  explicit when_any_awaiter(task<Ts>... tasks) noexcept : tasks_(std::move(tasks)...) {}
  when_any_awaiter(when_any_awaiter&& o) noexcept : tasks_(std::move(o.tasks_)) {}  // before awaiting only

  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> parent) {
    std::size_t i = 0;
    std::apply([&](auto&... t) { (start(t, i++), ...); }, tasks_);
    return latch_.arm(parent);
  }
  result_type await_resume() { return take(std::make_index_sequence<sizeof...(Ts)>{}); }

 private:
  template <class T>
  void start(task<T>& t, std::size_t i) {
    if (latch_.decided()) {
      latch_.skip();
      return;
    }
    t.start(latch_.child_continuation(i), &stops_[i]).resume();
  }
  template <std::size_t... I>
  result_type take(std::index_sequence<I...>) {
    result_type r;
    r.index = latch_.winner();
    ((I == r.index ? take_one<I>(r) : void()), ...);
    return r;
  }
  template <std::size_t I>
  void take_one(result_type& r) {
    auto& t = std::get<I>(tasks_);
    if constexpr (std::is_void_v<typename std::remove_reference_t<decltype(t)>::value_type>) {
      t.take();
      r.value.template emplace<I>();
    } else {
      r.value.template emplace<I>(t.take());
    }
  }

  // Declared first, destroyed last: destroying a child's frame detaches its operation from its
  // stop source. By then every started child has finished (the awaiter resumed), so the
  // frames destroyed here are finished or never started.
  std::array<stop_source, sizeof...(Ts)> stops_{};
  std::array<when_any_latch::slot, sizeof...(Ts)> slots_{};
  std::tuple<task<Ts>...> tasks_;
  when_any_latch latch_{slots_, stops_};
};

}  // namespace detail

/// co_await when_any(a(), b(), ...) -> when_any_result: the first task to finish, by index, with
/// its value; every other task has been stopped and has finished before this returns. At least
/// one task. A winner that threw: its exception is rethrown (after the others finished).
template <class T0, class... Ts>
[[nodiscard]] auto when_any(task<T0> first, task<Ts>... rest) {
  return detail::when_any_awaiter<T0, Ts...>(std::move(first), std::move(rest)...);
}

}  // namespace cogwheel
