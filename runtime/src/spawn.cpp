#include <cogwheel/runtime/spawn.hpp>

#include <cstdio>
#include <typeinfo>

namespace cogwheel {

namespace detail {

detached_task run_detached(task<void> t) { co_await std::move(t); }

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

}  // namespace detail

void spawn(task<void> t) {
  detail::event_loop& loop = detail::current_loop();
  detail::run_detached(std::move(t));
  // get_return_object linked the new frame last; queue it to start at the next iteration.
  auto* link = loop.last_spawned();
  auto& promise = static_cast<detail::detached_task::promise_type&>(*link);
  loop.post(promise.start_node, link->frame);
}

}  // namespace cogwheel
