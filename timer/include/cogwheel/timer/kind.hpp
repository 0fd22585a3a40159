// timer_kind: which timer queue a runtime (or a benchmark) runs on. Apart from queue.hpp so that
// naming the choice (runtime_options) does not pull in both queues.
#pragma once

namespace cogwheel::timer {

enum class timer_kind { wheel, heap };

}  // namespace cogwheel::timer
