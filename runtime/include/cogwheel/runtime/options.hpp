/// @file
/// runtime_options: how a runtime (or run()) sets up each core's loop.
#pragma once

#include <chrono>

#include <cogwheel/runtime/time.hpp>
#include <cogwheel/runtime/resolver_options.hpp>
#include <cogwheel/timer/kind.hpp>

namespace cogwheel {

using timer::timer_kind;

/// Which kernel interface a core's loop does its I/O through. The environment variable
/// COGWHEEL_BACKEND=io_uring|epoll|automatic overrides runtime_options::backend (so a program
/// can be moved to either without recompiling); any other value fails at start.
enum class backend_kind {
  automatic,  ///< io_uring; epoll when io_uring cannot be set up (seccomp, disabled, old
              ///< kernel), said once on stderr
  io_uring,   ///< io_uring or fail at start
  epoll,      ///< readiness (epoll) plus non-blocking syscalls
};

/// How a runtime (or run()) sets up each core's loop. Every field has a usable default.
struct runtime_options {
  unsigned cores = 0;                                 ///< 0: one per online CPU
  clock::duration tick = std::chrono::milliseconds(1);  ///< timer resolution (100us works too)
  timer_kind timers = timer_kind::wheel;              ///< or timer_kind::heap, for comparison
  backend_kind backend = backend_kind::automatic;     ///< io_uring, else epoll (see above)
  unsigned sq_entries = 1024;                         ///< io_uring: submission queue size per core
  unsigned cq_entries = 0;                            ///< io_uring: 0 is 4 x sq_entries (the kernel
                                                      ///< also keeps overflowed completions; none
                                                      ///< is lost)
  unsigned ready_budget = 1024;                       ///< coroutines resumed from the ready queue
                                                      ///< per iteration before I/O and timers run
  bool paused_clock = false;                          ///< virtual time: when only timers can make
                                                      ///< progress the clock jumps to the next one
  bool measure_timer_work = false;                    ///< count time inside the timer queue's
                                                      ///< advance() (core_metrics::timer_work_ns)
  bool metrics = true;                                ///< per-core histograms (timer lateness,
                                                      ///< iteration and phase times), timer and
                                                      ///< I/O counters, the stall detector
                                                      ///< (metrics.hpp); off: only iterations,
                                                      ///< completions and timers fired count
  clock::duration stall_threshold = std::chrono::milliseconds(25);  ///< an iteration busier than
                                                      ///< this is a stall: said on stderr once
                                                      ///< per burst, counted (0: no detector)
  bool pin_threads = true;                            ///< runtime: pin core i's thread to the
                                                      ///< i-th CPU the process may run on
  bool stop_on_signals = false;                       ///< runtime: SIGINT/SIGTERM call stop()
  resolver_options resolver = {};                     ///< resolve(): servers, search, timeouts
                                                      ///< (default: /etc/resolv.conf)
};

}  // namespace cogwheel
