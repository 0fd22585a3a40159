// Windows of metrics: a snapshot minus an earlier one. Counters and histograms subtract
// (clamped at 0, a saturated one stays saturated: detail::window_difference), gauges and
// identity fields are the later snapshot's.
#include <cogwheel/runtime/metrics.hpp>

#include <algorithm>

namespace cogwheel {

namespace {

double value_difference(double later, double earlier) noexcept {
  constexpr double saturated = 18446744073709551615.0;  // a saturated counter, as a double
  if (later >= saturated) return later;
  return later > earlier ? later - earlier : 0;
}

bool same_metric(const auto& a, const auto& b) noexcept {
  return a.core == b.core && a.name == b.name && a.labels == b.labels;
}

}  // namespace

core_metrics operator-(const core_metrics& later, const core_metrics& earlier) noexcept {
  using detail::window_difference;
  core_metrics d = later;  // identity and gauges: the later ones
  // Every counter of core_metrics (its "Counters" block).
  for (std::uint64_t core_metrics::*c :
       {&core_metrics::iterations, &core_metrics::kernel_waits, &core_metrics::syscalls, &core_metrics::submissions,
        &core_metrics::completions, &core_metrics::timers_scheduled, &core_metrics::timers_rescheduled,
        &core_metrics::timers_cancelled, &core_metrics::timers_fired, &core_metrics::tasks_spawned,
        &core_metrics::tasks_run, &core_metrics::spawn_failures, &core_metrics::remote_messages,
        &core_metrics::remote_wakeups, &core_metrics::accept_pauses, &core_metrics::epoll_registrations,
        &core_metrics::sq_full_flushes, &core_metrics::cq_overflows, &core_metrics::clock_jumps,
        &core_metrics::stalls, &core_metrics::timer_work_ns})
    d.*c = window_difference(later.*c, earlier.*c);
  d.timer_lateness = later.timer_lateness - earlier.timer_lateness;
  d.iteration_duration = later.iteration_duration - earlier.iteration_duration;
  for (std::size_t i = 0; i < d.phase_ns.size(); ++i) d.phase_ns[i] = later.phase_ns[i] - earlier.phase_ns[i];
  return d;
}

metrics_snapshot operator-(const metrics_snapshot& later, const metrics_snapshot& earlier) {
  metrics_snapshot d = later;
  for (core_metrics& c : d.cores) {
    auto e = std::find_if(earlier.cores.begin(), earlier.cores.end(),
                          [&](const core_metrics& x) { return x.core == c.core; });
    if (e != earlier.cores.end()) c = c - *e;
  }
  for (registered_value& v : d.values) {
    if (!v.is_counter) continue;
    auto e = std::find_if(earlier.values.begin(), earlier.values.end(),
                          [&](const registered_value& x) { return x.is_counter && same_metric(x, v); });
    if (e != earlier.values.end()) v.value = value_difference(v.value, e->value);
  }
  for (registered_histogram& h : d.histograms) {
    auto e = std::find_if(earlier.histograms.begin(), earlier.histograms.end(),
                          [&](const registered_histogram& x) { return same_metric(x, h); });
    if (e != earlier.histograms.end()) h.values = h.values - e->values;
  }
  return d;
}

}  // namespace cogwheel
