/// @file
/// run(task): drives a loop on the calling thread until the task finishes; its value, or its
/// exception rethrown. Tasks it spawned and that are still suspended are destroyed at the end
/// (their awaiters cancel their timers and wait out their in-flight operations).
#pragma once

#include <coroutine>
#include <stdexcept>
#include <utility>

#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/options.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {

namespace detail {

class event_loop;

// Owns a loop on the calling thread (the loop itself stays opaque: runtime/src).
class loop_owner {
 public:
  // Throws std::system_error naming the cause and the remedy when the loop cannot be set up.
  explicit loop_owner(const runtime_options& options);
  loop_owner(const loop_owner&) = delete;
  loop_owner& operator=(const loop_owner&) = delete;
  ~loop_owner();

  // The continuation a driver gives its main task: sets *flag and makes the loop look again.
  static std::coroutine_handle<> finished(void* flag) noexcept;
  // Runs iterations until `done` or a stop; then destroys the spawned frames still suspended.
  void run_until(const bool& done);

 private:
  event_loop* loop_;
};

}  // namespace detail

/// Runs a loop on the calling thread until `main` finishes; returns its value or rethrows its
/// exception. The loop (and its io_uring or epoll set) is created here and torn down before
/// returning, after destroying the spawned tasks still suspended. Throws std::system_error when
/// the loop cannot be set up (the message names the cause and the fix), std::invalid_argument
/// for a bad COGWHEEL_BACKEND, std::logic_error when the thread already runs a cogwheel loop,
/// and std::runtime_error when the loop was stopped before `main` finished.
template <class T>
T run(task<T> main, const runtime_options& options = {}) {
  detail::loop_owner loop(options);
  task<T> t = std::move(main);  // destroyed before the loop, whatever happens
  bool done = false;
  t.start(detail::continuation(&detail::loop_owner::finished, &done), nullptr).resume();
  loop.run_until(done);
  if (!done) throw std::runtime_error("cogwheel::run: the loop was stopped before the task finished");
  return t.take();
}

}  // namespace cogwheel
