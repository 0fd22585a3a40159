// submit_to's machinery (see runtime.hpp for the contract): the state one call shares between
// the caller's core and the target core, the messages that carry it, and the operation the
// caller awaits.
//
// One call: the function travels to the target core in `request`, the outcome comes back in
// `reply`, and a caller that is stopped (its deadline, its frame destroyed, any stop) sends
// `stop` after it. The state is reference counted across the two threads: the caller's
// operation holds one reference, the message chain (request, the work on the target, reply)
// one, and a stop message in flight one; the last release frees it.
//
// Which thread touches what: `f`, `stop` (the remote task chain's stop source), `value` and
// `error` on the target core before the reply is posted; `done`, `abandoned`, `completed` and
// `stop_sent` on the caller's core only. Messages between two loops arrive in the order they
// were posted, so a stop never overtakes its request.
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/deadline_scope.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/time.hpp>
#include <cogwheel/runtime/detail/posting_timer.hpp>
#include <cogwheel/timer/node.hpp>

namespace cogwheel::detail {

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

// The three messages of a call, as distinct bases, so that each leads back to its state.
struct submit_request : remote_message {};
struct submit_reply : remote_message {};
struct submit_stop : remote_message {};

template <class T, class F>
struct submit_state : submit_request, submit_reply, submit_stop {
  using value_holder = std::conditional_t<std::is_void_v<T>, bool, std::optional<T>>;

  explicit submit_state(F fn) : f(std::move(fn)) {
    submit_request::deliver = &submit_state::on_request;
    submit_request::discard = &submit_state::on_discard;
    submit_reply::deliver = &submit_state::on_reply;
    submit_reply::discard = &submit_state::on_discard;
    submit_stop::deliver = &submit_state::on_stop;
    submit_stop::discard = &submit_state::on_discard;
  }

  // Not inlined: g++ 12 at -O1 (the sanitizer builds) follows a message-to-state cast into an
  // inlined decrement and warns, wrongly, of a write past the message (stringop-overflow).
  [[gnu::noinline]] void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // On the target core: the outcome goes home (the chain's reference travels with it).
  void send_reply() noexcept { post_remote(*home, static_cast<submit_reply&>(*this)); }
  void send_request() noexcept { post_remote(*target, static_cast<submit_request&>(*this)); }
  // On the caller's core, at most once: the remote task is to stop (a no-op for a function
  // that is not a task, or once the work is done).
  void send_stop() noexcept {
    if (stop_sent) return;
    stop_sent = true;
    refs.fetch_add(1, std::memory_order_relaxed);  // the message's, released where it lands
    post_remote(*target, static_cast<submit_stop&>(*this));
  }

  static void on_request(remote_message& m) noexcept;
  static void on_reply(remote_message& m) noexcept {
    auto& st = static_cast<submit_state&>(static_cast<submit_reply&>(m));
    st.completed = true;
    // The remote task was cut by the budget: as if an operation of the caller's had been
    // refused past its deadline, so that the scope that ran out answers timed_out even if the
    // reply beat its own timer (see deadline_refusals).
    if (st.budget_expired) ++deadline_refusals;
    if (!st.abandoned) st.done.complete().resume();
    st.release();
  }
  static void on_stop(remote_message& m) noexcept {
    auto& st = static_cast<submit_state&>(static_cast<submit_stop&>(m));
    st.stop.request_stop();
    st.release();
  }
  // A message dropped by a loop that shut down first: its reference goes with it. (Which
  // base it is does not matter: the same state.)
  static void on_discard(remote_message& m) noexcept;

  std::atomic<int> refs{2};
  F f;
  value_holder value{};
  std::exception_ptr error;
  clock::duration budget = clock::duration::max();  // the caller's remaining budget; max: none
  stop_source stop;                                  // the remote task chain's
  continuation done;                                 // the caller's operation
  event_loop* home = nullptr;
  event_loop* target = nullptr;
  bool abandoned = false;
  bool completed = false;
  bool stop_sent = false;
  bool budget_expired = false;  // the target's budget timer fired (set there, before the reply)
  bool spawning = false;  // on the target core, while on_request spawns run_submitted
};

template <class T, class F>
void submit_state<T, F>::on_discard(remote_message& m) noexcept {
  // m is one of the three bases; find the state from whichever it is.
  submit_state* st = nullptr;
  if (m.deliver == &submit_state::on_request)
    st = &static_cast<submit_state&>(static_cast<submit_request&>(m));
  else if (m.deliver == &submit_state::on_reply)
    st = &static_cast<submit_state&>(static_cast<submit_reply&>(m));
  else
    st = &static_cast<submit_state&>(static_cast<submit_stop&>(m));
  st->release();
}

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

// Runs the submitted task on the target core under the caller's remaining budget, re-anchored
// on this core's clock: a scope of its own (no scope around it: the task is spawned here), a
// timer that stops the chain when the budget passes, and the state's stop source, which the
// caller's stop message also reaches.
template <class T>
class budget_awaiter : private posting_timer {
 public:
  budget_awaiter(task<T> t, stop_source& stop, clock::duration budget, bool& expired) noexcept
      : task_(std::move(t)), stop_(&stop), budget_(budget), expired_flag_(&expired) {}
  budget_awaiter(const budget_awaiter&) = delete;
  budget_awaiter& operator=(const budget_awaiter&) = delete;
  ~budget_awaiter() {
    if (loop_ != nullptr) cancel_timer(*loop_, *this);
  }

  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> h) {
    awaiting_ = h;
    arm_expiry(current_loop(), continuation(&budget_awaiter::fire, this));
    if (budget_ != clock::duration::max()) {
      const clock::time_point at = saturating_add(current_time(), budget_);
      scope_.open(nullptr, at);
      stop_->set_scope(&scope_);
      schedule_timer(*loop_, *this, at);
    }
    return task_.start(continuation(&budget_awaiter::on_done, this), stop_);
  }
  T await_resume() { return task_.take(); }

 private:
  static std::coroutine_handle<> fire(void* p) noexcept {
    auto& self = *static_cast<budget_awaiter*>(p);
    *self.expired_flag_ = true;
    self.stop_->request_stop();
    return std::noop_coroutine();
  }
  static std::coroutine_handle<> on_done(void* p) noexcept {
    auto& self = *static_cast<budget_awaiter*>(p);
    cancel_timer(*self.loop_, self);
    return self.awaiting_;
  }

  task<T> task_;
  stop_source* stop_;
  clock::duration budget_;
  bool* expired_flag_;
  deadline_scope scope_;
  std::coroutine_handle<> awaiting_;
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
      co_await budget_awaiter<T>(st->f(), st->stop, st->budget, st->budget_expired);
    } else {
      st->value.emplace(co_await budget_awaiter<T>(st->f(), st->stop, st->budget, st->budget_expired));
    }
  } catch (...) {
    st->error = std::current_exception();
  }
  ref.replied = true;
  st->send_reply();
}

template <class T, class F>
void submit_state<T, F>::on_request(remote_message& m) noexcept {
  auto& st = static_cast<submit_state&>(static_cast<submit_request&>(m));
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
    // A plain function runs to its end: nothing can stop it midway.
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

[[noreturn]] void abort_bad_core(unsigned core) noexcept;

// What the caller awaits: a cancellable operation (see operation.hpp), so with_timeout and
// with_deadline take it, and a stop of the caller reaches the remote task.
template <class F>
class submit_operation : public operation<submit_operation<F>> {
  using R = submit_result_t<F>;
  using T = typename unwrap_task<R>::type;
  using state = submit_state<T, F>;

 public:
  submit_operation(unsigned core, F f) : core_(core), f_(std::move(f)) {}
  submit_operation(submit_operation&& o) noexcept
      : operation<submit_operation>(std::move(o)),
        core_(o.core_),
        f_(std::move(o.f_)),
        scope_(o.scope_),
        state_(std::exchange(o.state_, nullptr)) {}
  submit_operation& operator=(submit_operation&&) = delete;
  ~submit_operation() {
    if (state_ == nullptr) return;
    if (!state_->completed) {  // the caller's frame is going away: the remote task stops
      state_->abandoned = true;
      state_->send_stop();
    }
    state_->release();
  }

  void bind_scope(const deadline_scope* s) noexcept { scope_ = s; }

  std::coroutine_handle<> start(continuation c) {
    event_loop* target = peer_loop(core_);
    if (target == nullptr) abort_bad_core(core_);
    state_ = new state(std::move(*f_));
    state_->done = c;
    state_->home = &current_loop();
    state_->target = target;
    if (scope_ != nullptr) {
      const clock::time_point at = deadline_scope::effective(scope_);
      if (at != clock::time_point::max()) {
        const clock::time_point t = current_time();
        state_->budget = at > t ? at - t : clock::duration::zero();
      }
    }
    state_->send_request();
    return std::noop_coroutine();
  }
  void cancel() noexcept {
    if (state_ != nullptr && !state_->completed) state_->send_stop();
  }
  T result() {
    if (state_->error) std::rethrow_exception(state_->error);
    if constexpr (!std::is_void_v<T>) return std::move(*state_->value);
  }

 private:
  unsigned core_;
  std::optional<F> f_;  // moved into the state when the call is made
  const deadline_scope* scope_ = nullptr;
  state* state_ = nullptr;
};

}  // namespace cogwheel::detail
