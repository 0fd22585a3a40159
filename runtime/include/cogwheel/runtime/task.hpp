/// @file
/// task<T>: a lazy, move-only coroutine. It starts when awaited, resumes its awaiter by
/// symmetric transfer when it finishes (so a long chain of synchronous completions cannot grow
/// the stack), and rethrows its body's exception in the awaiter.
///
/// Cancellation: an awaited task inherits its awaiter's stop source, so a stop request (a
/// with_timeout firing, say) reaches the operation the innermost task is suspended on.
///
/// Destroying a task that has not finished destroys its frame, and with it every awaiter in the
/// frame: their destructors cancel timers and in-flight operations (RAII), so nothing dangles.
#pragma once

#include <cassert>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>
#include <variant>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/frame_pool.hpp>

namespace cogwheel {

/// A lazy, move-only coroutine returning T (see the file comment).
template <class T = void>
class task;

namespace detail {

class task_promise_base {
 public:
  // Every task's frame comes from this thread's frame pool (detail/frame_pool.hpp: huge-page
  // chunks, no malloc header) and may be destroyed on any thread.
  static void* operator new(std::size_t n) { return allocate_frame(n); }
  static void operator delete(void* p, std::size_t n) noexcept { free_frame(p, n); }

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

/// A lazy, move-only coroutine returning T: `task<int> f() { co_return 1; }`. Nothing runs
/// until it is awaited (or handed to spawn(), run(), when_all...). Owns its frame: destroying an
/// unfinished task destroys the frame (see the file comment). Used on one core's thread.
template <class T>
class [[nodiscard]] task {
 public:
  using promise_type = detail::task_promise<T>;  ///< the coroutine's promise (makes `task<T> f()` a coroutine)
  using handle_type = std::coroutine_handle<promise_type>;  ///< the handle of its frame
  using value_type = T;  ///< what co_await returns

  /// Empty: valid() is false; awaiting it is a precondition violation (asserted).
  task() noexcept = default;
  /// Takes ownership of the frame `h` (what promise_type::get_return_object() does).
  explicit task(handle_type h) noexcept : h_(h) {}
  /// Takes `o`'s frame; `o` becomes empty.
  task(task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  /// Destroys this task's frame (if any), then takes `o`'s.
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

  /// Whether it holds a frame.
  bool valid() const noexcept { return static_cast<bool>(h_); }
  /// Whether it holds a frame that has finished (returned or thrown).
  bool done() const noexcept { return h_ && h_.done(); }

  /// What `co_await task` uses: starts the task by symmetric transfer, resumes the awaiter
  /// when it finishes, and returns its value or rethrows its exception.
  class awaiter {
   public:
    /// Awaits the frame `h`, which the task keeps owning.
    explicit awaiter(handle_type h) noexcept : h_(h) {}
    ///@{
    /// The awaitable protocol. A finished task is ready at once; otherwise await_suspend()
    /// gives it the awaiter as continuation and its stop source, and runs it.
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
    ///@}

   private:
    handle_type h_;
  };

  /// co_await (on an rvalue: `co_await f()` or `co_await std::move(t)`): starts the task and
  /// suspends the awaiter until it finishes; the value, or its exception rethrown.
  awaiter operator co_await() && noexcept { return awaiter(h_); }

  /// For the runtime's own drivers (spawn, run, with_timeout, when_all): start with a
  /// continuation of their own and a stop source of their own. Returns the coroutine to resume.
  /// Precondition: valid() and not started.
  std::coroutine_handle<> start(detail::continuation c, detail::stop_source* stop) noexcept {
    h_.promise().set_continuation(c, stop);
    return h_;
  }
  /// After it finished: its value, or its exception rethrown. Precondition: done().
  T take() { return h_.promise().take(); }
  /// For the runtime's own drivers (spawn): gives up the frame, which the caller now owns and
  /// must destroy; the task becomes empty.
  handle_type release() noexcept { return std::exchange(h_, {}); }

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
