#include <cogwheel/runtime/spawn.hpp>

#include <cstdio>
#include <exception>
#include <typeinfo>

#include "event_loop.hpp"

namespace cogwheel {

namespace {

void report_spawn_failure(std::exception_ptr e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "cogwheel: a spawned task ended with an exception (%s): %s\n", typeid(x).name(), x.what());
  } catch (...) {
    std::fputs("cogwheel: a spawned task ended with an exception of a non-std type\n", stderr);
  }
}

// The spawned task's continuation: it finished (returned or threw). Runs inside the task's
// final suspension, where destroying its frame is allowed.
std::coroutine_handle<> on_finished(void* p) noexcept {
  auto& link = *static_cast<detail::spawned_link*>(p);
  auto frame = std::coroutine_handle<detail::task_promise<void>>::from_address(link.frame.address());
  detail::event_loop& loop = detail::current_loop();
  try {
    frame.promise().take();
  } catch (...) {
    loop.note_spawn_failure();
    report_spawn_failure(std::current_exception());
  }
  loop.finish_spawned(link);
  frame.destroy();
  return std::noop_coroutine();
}

}  // namespace

// The task's own frame is adopted, not wrapped in a frame of spawn's: besides it, a spawned task
// costs one small record (spawned_link), not a second coroutine frame per task.
void spawn(task<void> t) {
  detail::event_loop& loop = detail::current_loop();
  auto* link = new detail::spawned_link;
  link->frame = t.start(continuation(&on_finished, link), nullptr);
  t.release();
  loop.adopt_spawned(*link);
}

}  // namespace cogwheel
