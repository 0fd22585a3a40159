// The timer workloads' inputs, shared with bench/timer_bench.cpp: see ../timer_workload.hpp.
#pragma once

#include "../timer_workload.hpp"

namespace peers {
using namespace timer_workload;
}  // namespace peers
