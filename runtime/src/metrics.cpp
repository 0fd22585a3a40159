// Snapshots of every core (the loop registry) and the registry of library and user metrics.
#include <cogwheel/runtime/metrics.hpp>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "event_loop.hpp"
#include "loop_registry.hpp"

namespace cogwheel {

namespace detail {

namespace {

struct registered {
  std::uint64_t id;
  enum class kind { counter, gauge, histogram } what;
  const void* object;
  std::string name;
  std::string help;
  std::string labels;
  int core;
  double scale;
};

// One mutex for both registries: loops come and go at start and stop, metrics at set-up;
// snapshots are rare. Nothing on the hot path takes it.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<event_loop*>& loops() {
  static std::vector<event_loop*> v;
  return v;
}
std::vector<registered>& metrics() {
  static std::vector<registered> v;
  return v;
}
std::uint64_t next_id = 1;  // under registry_mutex()

// The loops that stopped since the registry was last empty, each as it shut down; when the last
// one goes they become final_cores(), what snapshot_metrics() answers while no loop runs (a
// final report after run() returned). Under registry_mutex().
std::vector<core_metrics>& departed() {
  static std::vector<core_metrics> v;
  return v;
}
std::vector<core_metrics>& final_cores() {
  static std::vector<core_metrics> v;
  return v;
}

// `loop`'s metrics into c: exact on its own thread (`self`), else its cells and the fields fixed
// at its construction (a snapshot from another thread). Under registry_mutex().
void copy_core(event_loop& loop, const event_loop* self, core_metrics& c) noexcept {
  if (&loop == self) {
    loop.snapshot(c);
    return;
  }
  loop.metrics().snapshot(c);
  c.core = loop.core();
  c.timers = loop.time().timers().kind();
  c.backend = loop.backend();
}

bool valid_name(const std::string& n) noexcept {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Whether `labels` is a label set as the text format writes one inside braces: name="value"
// pairs joined by commas, each name [a-zA-Z_][a-zA-Z0-9_]* and given once, not reserved
// (`__`-prefixed, `core`, which the registry adds, and for a histogram `le`), each value with
// its `\`, `"` and newlines escaped (`\\`, `\"`, `\n`). One malformed set would make the whole
// exposition unparseable, every metric of the process lost to the scraper.
bool valid_labels(const std::string& labels, bool histogram) {
  std::vector<std::string_view> names;
  std::size_t i = 0;
  const std::size_t n = labels.size();
  while (i < n) {
    const std::size_t start = i;
    while (i < n && (labels[i] == '_' || (labels[i] >= 'a' && labels[i] <= 'z') || (labels[i] >= 'A' && labels[i] <= 'Z') ||
                     (i > start && labels[i] >= '0' && labels[i] <= '9')))
      ++i;
    const std::string_view name(labels.data() + start, i - start);
    if (name.empty() || name.substr(0, 2) == "__" || name == "core" || (histogram && name == "le")) return false;
    if (std::find(names.begin(), names.end(), name) != names.end()) return false;
    names.push_back(name);
    if (i + 1 >= n || labels[i] != '=' || labels[i + 1] != '"') return false;
    for (i += 2; i < n && labels[i] != '"'; ++i) {
      if (labels[i] == '\n') return false;
      if (labels[i] == '\\') {
        if (++i == n || (labels[i] != '\\' && labels[i] != '"' && labels[i] != 'n')) return false;
      }
    }
    if (i == n) return false;  // no closing quote
    ++i;
    if (i < n && (labels[i] != ',' || ++i == n)) return false;  // a comma, then another pair
  }
  return true;
}

std::uint64_t add_metric(registered r) {
  if (!valid_name(r.name)) throw std::invalid_argument("cogwheel: not a Prometheus metric name: " + r.name);
  if (!valid_labels(r.labels, r.what == registered::kind::histogram))
    throw std::invalid_argument("cogwheel: not a Prometheus label set (name=\"escaped value\",...): " + r.labels);
  event_loop* loop = event_loop::current();
  r.core = loop != nullptr ? static_cast<int>(loop->core()) : -1;
  const std::lock_guard lock(registry_mutex());
  r.id = next_id++;
  metrics().push_back(std::move(r));
  return metrics().back().id;
}

}  // namespace

void loop_registry::add(event_loop& loop) {
  const std::lock_guard lock(registry_mutex());
  loops().push_back(&loop);
}

void loop_registry::remove(event_loop& loop) noexcept {
  const std::lock_guard lock(registry_mutex());
  try {
    copy_core(loop, event_loop::current(), departed().emplace_back());
  } catch (...) {  // out of memory: this core's final state is lost, nothing else
  }
  std::erase(loops(), &loop);
  if (!loops().empty()) return;
  // The last loop gone, the registry keeps the final state of the loops that ran, one vector
  // (replaced, not added to, by the next run's: a program that counts its live allocations
  // around a second run() sees none left behind), and nothing else.
  std::sort(departed().begin(), departed().end(), [](const core_metrics& a, const core_metrics& b) { return a.core < b.core; });
  final_cores().swap(departed());
  std::vector<core_metrics>().swap(departed());
  std::vector<event_loop*>().swap(loops());
}

void live_metrics::snapshot(core_metrics& out) const noexcept {
  out.iterations = iterations.value();
  out.kernel_waits = kernel_waits.value();
  out.syscalls = syscalls.value();
  out.completions = completions.value();  // before submissions: see operations_in_flight
  out.submissions = submissions.value();
  out.timers_scheduled = timers_scheduled.value();
  out.timers_rescheduled = timers_rescheduled.value();
  out.timers_cancelled = timers_cancelled.value();
  out.timers_fired = timers_fired.value();
  out.tasks_spawned = tasks_spawned.value();
  out.tasks_run = tasks_run.value();
  out.spawn_failures = spawn_failures.value();
  out.remote_messages = remote_messages.value();
  out.remote_wakeups = remote_wakeups.value();
  out.accept_pauses = accept_pauses.value();
  out.epoll_registrations = epoll_registrations.value();
  out.sq_full_flushes = sq_full_flushes.value();
  out.cq_overflows = cq_overflows.value();
  out.clock_jumps = clock_jumps.value();
  out.stalls = stalls.value();
  out.timer_work_ns = timer_work_ns.value();
  out.pending_timers = 0;
  for (std::size_t i = 0; i < pending_timers_per_level.size(); ++i) {
    const std::int64_t v = pending_timers_per_level[i].value();
    out.pending_timers_per_level[i] = v > 0 ? static_cast<std::uint64_t>(v) : 0;
    out.pending_timers += out.pending_timers_per_level[i];
  }
  const std::int64_t ready = ready_tasks.value();
  out.ready_tasks = ready > 0 ? static_cast<std::uint64_t>(ready) : 0;
  // Every submission has exactly one completion dispatched (cancels are not submissions, and
  // the loop's own wake-up read counts as one): the difference is what is in flight. Read
  // completions first, so that a concurrent snapshot never sees more completions than starts.
  out.operations_in_flight = static_cast<std::int64_t>(out.submissions - out.completions);
  out.open_sockets = open_sockets.value() - sockets_departed.load(std::memory_order_relaxed);
  out.pooled_buffers_in_use = pooled_buffers_in_use.value();
  out.timer_lateness = timer_lateness;
  out.iteration_duration = iteration_duration;
  out.phase_ns = phase_ns;
}

}  // namespace detail

const char* to_string(loop_phase p) noexcept {
  switch (p) {
    case loop_phase::timers:
      return "timers";
    case loop_phase::tasks:
      return "tasks";
    case loop_phase::kernel_wait:
      return "kernel_wait";
    case loop_phase::completions:
      return "completions";
  }
  return "unknown";
}

core_metrics this_core_metrics() {
  core_metrics out;
  detail::current_loop().snapshot(out);
  return out;
}

metrics_snapshot snapshot_metrics() {
  using detail::event_loop;
  metrics_snapshot snap;
  event_loop* self = event_loop::current();
  {
    const std::lock_guard lock(detail::registry_mutex());
    for (event_loop* loop : detail::loops()) {
      // On a loop thread: the loops of its runtime only (the peers it can reach).
      if (self != nullptr && loop != self && self->peer(loop->core()) != loop) continue;
      detail::copy_core(*loop, self, snap.cores.emplace_back());
    }
    if (detail::loops().empty()) snap.cores = detail::final_cores();  // none runs: how they ended
    for (const detail::registered& r : detail::metrics()) {
      if (r.what == detail::registered::kind::histogram) {
        snap.histograms.push_back(registered_histogram{r.name, r.help, r.labels, r.core, r.scale,
                                                       *static_cast<const histogram*>(r.object)});
      } else {
        const bool is_counter = r.what == detail::registered::kind::counter;
        const double v = is_counter ? static_cast<double>(static_cast<const counter*>(r.object)->value())
                                    : static_cast<double>(static_cast<const gauge*>(r.object)->value());
        snap.values.push_back(registered_value{r.name, r.help, r.labels, r.core, is_counter, v});
      }
    }
  }
  std::sort(snap.cores.begin(), snap.cores.end(),
            [](const core_metrics& a, const core_metrics& b) { return a.core < b.core; });
  return snap;
}

metric_registration& metric_registration::operator=(metric_registration&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = std::exchange(o.id_, 0);
  }
  return *this;
}

metric_registration::~metric_registration() { reset(); }

void metric_registration::reset() noexcept {
  if (id_ == 0) return;
  const std::lock_guard lock(detail::registry_mutex());
  std::erase_if(detail::metrics(), [id = id_](const detail::registered& r) { return r.id == id; });
  if (detail::metrics().empty()) std::vector<detail::registered>().swap(detail::metrics());
  id_ = 0;
}

metric_registration register_counter(std::string name, std::string help, const counter& c, std::string labels) {
  return metric_registration(detail::add_metric(
      {0, detail::registered::kind::counter, &c, std::move(name), std::move(help), std::move(labels), -1, 1.0}));
}

metric_registration register_gauge(std::string name, std::string help, const gauge& g, std::string labels) {
  return metric_registration(detail::add_metric(
      {0, detail::registered::kind::gauge, &g, std::move(name), std::move(help), std::move(labels), -1, 1.0}));
}

metric_registration register_histogram(std::string name, std::string help, const histogram& h, std::string labels,
                                       double scale) {
  return metric_registration(detail::add_metric(
      {0, detail::registered::kind::histogram, &h, std::move(name), std::move(help), std::move(labels), -1, scale}));
}

}  // namespace cogwheel
