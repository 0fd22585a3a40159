// deadline_scope: one scope of a task chain's budget (see docs/deadlines.md). with_timeout and
// with_deadline around a task open one, inside their awaiter; the task chain reaches it through
// its stop source (stop_source::scope()), and each scope links to the one around it, so the
// chain's effective deadline is the earliest along that path. when_all children share their
// parent's scopes; spawned tasks and shielded operations start outside every scope.
//
// A scope is either fixed (a time point) or follows a movable `deadline` (its expiry, read when
// asked, so reset() moves it in both directions).
//
// Lifetime: a scope lives in an awaiter in the frame of the task that opened it, which outlives
// every task inside it (they are awaited before it resumes), so the links never dangle.
// Threading: the loop thread of the chain.
#pragma once

#include <chrono>
#include <cstdint>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>

namespace cogwheel::detail {

class deadline_scope {
 public:
  deadline_scope() noexcept = default;
  deadline_scope(const deadline_scope&) = delete;
  deadline_scope& operator=(const deadline_scope&) = delete;

  void open(const deadline_scope* parent, clock::time_point at) noexcept {
    parent_ = parent;
    at_ = at;
    movable_ = nullptr;
  }
  void open(const deadline_scope* parent, deadline& d) noexcept {
    parent_ = parent;
    movable_ = &d;
  }

  const deadline_scope* parent() const noexcept { return parent_; }
  // The deadline this scope follows, or nullptr for a fixed one.
  deadline* movable() const noexcept { return movable_; }
  // This scope's own deadline (now, for one that follows a deadline).
  clock::time_point own() const noexcept { return movable_ != nullptr ? movable_->expiry() : at_; }

  // The earliest deadline of `s` and every scope around it; time_point::max() when s is null.
  // O(depth): a chain's scopes are few, and this is read once per operation inside a scope.
  static clock::time_point effective(const deadline_scope* s) noexcept {
    clock::time_point e = clock::time_point::max();
    for (; s != nullptr; s = s->parent_)
      if (const clock::time_point t = s->own(); t < e) e = t;
    return e;
  }

  // The scope (s or one around it) whose deadline is the earliest; at a tie a fixed one, which
  // cannot move away. nullptr when s is null.
  static const deadline_scope* earliest(const deadline_scope* s) noexcept {
    const deadline_scope* best = nullptr;
    for (; s != nullptr; s = s->parent_) {
      if (best == nullptr || s->own() < best->own() ||
          (s->own() == best->own() && best->movable_ != nullptr && s->movable_ == nullptr))
        best = s;
    }
    return best;
  }

 private:
  const deadline_scope* parent_ = nullptr;
  clock::time_point at_ = clock::time_point::max();
  deadline* movable_ = nullptr;
};

// Whether an operation about to start on behalf of the chain of `s` must not start: the chain
// is asked to stop, or its effective deadline has passed (now(): the real clock, or a paused
// one's virtual time). The deadline's own timer may not have fired yet: a task that computed
// past it has let no loop iteration run, and a timer fires at the first tick boundary after
// its deadline. The clock is read only inside a scope.
//
// Each refusal for a passed deadline is counted in deadline_refusals (this thread's): a scope
// whose operation completed without its timer firing looks at the clock only when some
// refusal happened meanwhile (an operation inside it may have been refused, and the scope must
// then answer timed_out), so the common completion reads no clock.
inline thread_local std::uint64_t deadline_refusals = 0;

inline bool must_not_start(const stop_source& s) noexcept {
  if (s.stop_requested()) return true;
  const deadline_scope* scope = s.scope();
  if (scope == nullptr || deadline_scope::effective(scope) > current_time()) return false;
  ++deadline_refusals;
  return true;
}

}  // namespace cogwheel::detail
