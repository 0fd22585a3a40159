// live_metrics: one core's metric cells, written by its loop's thread only and read by any
// thread (cogwheel/runtime/metrics.hpp's counter, gauge and histogram). The loop, its time
// driver and its I/O driver count into it; snapshot() copies it into a core_metrics.
//
// The gauges that the loop derives from its own structures (pending timers per wheel level,
// ready-queue depth) are published here by the loop (publish_gauges), since another thread may
// not read those structures.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include <cogwheel/runtime/metrics.hpp>

namespace cogwheel::detail {

struct live_metrics {
  counter iterations;
  counter kernel_waits;
  counter syscalls;
  counter submissions;
  counter completions;
  counter timers_scheduled;
  counter timers_rescheduled;
  counter timers_cancelled;
  counter timers_fired;
  counter tasks_spawned;
  counter tasks_run;
  counter spawn_failures;
  counter remote_messages;
  counter remote_wakeups;
  counter accept_pauses;
  counter epoll_registrations;
  counter sq_full_flushes;
  counter cq_overflows;
  counter clock_jumps;
  counter stalls;
  counter timer_work_ns;

  std::array<gauge, timer_level_count + 1> pending_timers_per_level;  // published by the loop
  gauge ready_tasks;                                                  // published by the loop
  // io's gauges, counted through loop_services.hpp on this loop's thread. A socket that leaves
  // this core from another thread (its first operation there, or its close) cannot write the
  // gauge: it adds to sockets_departed instead, an atomic add on that rare path only.
  gauge open_sockets;
  std::atomic<std::int64_t> sockets_departed{0};
  gauge pooled_buffers_in_use;

  histogram timer_lateness;
  histogram iteration_duration;
  std::array<histogram, loop_phase_count> phase_ns;

  histogram& phase(loop_phase p) noexcept { return phase_ns[static_cast<unsigned>(p)]; }

  // Copies every cell (any thread); identity fields are the caller's.
  void snapshot(core_metrics& out) const noexcept;
};

}  // namespace cogwheel::detail
