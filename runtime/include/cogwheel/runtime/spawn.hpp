// run(task) drives a loop on the calling thread until the task finishes; spawn(task) detaches a
// task onto the current core's loop.
//
// Exceptions: run() rethrows the main task's exception. An exception escaping a spawned task
// has nobody to go to: it is reported on stderr (with what() when it is a std::exception) and
// counted in loop_stats::spawn_failures; the loop carries on. It is never silently dropped.
//
// Shutdown: when run()'s task finishes, tasks spawned on that loop that are still suspended are
// destroyed; their awaiters cancel their timers and wait out their in-flight operations.
#pragma once

#include <coroutine>
#include <exception>
#include <utility>

#include <cogwheel/runtime/detail/event_loop.hpp>
#include <cogwheel/runtime/options.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {

namespace detail {

// The frame that owns a spawned task: linked into its loop's list until it finishes.
class detached_task {
 public:
  struct promise_type : event_loop::spawned_link {
    event_loop* loop = &current_loop();
    ready_node start_node;

    detached_task get_return_object() noexcept {
      frame = std::coroutine_handle<promise_type>::from_promise(*this);
      loop->link_spawned(*this);
      return {};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }  // the frame frees itself
    void return_void() noexcept {}
    void unhandled_exception() noexcept;
    ~promise_type() { loop->unlink_spawned(*this); }
  };
};

detached_task run_detached(task<void> t);
void report_spawn_failure(std::exception_ptr e) noexcept;

}  // namespace detail

// Detaches t onto the current core's loop; it starts at the next iteration. Precondition:
// called on a cogwheel loop thread.
void spawn(task<void> t);

// Runs a loop on the calling thread until `main` finishes; returns its value or rethrows its
// exception. Precondition: the thread runs no other cogwheel loop.
template <class T>
T run(task<T> main, const runtime_options& options = {}) {
  detail::event_loop loop(options, 0);
  task<T> t = std::move(main);  // destroyed before the loop, whatever happens
  bool done = false;
  auto finished = [](void* flag) noexcept -> std::coroutine_handle<> {
    *static_cast<bool*>(flag) = true;
    detail::current_loop().nudge();
    return std::noop_coroutine();
  };
  t.start(detail::continuation(finished, &done), nullptr).resume();
  loop.run_until([&] { return done; });
  loop.destroy_spawned();
  if (!done) throw std::runtime_error("cogwheel::run: the loop was stopped before the task finished");
  return t.take();
}

}  // namespace cogwheel
