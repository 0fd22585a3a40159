/// @file
/// The plumbing every awaitable of cogwheel shares: who to resume when an operation finishes
/// (continuation), and how a request to stop reaches the operation a task is suspended on
/// (stop_source, cancel_hook), and the deadline scopes around it (stop_source::scope(), see
/// detail/deadline_scope.hpp).
///
/// Threading: all of it belongs to one core's loop thread.
#pragma once

#include <coroutine>

namespace cogwheel {

/// Who runs when an operation completes: a coroutine, or a callback that decides (the
/// with_timeout and when_all awaiters, which are not coroutines). complete() returns the
/// coroutine to run next, for symmetric transfer or resume(). Public: an operation written
/// outside cogwheel (see operation.hpp) is handed one by start() and completes it exactly once.
class continuation {
 public:
  /// A callback continuation: decides, with its context, which coroutine runs next.
  using callback = std::coroutine_handle<> (*)(void* ctx) noexcept;

  /// None: complete() returns std::noop_coroutine().
  continuation() noexcept = default;
  /// Resumes the coroutine `h`.
  continuation(std::coroutine_handle<> h) noexcept : state_(h.address()) {}  // NOLINT: implicit
  /// Calls fn(ctx), which returns the coroutine to run next.
  continuation(callback fn, void* ctx) noexcept : fn_(fn), state_(ctx) {}

  /// Whether there is someone to resume.
  explicit operator bool() const noexcept { return fn_ != nullptr || state_ != nullptr; }

  /// Where what complete() runs keeps its state (the coroutine frame, or the callback's
  /// context), for prefetching it before it runs; may be null.
  void* state_address() const noexcept { return state_; }

  /// Completes the operation: returns the coroutine to run next (resume it, or return it from
  /// await_suspend for symmetric transfer). Called exactly once per start().
  std::coroutine_handle<> complete() const noexcept {
    if (fn_ != nullptr) return fn_(state_);
    return state_ != nullptr ? std::coroutine_handle<>::from_address(state_) : std::noop_coroutine();
  }

 private:
  // Two words, not three: a coroutine's frame address and a callback's context share one
  // (fn_ null: state_ is the frame, or null for none). Every awaiter that keeps a
  // continuation carries it in its frame, and at a million sleepers frame bytes are memory.
  callback fn_ = nullptr;
  void* state_ = nullptr;
};

static_assert(sizeof(continuation) == 2 * sizeof(void*), "a continuation is two words");

namespace detail {

using cogwheel::continuation;

class deadline_scope;

/// What an operation registers while a task is suspended on it, so a stop request can reach it.
/// Empty: the function a stop request calls is kept by the stop source (one per task chain)
/// beside the hook's address, not in every awaiter of every frame (a base of no bytes).
struct cancel_hook {};
/// What a stop request calls with the registered hook.
using cancel_fn = void (*)(cancel_hook&) noexcept;

/// A task chain's stop state. Single-threaded; lives in whoever started the chain (a
/// with_timeout or when_all awaiter, or nothing: a chain without a source cannot be stopped).
///
/// Invariant: at most one hook is registered at a time: a task chain is suspended on one
/// operation (composites like when_all register themselves and give each child its own source).
class stop_source {
 public:
  bool stop_requested() const noexcept { return requested_; }

  /// Asks the chain to stop: the registered operation, if any, is cancelled now; every later
  /// cancellable operation of the chain completes with errc::operation_canceled at once.
  void request_stop() noexcept {
    if (requested_) return;
    requested_ = true;
    if (cancel_hook* h = hook_) {
      hook_ = nullptr;
      on_cancel_(*h);
    }
  }

  /// Registers h: a stop request calls on_cancel(h) (once, unless detached first).
  void attach(cancel_hook& h, cancel_fn on_cancel) noexcept {
    hook_ = &h;
    on_cancel_ = on_cancel;
  }
  void detach(cancel_hook& h) noexcept {
    if (hook_ == &h) hook_ = nullptr;
  }

  // The innermost deadline scope the chain runs in (nullptr: none), set by whoever starts the
  // chain (a with_timeout on a task opens its own, when_all children share their parent's).
  const deadline_scope* scope() const noexcept { return scope_; }
  void set_scope(const deadline_scope* s) noexcept { scope_ = s; }

 private:
  bool requested_ = false;
  cancel_hook* hook_ = nullptr;
  cancel_fn on_cancel_ = nullptr;  // meaningful while hook_ is set
  const deadline_scope* scope_ = nullptr;
};

/// The stop source of the coroutine behind a handle, if its promise carries one (cogwheel's
/// task does; foreign coroutine types do not and are simply not cancellable).
template <class Promise>
stop_source* stop_source_of(std::coroutine_handle<Promise> h) noexcept {
  if constexpr (requires(Promise& p) { { p.stop() } -> std::same_as<stop_source*>; })
    return h.promise().stop();
  else
    return nullptr;
}

}  // namespace detail
}  // namespace cogwheel
