// to_prometheus(): the text exposition format, one HELP and TYPE per metric name followed by
// every core's samples of it.
#include <cogwheel/runtime/prometheus.hpp>

#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <vector>

namespace cogwheel {

namespace {

// The histogram buckets' upper bounds, in seconds (+Inf is added).
constexpr std::array<double, 19> bucket_bounds{1e-6, 5e-6,  1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
                                               5e-3, 1e-2,  2.5e-2, 5e-2, 0.1,  0.25, 0.5,    1.0,  2.5};

class writer {
 public:
  explicit writer(std::string& out) : out_(out) {}

  void header(std::string_view name, std::string_view help, std::string_view type) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    for (const char c : help) {  // the format's escapes for help text: \\ and \n
      if (c == '\\') out_ += "\\\\";
      else if (c == '\n') out_ += "\\n";
      else out_ += c;
    }
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void sample(std::string_view name, std::string_view labels, std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%" PRIu64, v);
    line(name, labels, buf);
  }
  void sample_signed(std::string_view name, std::string_view labels, std::int64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%" PRId64, v);
    line(name, labels, buf);
  }
  void sample_double(std::string_view name, std::string_view labels, double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    line(name, labels, buf);
  }
  // name_bucket{labels,le=...}, name_sum, name_count; values scaled by `scale` (to seconds).
  void histogram_samples(std::string_view name, std::string_view labels, const histogram& h, double scale) {
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < histogram::bucket_count; ++i) total += h.bucket(i);
    const std::string bucket = std::string(name) + "_bucket";
    std::string with_le;
    for (double bound : bucket_bounds) {
      char le[32];
      std::snprintf(le, sizeof le, "le=\"%g\"", bound);
      with_le.assign(labels);
      if (!with_le.empty()) with_le += ',';
      with_le += le;
      sample(bucket, with_le, h.count_at_most(static_cast<std::uint64_t>(std::llround(bound / scale))));
    }
    with_le.assign(labels);
    if (!with_le.empty()) with_le += ',';
    with_le += "le=\"+Inf\"";
    sample(bucket, with_le, total);
    sample_double(std::string(name) + "_sum", labels, static_cast<double>(h.sum()) * scale);
    sample(std::string(name) + "_count", labels, total);
  }

 private:
  void line(std::string_view name, std::string_view labels, const char* value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  std::string& out_;
};

const char* kind_name(timer_kind k) noexcept { return k == timer_kind::wheel ? "wheel" : "heap"; }
const char* backend_name(backend_kind b) noexcept {
  return b == backend_kind::epoll ? "epoll" : (b == backend_kind::io_uring ? "io_uring" : "automatic");
}

std::string core_label(const core_metrics& c) { return "core=\"" + std::to_string(c.core) + "\""; }
std::string core_kind_labels(const core_metrics& c) {
  return core_label(c) + ",timer_kind=\"" + kind_name(c.timers) + "\"";
}

struct counter_field {
  const char* name;
  const char* help;
  std::uint64_t core_metrics::*field;
  bool timer;  // labelled with timer_kind
};

constexpr counter_field counter_fields[] = {
    {"cogwheel_loop_iterations_total", "Loop iterations.", &core_metrics::iterations, false},
    {"cogwheel_kernel_waits_total", "Iterations that blocked (or would have) in the kernel.", &core_metrics::kernel_waits, false},
    {"cogwheel_syscalls_total", "System calls of the I/O backend, waits included.", &core_metrics::syscalls, false},
    {"cogwheel_io_submissions_total", "I/O operations started.", &core_metrics::submissions, false},
    {"cogwheel_io_completions_total", "I/O completions dispatched.", &core_metrics::completions, false},
    {"cogwheel_timers_scheduled_total", "Timers scheduled.", &core_metrics::timers_scheduled, true},
    {"cogwheel_timers_rescheduled_total", "Deadlines of pending timers moved.", &core_metrics::timers_rescheduled, true},
    {"cogwheel_timers_cancelled_total", "Pending timers cancelled before they fired.", &core_metrics::timers_cancelled, true},
    {"cogwheel_timers_fired_total", "Timers that expired.", &core_metrics::timers_fired, true},
    {"cogwheel_tasks_spawned_total", "Coroutines spawned (detached).", &core_metrics::tasks_spawned, false},
    {"cogwheel_tasks_run_total", "Resumptions from the ready queue.", &core_metrics::tasks_run, false},
    {"cogwheel_task_failures_total", "Spawned tasks that ended with an exception.", &core_metrics::spawn_failures, false},
    {"cogwheel_remote_messages_total", "Messages from other cores delivered.", &core_metrics::remote_messages, false},
    {"cogwheel_remote_wakeups_total", "Times another core woke this loop from its sleep.", &core_metrics::remote_wakeups, false},
    {"cogwheel_accept_pauses_total", "Accept back-pressure pauses (out of descriptors or memory).", &core_metrics::accept_pauses, false},
    {"cogwheel_epoll_registrations_total", "epoll: descriptors added to the loop's epoll set.", &core_metrics::epoll_registrations, false},
    {"cogwheel_uring_sq_full_flushes_total", "io_uring: full submission queue flushed to make room.", &core_metrics::sq_full_flushes, false},
    {"cogwheel_uring_cq_overflows_total", "io_uring: reaps that found overflowed completions.", &core_metrics::cq_overflows, false},
    {"cogwheel_stalls_total", "Loop iterations longer than the stall threshold.", &core_metrics::stalls, false},
};

struct gauge_field {
  const char* name;
  const char* help;
  std::int64_t core_metrics::*field;
};

constexpr gauge_field gauge_fields[] = {
    {"cogwheel_io_operations_in_flight", "I/O operations started and not yet completed.", &core_metrics::operations_in_flight},
    {"cogwheel_open_sockets", "Streams and UDP sockets open with this core as their home.", &core_metrics::open_sockets},
    {"cogwheel_pooled_buffers_in_use", "Buffers of this core's buffer pools lent out to reads.", &core_metrics::pooled_buffers_in_use},
};

void write_cores(writer& w, const std::vector<core_metrics>& cores) {
  w.header("cogwheel_core_info", "A core of the runtime: its timer queue and I/O backend.", "gauge");
  for (const core_metrics& c : cores)
    w.sample(std::string("cogwheel_core_info"), core_kind_labels(c) + ",backend=\"" + backend_name(c.backend) + "\"", 1);
  for (const counter_field& f : counter_fields) {
    w.header(f.name, f.help, "counter");
    for (const core_metrics& c : cores) w.sample(f.name, f.timer ? core_kind_labels(c) : core_label(c), c.*f.field);
  }
  w.header("cogwheel_timer_work_seconds_total", "Time inside the timer queue's advance() (measure_timer_work).", "counter");
  for (const core_metrics& c : cores)
    w.sample_double("cogwheel_timer_work_seconds_total", core_kind_labels(c), static_cast<double>(c.timer_work_ns) * 1e-9);

  w.header("cogwheel_timers_pending", "Pending timers, by wheel level (overdue: due or not yet filed; a heap: all).", "gauge");
  for (const core_metrics& c : cores) {
    for (unsigned l = 0; l <= timer_level_count; ++l) {
      if (c.timers == timer_kind::heap && l != 0) continue;
      const std::string level = c.timers == timer_kind::heap ? "all" : (l == timer_level_count ? "overdue" : std::to_string(l));
      w.sample("cogwheel_timers_pending", core_kind_labels(c) + ",level=\"" + level + "\"", c.pending_timers_per_level[l]);
    }
  }
  w.header("cogwheel_ready_tasks", "Coroutines in the ready queue.", "gauge");
  for (const core_metrics& c : cores) w.sample("cogwheel_ready_tasks", core_label(c), c.ready_tasks);
  for (const gauge_field& f : gauge_fields) {
    w.header(f.name, f.help, "gauge");
    for (const core_metrics& c : cores) w.sample_signed(f.name, core_label(c), c.*f.field);
  }

  w.header("cogwheel_timer_lateness_seconds", "When a timer fired minus the start of its deadline's tick.", "histogram");
  for (const core_metrics& c : cores) w.histogram_samples("cogwheel_timer_lateness_seconds", core_kind_labels(c), c.timer_lateness, 1e-9);
  w.header("cogwheel_loop_iteration_seconds", "A loop iteration's time outside blocking kernel waits.", "histogram");
  for (const core_metrics& c : cores) w.histogram_samples("cogwheel_loop_iteration_seconds", core_label(c), c.iteration_duration, 1e-9);
  w.header("cogwheel_loop_phase_seconds", "Time in each phase of an iteration.", "histogram");
  for (const core_metrics& c : cores)
    for (unsigned p = 0; p < loop_phase_count; ++p)
      w.histogram_samples("cogwheel_loop_phase_seconds",
                          core_label(c) + ",phase=\"" + to_string(static_cast<loop_phase>(p)) + "\"", c.phase_ns[p], 1e-9);
}

std::string registered_labels(int core, const std::string& labels) {
  std::string out = core >= 0 ? "core=\"" + std::to_string(core) + "\"" : std::string();
  if (!labels.empty()) {
    if (!out.empty()) out += ',';
    out += labels;
  }
  return out;
}

std::string counter_name(const std::string& name) {
  const std::string_view suffix = "_total";
  if (name.size() >= suffix.size() && std::string_view(name).substr(name.size() - suffix.size()) == suffix) return name;
  return name + "_total";
}

}  // namespace

std::string to_prometheus(const metrics_snapshot& snapshot) {
  std::string out;
  out.reserve(16384 + snapshot.cores.size() * 24576);
  writer w(out);
  if (!snapshot.cores.empty()) write_cores(w, snapshot.cores);
  // Registered metrics: each name once, with every sample of that name.
  std::vector<bool> done(snapshot.values.size());
  for (std::size_t i = 0; i < snapshot.values.size(); ++i) {
    if (done[i]) continue;
    const registered_value& first = snapshot.values[i];
    const std::string name = first.is_counter ? counter_name(first.name) : first.name;
    w.header(name, first.help, first.is_counter ? "counter" : "gauge");
    for (std::size_t j = i; j < snapshot.values.size(); ++j) {
      const registered_value& v = snapshot.values[j];
      if (v.name != first.name || v.is_counter != first.is_counter) continue;
      done[j] = true;
      w.sample_double(name, registered_labels(v.core, v.labels), v.value);
    }
  }
  std::vector<bool> done_h(snapshot.histograms.size());
  for (std::size_t i = 0; i < snapshot.histograms.size(); ++i) {
    if (done_h[i]) continue;
    const registered_histogram& first = snapshot.histograms[i];
    w.header(first.name, first.help, "histogram");
    for (std::size_t j = i; j < snapshot.histograms.size(); ++j) {
      const registered_histogram& h = snapshot.histograms[j];
      if (h.name != first.name) continue;
      done_h[j] = true;
      w.histogram_samples(h.name, registered_labels(h.core, h.labels), h.values, h.scale);
    }
  }
  return out;
}

}  // namespace cogwheel
