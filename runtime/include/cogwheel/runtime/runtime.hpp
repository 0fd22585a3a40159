// runtime: one thread per core, each pinned and running its own loop (I/O backend, timer
// queue, ready queue); core 0's thread is the one that calls run(). Nothing is shared on the
// hot path; cores talk through submit_to, which posts to the other loop's inbox and wakes it
// through the eventfd its loop keeps a read armed on.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/options.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {

class runtime {
 public:
  // Loops (and their rings) are created by run(), on the threads that use them.
  explicit runtime(runtime_options options = {});
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;
  ~runtime();

  // Starts one loop per core and runs per_core_main(core) on each. Returns when every core's
  // main task and the tasks spawned on it have finished, or after stop(), or as soon as a main
  // task has ended with an exception. Pending timers and operations are then cancelled and
  // every coroutine frame destroyed. Rethrows the first exception of a main task, or the ring
  // set-up error of any core. Core 0 runs on the calling thread (pinned meanwhile when
  // pin_threads, its CPU set given back on return), which must not itself run a cogwheel loop.
  // per_core_main is any callable taking the core index and returning task<void> (a lambda, a
  // std::function); it is called once per core, on that core's thread, concurrently.
  template <class F>
    requires std::is_invocable_r_v<task<void>, F&, unsigned>
  void run(F&& per_core_main) {
    run_cores(core_main_ref{&per_core_main, [](void* f, unsigned core) -> task<void> {
                              return (*static_cast<std::remove_reference_t<F>*>(f))(core);
                            }});
  }

  // Thread-safe, and async-signal-safe: makes run() wind down. A stop() before run(), or
  // racing its start, is not lost: that run() returns promptly (without starting the main
  // tasks if it comes before them). Each run() consumes the stops made up to its return.
  void stop() noexcept;

  unsigned cores() const noexcept;

  // A borrowed per-core main (run() blocks until every core is done with it).
  struct core_main_ref {
    void* fn;
    task<void> (*call)(void* fn, unsigned core);
  };

 private:
  struct state;  // runtime/src/runtime.cpp: the loops, the threads' bookkeeping, stop flags
  void run_cores(core_main_ref per_core_main);
  state* state_;
};

// The index of the core the caller runs on (0 under run()).
unsigned this_core() noexcept;

namespace detail {

template <class F>
using submit_result_t = std::invoke_result_t<F&>;

template <class R>
struct unwrap_task {
  using type = R;
};
template <class T>
struct unwrap_task<task<T>> {
  using type = T;
};

// One submit_to call: the function travels to the target core in `request`, the outcome comes
// back in `reply`. Two references: the caller's awaiter, and the message chain (request, the
// work on the target, reply), each released once; the last one frees the state. `awaiting`,
// `abandoned` and `completed` are touched only on the caller's core (by the awaiter and by the
// reply's delivery), the value and error only before the reply is posted.
// The two messages of a call, as distinct bases, so that each leads back to its state.
struct submit_request : remote_message {};
struct submit_reply : remote_message {};

template <class T, class F>
struct submit_state : submit_request, submit_reply {
  using value_holder = std::conditional_t<std::is_void_v<T>, bool, std::optional<T>>;

  explicit submit_state(F fn) : f(std::move(fn)) {
    submit_request::deliver = &submit_state::on_request;
    submit_request::discard = &submit_state::on_discard_request;
    submit_reply::deliver = &submit_state::on_reply;
    submit_reply::discard = &submit_state::on_discard_reply;
  }

  // Not inlined: g++ 12 at -O1 (the sanitizer builds) follows the reply-to-state cast into an
  // inlined decrement and warns, wrongly, of a write past the reply message (stringop-overflow).
  [[gnu::noinline]] void release() noexcept {
    // The compiler's atomic builtin (what std::atomic is made of), so that this public header
    // need not pull in <atomic>.
    if (__atomic_fetch_sub(&refs, 1, __ATOMIC_ACQ_REL) == 1) delete this;
  }
  // On the target core: the outcome goes home (the chain's reference travels with it).
  void send_reply() noexcept { post_remote(*home, static_cast<submit_reply&>(*this)); }
  void send_request(event_loop& target) noexcept { post_remote(target, static_cast<submit_request&>(*this)); }

  static submit_state& of_request(remote_message& m) noexcept {
    return static_cast<submit_state&>(static_cast<submit_request&>(m));
  }
  static submit_state& of_reply(remote_message& m) noexcept {
    return static_cast<submit_state&>(static_cast<submit_reply&>(m));
  }
  static void on_request(remote_message& m) noexcept;
  static void on_reply(remote_message& m) noexcept {
    submit_state& st = of_reply(m);
    st.completed = true;
    if (!st.abandoned) st.awaiting.resume();
    st.release();
  }
  // Either message dropped by a loop that shut down first: the chain's reference goes.
  static void on_discard_request(remote_message& m) noexcept { of_request(m).release(); }
  static void on_discard_reply(remote_message& m) noexcept { of_reply(m).release(); }

  int refs = 2;  // atomic: touched only through __atomic builtins
  F f;
  value_holder value{};
  std::exception_ptr error;
  std::coroutine_handle<> awaiting;
  event_loop* home = nullptr;
  bool abandoned = false;
  bool completed = false;
  bool spawning = false;  // on the target core, while on_request spawns run_submitted
};

// The message chain's reference to a submit_state, held by run_submitted's frame as a
// parameter, so from the frame's creation: a frame destroyed before it ever ran (spawned on a
// loop that shut down before its next iteration) releases it too. Not while on_request is
// still spawning the frame: if that fails, on_request replies with the error instead, and the
// reply carries the reference.
template <class T, class F>
struct submit_chain_ref {
  explicit submit_chain_ref(submit_state<T, F>* s) noexcept : st(s) {}
  submit_chain_ref(submit_chain_ref&& o) noexcept : st(std::exchange(o.st, nullptr)), replied(o.replied) {}
  ~submit_chain_ref() {
    if (st != nullptr && !replied && !st->spawning) st->release();
  }
  submit_state<T, F>* st;
  bool replied = false;
};

// Runs a task-returning function on the target core. The state (and so f, whose captures a
// lambda coroutine's task refers to) lives until the task has finished. A frame destroyed
// before that (the target loop shutting down) releases the chain's reference instead of
// replying.
template <class T, class F>
task<void> run_submitted(submit_chain_ref<T, F> ref) {
  submit_state<T, F>* st = ref.st;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await st->f();
    } else {
      st->value.emplace(co_await st->f());
    }
  } catch (...) {
    st->error = std::current_exception();
  }
  ref.replied = true;
  st->send_reply();
}

template <class T, class F>
void submit_state<T, F>::on_request(remote_message& m) noexcept {
  submit_state& st = of_request(m);
  if constexpr (std::is_same_v<submit_result_t<F>, task<T>>) {
    st.spawning = true;
    try {
      spawn(run_submitted(submit_chain_ref<T, F>(&st)));
      st.spawning = false;
    } catch (...) {  // a frame could not be allocated
      st.spawning = false;
      st.error = std::current_exception();
      st.send_reply();
    }
  } else {
    try {
      if constexpr (std::is_void_v<T>)
        st.f();
      else
        st.value.emplace(st.f());
    } catch (...) {
      st.error = std::current_exception();
    }
    st.send_reply();
  }
}

void abort_bad_core(unsigned core) noexcept;

template <class F>
class submit_awaiter {
  using R = submit_result_t<F>;
  using T = typename unwrap_task<R>::type;
  using state = submit_state<T, F>;

 public:
  submit_awaiter(unsigned core, F f) : core_(core), f_(std::move(f)) {}
  submit_awaiter(submit_awaiter&& o) noexcept : core_(o.core_), f_(std::move(o.f_)), state_(std::exchange(o.state_, nullptr)) {}
  ~submit_awaiter() {
    if (state_ == nullptr) return;
    if (!state_->completed) state_->abandoned = true;  // caller's frame is going away
    state_->release();
  }

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    event_loop* target = peer_loop(core_);
    if (target == nullptr) abort_bad_core(core_);
    state_ = new state(std::move(*f_));
    state_->awaiting = h;
    state_->home = &current_loop();
    state_->send_request(*target);
  }
  T await_resume() {
    if (state_->error) std::rethrow_exception(state_->error);
    if constexpr (!std::is_void_v<T>) return std::move(*state_->value);
  }

 private:
  unsigned core_;
  std::optional<F> f_;  // moved into the state when the call is made
  state* state_ = nullptr;
};

}  // namespace detail

// Runs f() on `core` (f returns R, or task<R> which is then awaited there) and resumes the
// caller on its own core with the value, or f's exception. f is moved to the other core.
template <class F>
[[nodiscard]] auto submit_to(unsigned core, F&& f) {
  return detail::submit_awaiter<std::decay_t<F>>(core, std::forward<F>(f));
}

}  // namespace cogwheel
