// The idle-connection scenario without sockets, at a scale sockets cannot reach in one process
// (two descriptors per loopback connection; 20,000 here): N simulated connections, each a
// coroutine that waits for a heartbeat with its idle deadline and pushes the deadline forward
// on each; 10% go silent after a few heartbeats and must be kicked when their deadline passes.
// Heartbeats arrive every 0.5..1.5 s from a simulated network: one driver coroutine that each
// millisecond delivers that millisecond's messages to the connections' mailboxes, as I/O
// completions would, so the timer queue holds only the idle deadlines, as in a real server.
// Runs on the paused clock, so the whole run is CPU and a minute of virtual time takes seconds.
//
// Timer work, measured on either queue the same way: the time inside the queue's advance()
// (core_metrics::timer_work_ns: expiry, cascading and the wheel's lazy re-filing) plus the
// time inside deadline::reset() (where the heap sifts). Each even heartbeat's reset is timed
// between two clock reads; each odd one times the two reads around nothing, in the same place,
// and the mean of those is subtracted, so the reads' own cost is not counted as timer work.
//
// Shared by examples/idle_at_scale.cpp (the demo's last phase) and bench/idle_bench.cpp.
#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include <cogwheel/cogwheel.hpp>

namespace examples {

// A mailbox a simulated connection receives heartbeats through: a cancellable operation (so
// with_deadline can end a wait at the idle deadline), completed by the simulated network.
class mailbox {
 public:
  class receive_operation : public cogwheel::operation<receive_operation> {
   public:
    explicit receive_operation(mailbox& box) noexcept : box_(&box) {}
    receive_operation(receive_operation&& o) noexcept : operation(std::move(o)), box_(o.box_) {}
    std::coroutine_handle<> start(cogwheel::continuation c) {
      if (box_->pending_) {
        box_->pending_ = false;
        return c.complete();
      }
      box_->waiter_ = this;
      continuation_ = c;
      return std::noop_coroutine();
    }
    void cancel() noexcept {
      if (box_->waiter_ != this) return;
      box_->waiter_ = nullptr;
      canceled_ = true;
      later_.post(continuation_);  // cancel() never completes inline
    }
    cogwheel::result<void> result() const noexcept {
      if (canceled_) return cogwheel::errc::operation_canceled;
      return {};
    }
    ~receive_operation() {
      if (box_->waiter_ == this) box_->waiter_ = nullptr;
    }

   private:
    friend class mailbox;
    mailbox* box_;
    cogwheel::continuation continuation_;
    cogwheel::resume_later later_;
    bool canceled_ = false;
  };

  receive_operation receive() noexcept { return receive_operation(*this); }
  // A message arrives: the waiting connection resumes now, or finds it on its next receive.
  void deliver() {
    if (receive_operation* op = std::exchange(waiter_, nullptr))
      op->continuation_.complete().resume();
    else
      pending_ = true;
  }

 private:
  receive_operation* waiter_ = nullptr;
  bool pending_ = false;
};

// What one run of the scenario measured.
struct idle_simulation_result {
  long connections = 0;
  long silent = 0;
  long heartbeats = 0;
  long kicked = 0;
  long wrongly_kicked = 0;      // a connection that kept talking, kicked: must be 0
  double loop_cpu_s = 0;        // the loop thread's CPU over the measured window
  double advance_ns = 0;        // inside the queue's advance()
  double reset_ns = 0;          // inside deadline::reset(), calibrated (see the file comment)
  double clock_pair_ns = 0;     // the calibration: two clock reads around nothing, where resets run
  double timer_ns() const { return advance_ns + reset_ns; }
  double per_heartbeat(double ns) const { return heartbeats == 0 ? 0.0 : ns / static_cast<double>(heartbeats); }
};

// Hooks for a benchmark that looks inside the measured window (none are needed by the demo).
struct idle_simulation_hooks {
  std::function<void()> window_begins;
  // Called at the window's end, while every connection is still alive: each connection's idle
  // deadline where it lives (in its coroutine frame), null for one that has ended.
  std::function<void(const std::vector<cogwheel::deadline*>&)> window_ends;
};

namespace sim {

inline double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct tally {
  long heartbeats = 0;
  long kicked = 0;
  long wrongly_kicked = 0;
  std::uint64_t reset_ns = 0;  // timed resets (even heartbeats)
  long resets_timed = 0;
  std::uint64_t empty_ns = 0;  // the same two clock reads around nothing (odd heartbeats)
  long empties_timed = 0;
  std::vector<cogwheel::deadline*> nodes;
};

// Who receives a message in which millisecond of the run.
struct network {
  std::vector<mailbox> boxes;
  std::vector<std::vector<std::uint32_t>> due;
  cogwheel::clock::time_point start;
  void send_at(std::uint32_t id, cogwheel::clock::time_point at) {
    const auto ms = static_cast<std::size_t>((at - start) / std::chrono::milliseconds(1));
    if (ms < due.size()) due[ms].push_back(id);
  }
};

inline cogwheel::task<void> network_driver(network& net) {
  for (std::size_t ms = 0; ms < net.due.size(); ++ms) {
    co_await cogwheel::sleep_until(net.start + std::chrono::milliseconds(ms));
    std::vector<std::uint32_t> now;
    now.swap(net.due[ms]);
    for (std::uint32_t id : now) net.boxes[id].deliver();
  }
}

inline std::chrono::milliseconds next_gap(std::minstd_rand& rng) {
  return std::chrono::milliseconds(500 + rng() % 1000);
}

// A connection, kicked when no heartbeat arrives for 3 s. A silent one stops its peer after
// `beats` heartbeats; a talking one (beats < 0) keeps going to the end of the run.
inline cogwheel::task<void> connection(std::uint32_t id, long beats, network& net, tally& t) {
  using namespace std::chrono_literals;
  std::minstd_rand rng(id + 1);
  cogwheel::deadline idle(3s);
  t.nodes[id] = &idle;
  struct forget {
    tally& t;
    std::uint32_t id;
    ~forget() { t.nodes[id] = nullptr; }
  } forget_on_exit{t, id};
  net.send_at(id, cogwheel::now() + next_gap(rng));
  for (long i = 0;; ++i) {
    auto got = co_await cogwheel::with_deadline(net.boxes[id].receive(), idle);
    if (!got) {
      if (got.error() != cogwheel::errc::timed_out) co_return;  // shut down
      ++t.kicked;
      if (beats < 0) ++t.wrongly_kicked;
      co_return;
    }
    ++t.heartbeats;
    if ((t.heartbeats & 1) == 0) {
      const auto r0 = cogwheel::clock::now();
      idle.reset(3s);
      t.reset_ns += static_cast<std::uint64_t>(std::chrono::nanoseconds(cogwheel::clock::now() - r0).count());
      ++t.resets_timed;
    } else {
      const auto r0 = cogwheel::clock::now();
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the reads stay two
      t.empty_ns += static_cast<std::uint64_t>(std::chrono::nanoseconds(cogwheel::clock::now() - r0).count());
      ++t.empties_timed;
      idle.reset(3s);
    }
    if (beats < 0 || i + 1 < beats) net.send_at(id, cogwheel::now() + next_gap(rng));
  }
}

}  // namespace sim

// Runs the scenario with n connections on a fresh loop whose timer queue is `kind`, for
// `length` of virtual time after every connection has started.
inline idle_simulation_result simulate_idle_connections(long n, cogwheel::timer_kind kind,
                                                        cogwheel::clock::duration length,
                                                        const idle_simulation_hooks& hooks = {}) {
  using namespace cogwheel;
  sim::tally t;
  t.nodes.assign(static_cast<std::size_t>(n), nullptr);
  idle_simulation_result out;
  out.connections = n;
  std::uint64_t advance_ns = 0;
  sim::network net;
  net.boxes = std::vector<mailbox>(static_cast<std::size_t>(n));
  net.due.resize(static_cast<std::size_t>(length / std::chrono::milliseconds(1)));
  run([&]() -> task<void> {
    net.start = now();
    std::minstd_rand rng(5);
    for (long i = 0; i < n; ++i) {
      const bool goes_silent = rng() % 10 == 0;  // 10% go silent after 1..5 heartbeats
      out.silent += goes_silent ? 1 : 0;
      spawn(sim::connection(static_cast<std::uint32_t>(i), goes_silent ? 1 + static_cast<long>(rng() % 5) : -1,
                                   net, t));
    }
    co_await sleep_for(clock::duration::zero());
    spawn(sim::network_driver(net));
    if (hooks.window_begins) hooks.window_begins();
    const double cpu0 = sim::thread_cpu_seconds();
    const std::uint64_t timer0 = this_core_metrics().timer_work_ns;
    co_await sleep_until(net.start + length);
    out.loop_cpu_s = sim::thread_cpu_seconds() - cpu0;
    advance_ns = this_core_metrics().timer_work_ns - timer0;
    if (hooks.window_ends) hooks.window_ends(t.nodes);
  }(), runtime_options{.timers = kind, .ready_budget = static_cast<unsigned>(n + 16), .paused_clock = true,
                       .measure_timer_work = true,
                       // Starting every connection, and each simulated millisecond's deliveries,
                       // are one iteration each on purpose: not stalls worth a line on stderr.
                       .stall_threshold = clock::duration::zero()});
  const double reset_each = t.resets_timed == 0 || t.empties_timed == 0
                                ? 0.0
                                : static_cast<double>(t.reset_ns) / static_cast<double>(t.resets_timed) -
                                      static_cast<double>(t.empty_ns) / static_cast<double>(t.empties_timed);
  out.heartbeats = t.heartbeats;
  out.kicked = t.kicked;
  out.wrongly_kicked = t.wrongly_kicked;
  out.advance_ns = static_cast<double>(advance_ns);
  out.clock_pair_ns = t.empties_timed == 0 ? 0.0 : static_cast<double>(t.empty_ns) / static_cast<double>(t.empties_timed);
  out.reset_ns = reset_each > 0 ? reset_each * static_cast<double>(t.heartbeats) : 0.0;
  return out;
}

}  // namespace examples
