/// @file
/// when_all: runs tasks concurrently on the current core and completes when all have finished.
/// Results come back in argument order (std::monostate for task<void>). If any task throws, the
/// first exception (in argument order) is rethrown after all have finished. A stop request
/// (a timeout above it) is passed on to every task, and every task runs in the deadline scopes
/// of the awaiting task (co_await current_deadline() answers the same in each).
#pragma once

#include <array>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {

namespace detail {

template <class T>
using when_all_value_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// Counts finished children; the awaiter itself holds one count while it starts them, so the
// parent is never resumed from inside its own await_suspend.
//
// Each child runs with a stop source of its own (owned by the awaiter): a stop_source holds the
// hook of the one operation its chain is suspended on, so children sharing one would overwrite
// each other's hooks and a stop would reach only the last child to suspend.
class when_all_latch : private cancel_hook {
 public:
  explicit when_all_latch(std::size_t children) noexcept : pending_(children + 1) {}

  continuation child_continuation() noexcept { return continuation(&when_all_latch::on_child_done, this); }

  // Before starting the children: each child's chain inherits the parent's scopes, and a stop
  // already requested (the children's first operations then complete at once).
  template <class Promise>
  static void inherit(std::coroutine_handle<Promise> parent, std::span<stop_source> child_stops) noexcept {
    const stop_source* from = stop_source_of(parent);
    if (from == nullptr) return;
    for (stop_source& s : child_stops) {
      s.set_scope(from->scope());
      if (from->stop_requested()) s.request_stop();
    }
  }

  // Call after starting every child, child i with child_stops[i], which must outlive the
  // children. Returns whether the parent must stay suspended.
  template <class Promise>
  bool arm(std::coroutine_handle<Promise> parent, std::span<stop_source> child_stops) noexcept {
    parent_ = parent;
    parent_stop_ = stop_source_of(parent);
    child_stops_ = child_stops;
    if (--pending_ == 0) return false;
    if (parent_stop_ != nullptr) {
      if (parent_stop_->stop_requested()) stop_children();
      parent_stop_->attach(*this, &when_all_latch::on_parent_stop);
    }
    return true;
  }
  ~when_all_latch() {
    if (parent_stop_ != nullptr) parent_stop_->detach(*this);
  }

 private:
  static std::coroutine_handle<> on_child_done(void* p) noexcept {
    auto& self = *static_cast<when_all_latch*>(p);
    if (--self.pending_ != 0) return std::noop_coroutine();
    if (self.parent_stop_ != nullptr) {
      self.parent_stop_->detach(self);
      self.parent_stop_ = nullptr;
    }
    return self.parent_;
  }
  static void on_parent_stop(cancel_hook& h) noexcept { static_cast<when_all_latch&>(h).stop_children(); }
  void stop_children() noexcept {
    for (stop_source& s : child_stops_) s.request_stop();
  }

  std::size_t pending_;
  std::coroutine_handle<> parent_;
  stop_source* parent_stop_ = nullptr;
  std::span<stop_source> child_stops_;
};

template <class... Ts>
class when_all_awaiter {
 public:
  explicit when_all_awaiter(task<Ts>... tasks) noexcept : tasks_(std::move(tasks)...), latch_(sizeof...(Ts)) {}

  bool await_ready() const noexcept { return sizeof...(Ts) == 0; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> parent) {
    when_all_latch::inherit(parent, stops_);
    std::size_t i = 0;
    std::apply([&](auto&... t) { (t.start(latch_.child_continuation(), &stops_[i++]).resume(), ...); }, tasks_);
    return latch_.arm(parent, stops_);
  }
  std::tuple<when_all_value_t<Ts>...> await_resume() {
    std::exception_ptr first;
    auto take = [&]<class T>(task<T>& t) -> when_all_value_t<T> {
      try {
        if constexpr (std::is_void_v<T>) {
          t.take();
          return {};
        } else {
          return t.take();
        }
      } catch (...) {
        if (!first) first = std::current_exception();
        return when_all_value_t<T>{};
      }
    };
    auto values = std::apply([&](auto&... t) { return std::tuple<when_all_value_t<Ts>...>{take(t)...}; }, tasks_);
    if (first) std::rethrow_exception(first);
    return values;
  }

 private:
  // Declared first, destroyed last: destroying a suspended child's frame detaches its
  // operation from its stop source.
  std::array<stop_source, sizeof...(Ts)> stops_{};
  std::tuple<task<Ts>...> tasks_;
  when_all_latch latch_;
};

template <class T>
class when_all_range_awaiter {
 public:
  explicit when_all_range_awaiter(std::vector<task<T>> tasks)
      : stops_(tasks.size()), tasks_(std::move(tasks)), latch_(new when_all_latch(tasks_.size())) {}
  when_all_range_awaiter(when_all_range_awaiter&& o) noexcept
      : stops_(std::move(o.stops_)), tasks_(std::move(o.tasks_)), latch_(std::exchange(o.latch_, nullptr)) {}
  when_all_range_awaiter& operator=(when_all_range_awaiter&&) = delete;
  ~when_all_range_awaiter() {
    tasks_.clear();  // suspended children first: they may still refer to the latch
    delete latch_;
  }

  bool await_ready() const noexcept { return tasks_.empty(); }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> parent) {
    when_all_latch::inherit(parent, stops_);
    for (std::size_t i = 0; i < tasks_.size(); ++i)
      tasks_[i].start(latch_->child_continuation(), &stops_[i]).resume();
    return latch_->arm(parent, stops_);
  }
  std::vector<when_all_value_t<T>> await_resume() {
    std::vector<when_all_value_t<T>> values;
    values.reserve(tasks_.size());
    std::exception_ptr first;
    for (task<T>& t : tasks_) {
      try {
        if constexpr (std::is_void_v<T>) {
          t.take();
          values.emplace_back();
        } else {
          values.push_back(t.take());
        }
      } catch (...) {
        if (!first) first = std::current_exception();
        values.emplace_back();
      }
    }
    if (first) std::rethrow_exception(first);
    return values;
  }

 private:
  // Declared first, destroyed last: destroying a suspended child's frame detaches its
  // operation from its stop source.
  std::vector<stop_source> stops_;
  std::vector<task<T>> tasks_;
  when_all_latch* latch_;  // owned; on the heap so that its address survives moves
};

}  // namespace detail

/// co_await when_all(a(), b(), c()) -> std::tuple of their values, in argument order
/// (std::monostate for a task<void>). The tasks run concurrently on this core; the first
/// exception in argument order is rethrown once all have finished.
template <class... Ts>
[[nodiscard]] auto when_all(task<Ts>... tasks) {
  return detail::when_all_awaiter<Ts...>(std::move(tasks)...);
}

/// co_await when_all(std::move(vector_of_tasks)) -> std::vector of their values, in the
/// vector's order (std::monostate for task<void>); exceptions as for the variadic form. An empty
/// vector completes at once. Allocates one shared latch per call.
template <class T>
[[nodiscard]] auto when_all(std::vector<task<T>> tasks) {
  return detail::when_all_range_awaiter<T>(std::move(tasks));
}

}  // namespace cogwheel
