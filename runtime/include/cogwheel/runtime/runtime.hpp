// runtime: one thread per core, each pinned and running its own loop (ring, timer queue, ready
// queue). Nothing is shared on the hot path; cores talk through submit_to, which posts to the
// other loop's inbox and wakes it through the eventfd its ring keeps a read armed on.
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
  // Rings are created by run(), on the threads that use them.
  explicit runtime(runtime_options options = {});
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;
  ~runtime();

  // Starts one loop per core and runs per_core_main(core) on each. Returns when every core's
  // main task and the tasks spawned on it have finished, or after stop(), or as soon as a main
  // task has ended with an exception. Pending timers and operations are then cancelled and
  // every coroutine frame destroyed. Rethrows the first exception of a main task, or the ring
  // set-up error of any core.
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
// The two messages and the count at fixed offsets of a standard-layout base, so that a
// delivered message finds its state (offsetof on submit_state itself, not standard-layout
// once F or T is not, is only conditionally supported).
struct submit_links {
  int refs = 2;  // atomic: touched only through __atomic builtins
  remote_message request;
  remote_message reply;
};

template <class T, class F>
struct submit_state : submit_links {
  using value_holder = std::conditional_t<std::is_void_v<T>, bool, std::optional<T>>;

  explicit submit_state(F fn) : f(std::move(fn)) {
    request.deliver = &submit_state::on_request;
    request.discard = &submit_state::on_discard_request;
    reply.deliver = &submit_state::on_reply;
    reply.discard = &submit_state::on_discard_reply;
  }

  void release() noexcept {
    // The compiler's atomic builtin (what std::atomic is made of), so that this public header
    // need not pull in <atomic>.
    if (__atomic_fetch_sub(&refs, 1, __ATOMIC_ACQ_REL) == 1) delete this;
  }
  // On the target core: the outcome goes home (the chain's reference travels with it).
  void send_reply() noexcept { post_remote(*home, reply); }

  static submit_state& of_request(remote_message& m) noexcept {
    return static_cast<submit_state&>(
        *reinterpret_cast<submit_links*>(reinterpret_cast<char*>(&m) - offsetof(submit_links, request)));
  }
  static submit_state& of_reply(remote_message& m) noexcept {
    return static_cast<submit_state&>(
        *reinterpret_cast<submit_links*>(reinterpret_cast<char*>(&m) - offsetof(submit_links, reply)));
  }
  static void on_request(remote_message& m) noexcept;
  static void on_reply(remote_message& m) noexcept {
    submit_state& st = of_reply(m);
    st.completed = true;
    if (!st.abandoned) st.awaiting.resume();
    st.release();
  }
  // Either message dropped undelivered: the chain's reference. One function per message, as
  // the message's address alone cannot tell which of the two it is.
  static void on_discard_request(remote_message& m) noexcept { of_request(m).release(); }
  static void on_discard_reply(remote_message& m) noexcept { of_reply(m).release(); }

  F f;
  value_holder value{};
  std::exception_ptr error;
  std::coroutine_handle<> awaiting;
  event_loop* home = nullptr;
  bool abandoned = false;
  bool completed = false;
};

// The message chain's reference while the work runs on the target core: released when it
// is destroyed still holding it. A parameter of run_submitted, so it lives in the frame from
// the frame's creation: a spawned task the loop destroys before it ever started (a stop
// racing the request) releases it too, which a local of the body would not.
template <class T, class F>
struct submit_chain_ref {
  explicit submit_chain_ref(submit_state<T, F>* s) noexcept : st(s) {}
  submit_chain_ref(submit_chain_ref&& o) noexcept : st(std::exchange(o.st, nullptr)) {}
  submit_chain_ref(const submit_chain_ref&) = delete;
  ~submit_chain_ref() {
    if (st != nullptr) st->release();
  }
  submit_state<T, F>* st;
};

// Runs a task-returning function on the target core. The state (and so f, whose captures a
// lambda coroutine's task refers to) lives until the task has finished.
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
  ref.st = nullptr;  // the reply carries the reference home
  st->send_reply();
}

template <class T, class F>
void submit_state<T, F>::on_request(remote_message& m) noexcept {
  submit_state& st = of_request(m);
  if constexpr (std::is_same_v<submit_result_t<F>, task<T>>) {
    submit_chain_ref<T, F> ref(&st);
    try {
      spawn(run_submitted<T>(std::move(ref)));
    } catch (...) {  // a frame could not be allocated
      st.error = std::current_exception();
      // The reply needs the chain's reference: still here if the task's frame was never made,
      // else released with it (the caller's reference keeps the state alive): taken again.
      if (ref.st != nullptr)
        ref.st = nullptr;
      else
        __atomic_fetch_add(&st.refs, 1, __ATOMIC_ACQ_REL);
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
    post_remote(*target, state_->request);
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
