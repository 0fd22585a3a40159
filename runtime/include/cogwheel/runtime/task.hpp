// task<T>: a lazy, move-only coroutine. It starts when awaited, resumes its awaiter by
// symmetric transfer when it finishes (so a long chain of synchronous completions cannot grow
// the stack), and rethrows its body's exception in the awaiter.
//
// Cancellation: an awaited task inherits its awaiter's stop source, so a stop request (a
// with_timeout firing, say) reaches the operation the innermost task is suspended on.
//
// Destroying a task that has not finished destroys its frame, and with it every awaiter in the
// frame: their destructors cancel timers and in-flight operations (RAII), so nothing dangles.
#pragma once

#include <cassert>
#include <coroutine>
#include <exception>
#include <utility>
#include <variant>

#include <cogwheel/runtime/continuation.hpp>

namespace cogwheel {

template <class T = void>
class task;

namespace detail {

class task_promise_base {
 public:
  std::suspend_always initial_suspend() noexcept { return {}; }

  struct final_awaiter {
    bool await_ready() noexcept { return false; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> h) noexcept {
      return h.promise().continuation_.complete();
    }
    void await_resume() noexcept {}
  };
  final_awaiter final_suspend() noexcept { return {}; }

  void unhandled_exception() noexcept { exception_ = std::current_exception(); }

  stop_source* stop() const noexcept { return stop_; }
  void set_continuation(continuation c, stop_source* stop) noexcept {
    continuation_ = c;
    stop_ = stop;
  }

 protected:
  void rethrow_if_failed() const {
    if (exception_) std::rethrow_exception(exception_);
  }

 private:
  continuation continuation_;
  stop_source* stop_ = nullptr;
  std::exception_ptr exception_;
};

template <class T>
class task_promise : public task_promise_base {
 public:
  task<T> get_return_object() noexcept;
  template <class U>
  void return_value(U&& v) { value_.template emplace<1>(std::forward<U>(v)); }
  T take() {
    rethrow_if_failed();
    assert(value_.index() == 1);
    return std::move(std::get<1>(value_));
  }

 private:
  std::variant<std::monostate, T> value_;
};

template <>
class task_promise<void> : public task_promise_base {
 public:
  task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void take() { rethrow_if_failed(); }
};

}  // namespace detail

template <class T>
class [[nodiscard]] task {
 public:
  using promise_type = detail::task_promise<T>;
  using handle_type = std::coroutine_handle<promise_type>;
  using value_type = T;

  task() noexcept = default;
  explicit task(handle_type h) noexcept : h_(h) {}
  task(task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  task& operator=(task&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  ~task() { reset(); }

  bool valid() const noexcept { return static_cast<bool>(h_); }
  bool done() const noexcept { return h_ && h_.done(); }

  class awaiter {
   public:
    explicit awaiter(handle_type h) noexcept : h_(h) {}
    bool await_ready() const noexcept { return !h_ || h_.done(); }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> parent) noexcept {
      h_.promise().set_continuation(detail::continuation(std::coroutine_handle<>(parent)),
                                    detail::stop_source_of(parent));
      return h_;
    }
    T await_resume() {
      assert(h_ && "co_await on an empty task");
      return h_.promise().take();
    }

   private:
    handle_type h_;
  };

  // co_await: starts the task and suspends the awaiter until it finishes.
  awaiter operator co_await() && noexcept { return awaiter(h_); }

  // For the runtime's own drivers (spawn, run, with_timeout, when_all): start with a
  // continuation of their own and a stop source of their own. Returns the coroutine to resume.
  std::coroutine_handle<> start(detail::continuation c, detail::stop_source* stop) noexcept {
    h_.promise().set_continuation(c, stop);
    return h_;
  }
  // After it finished: its value, or its exception rethrown.
  T take() { return h_.promise().take(); }

 private:
  void reset() noexcept {
    if (h_) h_.destroy();
    h_ = {};
  }
  handle_type h_;
};

namespace detail {
template <class T>
task<T> task_promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<task_promise<T>>::from_promise(*this));
}
inline task<void> task_promise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<task_promise<void>>::from_promise(*this));
}
}  // namespace detail

}  // namespace cogwheel
