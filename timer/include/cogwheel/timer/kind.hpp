/// @file
/// timer_kind: which timer queue a runtime (or a benchmark) runs on. Apart from queue.hpp so
/// that naming the choice (runtime_options) does not pull in both queues.
#pragma once

namespace cogwheel::timer {

/// Which timer queue a runtime (or a benchmark) runs on.
enum class timer_kind {
  wheel,  ///< the hierarchical timing wheel (timer_wheel): O(1) schedule, cancel and push
  heap,   ///< the 4-ary heap twin (timer_heap), for comparison
};

}  // namespace cogwheel::timer
