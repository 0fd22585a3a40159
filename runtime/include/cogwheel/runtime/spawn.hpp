/// @file
/// spawn(task) detaches a task onto the current core's loop.
///
/// Exceptions: an exception escaping a spawned task has nobody to go to: it is reported on
/// stderr (with what() when it is a std::exception) and counted in this_core_metrics().spawn_failures;
/// the loop carries on. It is never silently dropped.
///
/// Shutdown: when the loop winds down (run()'s task finished, or runtime::stop()), spawned tasks
/// still suspended are destroyed; their awaiters cancel their timers and wait out their
/// in-flight operations.
#pragma once

#include <coroutine>

#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {

/// Detaches t onto the current core's loop; it starts at the next iteration and is owned by the
/// loop from now on (see the file comment for its exceptions and shutdown). It runs without a
/// deadline or stop source of its own: a timeout around the spawning task does not reach it.
/// Precondition: called on a cogwheel loop thread.
void spawn(task<void> t);

}  // namespace cogwheel
