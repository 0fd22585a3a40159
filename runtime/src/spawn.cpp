#include <cogwheel/runtime/spawn.hpp>

#include <cstdio>
#include <exception>
#include <typeinfo>

#include "event_loop.hpp"

namespace cogwheel {

namespace {

// The frame that owns a spawned task: linked into its loop's list from creation until it
// finishes (or the loop destroys it at shutdown), queued to start at the next iteration.
struct detached_task {
  struct promise_type : detail::spawned_link {
    detail::event_loop* loop = &detail::current_loop();
    detail::ready_node start_node;

    promise_type() noexcept { loop->link_spawned(*this); }
    ~promise_type() { loop->unlink_spawned(*this); }
    detached_task get_return_object() noexcept {
      frame = std::coroutine_handle<promise_type>::from_promise(*this);
      return detached_task{this};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }  // the frame frees itself
    void return_void() noexcept {}
    void unhandled_exception() noexcept;
  };
  promise_type* promise;
};

void report_spawn_failure(std::exception_ptr e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "cogwheel: a spawned task ended with an exception (%s): %s\n", typeid(x).name(), x.what());
  } catch (...) {
    std::fputs("cogwheel: a spawned task ended with an exception of a non-std type\n", stderr);
  }
}

void detached_task::promise_type::unhandled_exception() noexcept {
  loop->note_spawn_failure();
  report_spawn_failure(std::current_exception());
}

detached_task run_detached(task<void> t) { co_await std::move(t); }

}  // namespace

void spawn(task<void> t) {
  detached_task d = run_detached(std::move(t));
  d.promise->loop->post(d.promise->start_node, d.promise->frame);
}

}  // namespace cogwheel
