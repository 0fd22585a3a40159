/// @file
/// What an operator sees of a runtime: per-core counters, gauges and histograms (timer
/// lateness, iteration duration, time per phase), as snapshots taken from any thread, plus the
/// counters and histograms libraries and users register. to_prometheus() (prometheus.hpp)
/// writes a snapshot in Prometheus's text format.
///
/// Every core keeps its own (nothing shared on the hot path, nothing allocated): single-writer
/// cells that the owning core updates with relaxed atomic loads and stores and that any thread
/// reads with relaxed loads. Counting is on unless runtime_options::metrics turns it off (then
/// the counters of correctness, iterations, completions, timers fired, still count).
///
/// Threading: this_core_metrics() on a loop thread; snapshot_metrics() and the registration
/// functions on any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <cogwheel/runtime/histogram.hpp>
#include <cogwheel/runtime/options.hpp>

namespace cogwheel {

/// A monotonic counter with one writer (the thread that owns it) and readers on any thread.
/// It saturates at 2^64 - 1 instead of wrapping (a scraper reads a counter that goes down as a
/// reset).
class counter {
 public:
  /// Adds n, saturating at 2^64 - 1. Writer only: a relaxed load and store, no locked
  /// instruction.
  void add(std::uint64_t n = 1) noexcept {
    v_.store(detail::saturating_add(v_.load(std::memory_order_relaxed), n), std::memory_order_relaxed);
  }
  /// Adds one (writer only).
  counter& operator++() noexcept {
    add(1);
    return *this;
  }
  /// Adds n (writer only).
  counter& operator+=(std::uint64_t n) noexcept {
    add(n);
    return *this;
  }
  /// The current value (any thread).
  std::uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

/// A value that goes up and down, set by one writer and read on any thread.
class gauge {
 public:
  /// Sets the value (writer only).
  void set(std::int64_t v) noexcept { v_.store(v, std::memory_order_relaxed); }
  /// Adds n, which may be negative (writer only).
  void add(std::int64_t n) noexcept { set(value() + n); }
  /// The current value (any thread).
  std::int64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> v_{0};
};

/// The phases of a loop iteration that are timed (see core_metrics::phase_ns).
enum class loop_phase : unsigned {
  timers,       ///< advancing the timer queue and resuming the expired waiters
  tasks,        ///< resuming ready coroutines, and delivering other cores' messages
  kernel_wait,  ///< inside the I/O backend's submit-and-wait call (blocked or polling)
  completions,  ///< dispatching I/O completions to their owners
};
/// How many loop_phase values there are.
inline constexpr unsigned loop_phase_count = 4;
/// The phase's name as it appears in labels: "timers", "tasks", "kernel_wait", "completions".
const char* to_string(loop_phase p) noexcept;

/// Levels of the timer wheel (pending_timers_per_level's first entries); the heap has one.
inline constexpr unsigned timer_level_count = 11;

/// One core's metrics at one moment: a plain value, copied out of the core's live cells.
struct core_metrics {
  unsigned core = 0;                              ///< the core's index in its runtime
  timer_kind timers = timer_kind::wheel;          ///< the core's timer queue
  backend_kind backend = backend_kind::io_uring;  ///< the core's I/O backend

  // Counters (monotonic from the loop's start).
  std::uint64_t iterations = 0;          ///< loop iterations
  std::uint64_t kernel_waits = 0;        ///< iterations that blocked (or would have) in the kernel
  std::uint64_t syscalls = 0;            ///< system calls the I/O backend made (waits included)
  std::uint64_t submissions = 0;         ///< I/O operations started (SQEs, or epoll operations;
                                         ///< the loop's own wake-up reads included)
  std::uint64_t completions = 0;         ///< I/O completions dispatched (CQEs, or epoll results)
  std::uint64_t timers_scheduled = 0;    ///< timers scheduled (an idle timer's reschedule too)
  std::uint64_t timers_rescheduled = 0;  ///< deadlines of pending timers moved
  std::uint64_t timers_cancelled = 0;    ///< pending timers cancelled before they fired
  std::uint64_t timers_fired = 0;        ///< timers that expired
  std::uint64_t tasks_spawned = 0;       ///< coroutines spawned (detached) on this core
  std::uint64_t tasks_run = 0;           ///< resumptions from the ready queue
  std::uint64_t spawn_failures = 0;      ///< spawned tasks that ended with an exception
  std::uint64_t remote_messages = 0;     ///< messages from other cores delivered (submit_to)
  std::uint64_t remote_wakeups = 0;      ///< times another core woke this loop from its sleep
  std::uint64_t accept_pauses = 0;       ///< listeners' accept back-pressure pauses (EMFILE...)
  std::uint64_t epoll_registrations = 0; ///< epoll: descriptors added to the loop's set (once per
                                         ///< socket and loop, however often it waits)
  std::uint64_t sq_full_flushes = 0;     ///< io_uring: the SQ was full and submitted to make room
  std::uint64_t cq_overflows = 0;        ///< io_uring: reaps that found overflowed CQEs
  std::uint64_t clock_jumps = 0;         ///< paused clock: jumps to the next deadline
  std::uint64_t stalls = 0;              ///< iterations longer than the stall threshold
  std::uint64_t timer_work_ns = 0;       ///< time inside the timer queue's advance() alone
                                         ///< (runtime_options::measure_timer_work)

  // Gauges.
  /// Pending timers: wheel levels 0..10 then the wheel's overdue and not yet filed ones at
  /// index timer_level_count; a heap counts them all at index 0.
  std::array<std::uint64_t, timer_level_count + 1> pending_timers_per_level{};
  std::uint64_t pending_timers = 0;      ///< the sum of pending_timers_per_level
  std::uint64_t ready_tasks = 0;         ///< the ready queue's depth
  std::int64_t operations_in_flight = 0; ///< I/O operations started and not yet completed
  /// Sockets of the io library (tcp_stream, udp_socket; listeners not included) open with this
  /// core as their home: the core they were opened on or last started an operation on.
  std::int64_t open_sockets = 0;
  /// Buffers of this core's buffer pools lent out: held by pooled_buffer handles, or taken by
  /// a read whose completion is not yet handed over.
  std::int64_t pooled_buffers_in_use = 0;

  // Histograms, in nanoseconds.
  histogram timer_lateness;      ///< when a timer fired minus its deadline's tick boundary
  histogram iteration_duration;  ///< an iteration's time minus its blocking in the kernel
  std::array<histogram, loop_phase_count> phase_ns;  ///< time per phase, by loop_phase
};

/// A counter or gauge registered by a library or user (see register_counter).
struct registered_value {
  std::string name;    ///< metric name, e.g. "cogwheel_delay_queue_claims"
  std::string help;    ///< one line for HELP
  std::string labels;  ///< extra labels, already formatted (`queue="jobs"`), may be empty
  int core = -1;       ///< the core that registered it (a `core` label), -1 for none
  bool is_counter = true;  ///< exported as a counter (`_total`, monotonic) or, when false, a gauge
  double value = 0;        ///< the value when the snapshot was taken
};

/// A histogram registered by a library or user (see register_histogram).
struct registered_histogram {
  std::string name;    ///< metric name; exported with `_seconds` when scale is 1e-9
  std::string help;    ///< one line for HELP
  std::string labels;  ///< extra labels, already formatted, may be empty
  int core = -1;       ///< the registering core (a `core` label), -1 for none
  double scale = 1e-9; ///< exported value = recorded value * scale (1e-9: ns to seconds)
  histogram values;    ///< a copy of the registered histogram
};

/// Every core of a runtime and every registered metric at one moment.
struct metrics_snapshot {
  std::vector<core_metrics> cores;                ///< by core index
  std::vector<registered_value> values;           ///< registered counters and gauges
  std::vector<registered_histogram> histograms;   ///< registered histograms
};

/// The calling thread's core, exact (its gauges derived now). Precondition: called on a
/// cogwheel loop thread.
core_metrics this_core_metrics();

/// Every core and every registered metric, from any thread. On a loop thread: the cores of
/// its runtime; elsewhere: every loop running in the process. Counters and histograms are as
/// of the call; the gauges a core derives from its own structures (pending timers per level,
/// ready tasks) are as of that core's last publication: at most ~10 ms of its loop time old,
/// and refreshed before it sleeps. A core's own entry, taken on its thread, is exact.
///
/// When no loop is running (after run() or runtime::run() returned), `cores` is the final
/// state of the loops that ran last: each core's metrics as its loop shut down (after its
/// tasks ended, before spawned ones still pending are destroyed), kept until loops run again
/// and their last one stops. Registered metrics are always the live registry's.
metrics_snapshot snapshot_metrics();

/// The window between two snapshots of one core (`later` taken after `earlier`): counters and
/// histograms are later's minus earlier's, gauges and identity fields later's. A counter or
/// histogram cell that is larger in `earlier` (the snapshots are swapped, or of different
/// runs) gives 0, never a wrapped difference; one saturated in `later` stays saturated (its
/// window is unknown). See histogram's operator- for the histograms.
core_metrics operator-(const core_metrics& later, const core_metrics& earlier) noexcept;

/// The window between two snapshots, entry by entry: cores matched by index, registered
/// metrics by name, labels and core. Each core as for core_metrics; registered counters and
/// histograms subtract (clamped at 0 as above), registered gauges are later's. An entry only
/// in `later` is kept as it is (it started in the window); one only in `earlier` is dropped.
/// E.g. the last ten seconds' timer lateness: `(now - ten_seconds_ago).cores[0].timer_lateness`.
metrics_snapshot operator-(const metrics_snapshot& later, const metrics_snapshot& earlier);

/// A registration of a metric in the process-wide registry; unregisters when destroyed.
/// The registered object must outlive the registration. Movable, not copyable.
class metric_registration {
 public:
  /// Registers nothing.
  metric_registration() = default;
  /// Takes over o's registration (o becomes empty).
  metric_registration(metric_registration&& o) noexcept : id_(o.id_) { o.id_ = 0; }
  /// Unregisters this one's metric, then takes over o's.
  metric_registration& operator=(metric_registration&& o) noexcept;
  metric_registration(const metric_registration&) = delete;
  metric_registration& operator=(const metric_registration&) = delete;
  /// Unregisters (thread-safe; a snapshot in progress has already copied the value).
  ~metric_registration();
  /// Unregisters now (no-op when empty).
  void reset() noexcept;

 private:
  friend metric_registration register_counter(std::string, std::string, const counter&, std::string);
  friend metric_registration register_gauge(std::string, std::string, const gauge&, std::string);
  friend metric_registration register_histogram(std::string, std::string, const histogram&, std::string, double);
  explicit metric_registration(std::uint64_t id) noexcept : id_(id) {}
  std::uint64_t id_ = 0;
};

/// Registers c as `name` (a Prometheus name: [a-zA-Z_:][a-zA-Z0-9_:]*; `_total` is added on
/// export). `labels` are extra labels as the text format writes them (`queue="jobs",route="/"`:
/// each name once, values with `\`, `"` and newlines escaped as `\\`, `\"`, `\n`; the names
/// `core`, `__`-prefixed ones and, for a histogram, `le` are reserved); on a loop thread a
/// `core` label is added. The help text is free text (escaped on export). Thread-safe; throws
/// std::invalid_argument on a malformed name or label set, which would otherwise make the whole
/// exposition unparseable.
metric_registration register_counter(std::string name, std::string help, const counter& c, std::string labels = {});
/// As register_counter, for a gauge.
metric_registration register_gauge(std::string name, std::string help, const gauge& g, std::string labels = {});
/// As register_counter, for a histogram; exported values are recorded values * scale (the
/// default turns nanoseconds into seconds, and `_seconds` is then expected in the name).
metric_registration register_histogram(std::string name, std::string help, const histogram& h, std::string labels = {},
                                       double scale = 1e-9);

}  // namespace cogwheel
