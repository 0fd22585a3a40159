// What the calling thread's loop is and holds: current_backend() and pending_timers(). Its
// counters, gauges and histograms are this_core_metrics() (metrics.hpp, included here), and
// every core's are snapshot_metrics().
#pragma once

#include <cstddef>

#include <cogwheel/runtime/metrics.hpp>
#include <cogwheel/runtime/options.hpp>

namespace cogwheel {

/// The backend the calling thread's loop does its I/O through (io_uring or epoll, never
/// automatic). Precondition: called on a cogwheel loop thread.
backend_kind current_backend();

/// Timers pending in the calling thread's loop's queue. Precondition: called on a cogwheel
/// loop thread.
std::size_t pending_timers();

}  // namespace cogwheel
