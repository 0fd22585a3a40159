// idle_bench: the idle-connection scenario without sockets, at a scale sockets cannot reach
// here: N simulated connections, each a coroutine that waits for a heartbeat message and resets
// its idle deadline on each; 10% go silent after a few heartbeats and are kicked when their
// deadline passes. Heartbeats arrive every 0.5..1.5 s from a simulated network: one driver
// coroutine that each millisecond delivers that millisecond's messages to the connections'
// mailboxes, like I/O completions (not timers), so the timer queue holds only the idle
// deadlines, as in a real server. Runs on the paused clock for 15 s of virtual time, so the
// whole measurement is CPU; wheel and heap in one run.
//
// Names: idle/<kind>/<N>. Counters:
//   timer_pct   timer work as a share of the loop thread's CPU time. Timer work = time inside
//               the queue's advance() (expiry and cascading, core_metrics::timer_work_ns) + time in
//               deadline::reset() (timed around every other call; the other heartbeats time
//               an empty pair of clock reads in the same place, whose mean is subtracted).
//   advance_pct, reset_pct   the two parts of timer_pct. reset_pct is the less certain one: a
//               reset takes a few ns, the two clock reads around it tens of ns.
//   clock_pair_ns, clock_loop_ns   an empty pair of clock reads where the resets run, and one
//               clock read in a tight loop (the calibration used before 2026-11-25, which
//               left ~25 ns of the reads' cost per heartbeat in reset_pct)
//   cpu_ns_per_heartbeat   loop thread CPU per heartbeat handled (everything)
//   timer_ns_per_heartbeat timer work (as timer_pct) per heartbeat handled
//   kicked, silent, wrongly_kicked (must be 0)
//
// Built with -DCOGWHEEL_TIMER_COVERAGE (CMAKE_CXX_FLAGS, a build of its own: the library must be
// compiled with it too), it also reports what the wheel did per heartbeat over the measured 15 s:
// visit_{entries,nodes,moves}_per_hb, sample_nodes_per_hb, due_nodes_per_hb,
// cascade_moves_per_hb, filed_per_hb, visit_restarts (timer/detail/wheel_coverage.hpp).
//
// miss_floor/N: the floor of timer work per heartbeat, in the same run: read-modify-write one
// field of a random node among N 32-byte nodes (a cache and TLB miss at 1e6), per touch.
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <cogwheel/cogwheel.hpp>
#ifdef COGWHEEL_TIMER_COVERAGE
#include <cogwheel/timer/detail/wheel_coverage.hpp>
#endif

using namespace cogwheel;
using namespace std::chrono_literals;

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct tally {
  long heartbeats = 0;
  long kicked = 0;
  long wrongly_kicked = 0;
  // The reset is timed on even heartbeats; on odd ones the same two clock reads around nothing
  // (the reset done untimed): their difference is the reset, calibrated where it runs (a
  // tight loop's clock cost, subtracted before, left the reads' share in these cold
  // surroundings in the reset: 32 ns per reset where callgrind counts ~32 instructions).
  std::uint64_t reset_ns = 0;
  long resets_timed = 0;
  std::uint64_t empty_ns = 0;
  long empties_timed = 0;
  // Each connection's idle deadline where it lives (in its coroutine frame), null once the
  // connection ended: the nodes the in-place floor touches.
  std::vector<deadline*> nodes;
};

// A mailbox a simulated connection receives heartbeats through: a cancellable operation (so
// with_deadline can cancel a wait), completed by the network driver.
class mailbox {
 public:
  class receive_operation : public operation<receive_operation> {
   public:
    explicit receive_operation(mailbox& box) noexcept : box_(&box) {}
    receive_operation(receive_operation&& o) noexcept : operation(std::move(o)), box_(o.box_) {}
    std::coroutine_handle<> start(continuation c) {
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
      if (canceled_) return errc::operation_canceled;
      return {};
    }
    ~receive_operation() {
      if (box_->waiter_ == this) box_->waiter_ = nullptr;
    }

   private:
    friend class mailbox;
    mailbox* box_;
    continuation continuation_;
    resume_later later_;
    bool canceled_ = false;
  };

  receive_operation receive() noexcept { return receive_operation(*this); }
  void deliver() {
    if (receive_operation* op = std::exchange(waiter_, nullptr)) {
      op->continuation_.complete().resume();
    } else {
      pending_ = true;
    }
  }

 private:
  receive_operation* waiter_ = nullptr;
  bool pending_ = false;
};

// The simulated network: who receives a message in which millisecond.
struct network {
  std::vector<mailbox> boxes;
  std::vector<std::vector<std::uint32_t>> due;  // per millisecond of the run
  clock::time_point start;
  void send_at(std::uint32_t id, clock::time_point at) {
    const auto ms = static_cast<std::size_t>((at - start) / 1ms);
    if (ms < due.size()) due[ms].push_back(id);
  }
};

task<void> network_driver(network& net) {
  for (std::size_t ms = 0; ms < net.due.size(); ++ms) {
    co_await sleep_until(net.start + std::chrono::milliseconds(ms));
    std::vector<std::uint32_t> now;
    now.swap(net.due[ms]);
    for (std::uint32_t id : now) net.boxes[id].deliver();
  }
}

std::chrono::milliseconds next_gap(std::minstd_rand& rng) { return std::chrono::milliseconds(500 + rng() % 1000); }

// A connection: kicked when no heartbeat arrives for 3 s. A silent one stops its peer after
// `beats` heartbeats; a talking one (beats < 0) keeps going to the end of the run.
task<void> connection(std::uint32_t id, long beats, network& net, tally& t) {
  std::minstd_rand rng(id + 1);
  deadline idle(3s);
  t.nodes[id] = &idle;
  struct forget {
    tally& t;
    std::uint32_t id;
    ~forget() { t.nodes[id] = nullptr; }
  } forget_on_exit{t, id};
  net.send_at(id, now() + next_gap(rng));
  for (long i = 0;; ++i) {
    auto got = co_await with_deadline(net.boxes[id].receive(), idle);
    if (!got) {
      if (got.error() != errc::timed_out) co_return;  // shut down
      ++t.kicked;
      if (beats < 0) ++t.wrongly_kicked;
      co_return;
    }
    ++t.heartbeats;
    if ((t.heartbeats & 1) == 0) {
      const auto r0 = clock::now();
      idle.reset(3s);
      t.reset_ns += static_cast<std::uint64_t>(std::chrono::nanoseconds(clock::now() - r0).count());
      ++t.resets_timed;
    } else {
      const auto r0 = clock::now();
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the reads stay two
      t.empty_ns += static_cast<std::uint64_t>(std::chrono::nanoseconds(clock::now() - r0).count());
      ++t.empties_timed;
      idle.reset(3s);
    }
    if (beats < 0 || i + 1 < beats) net.send_at(id, now() + next_gap(rng));
  }
}

std::uint64_t clock_read_cost_ns() {
  const int n = 100000;
  const auto t0 = clock::now();
  for (int i = 0; i < n; ++i) benchmark::DoNotOptimize(clock::now());
  return static_cast<std::uint64_t>(std::chrono::nanoseconds(clock::now() - t0).count() / n);
}

// The in-place floor: the cost of touching one random node of the run's own (its connections'
// deadlines where they live, in their coroutine frames), timed the same way as miss_floor (a
// read-modify-write of the node's first word, which writes back what it read, in a precomputed
// random order) in thread CPU time, while the connections are still alive. miss_floor packs its
// nodes 32 bytes apart (32 MB at 1e6, about this machine's L3); the wheel's nodes are spread
// over the frames, and a touch of one of those is what a re-file pays.
double in_place_floor_ns(const std::vector<deadline*>& nodes) {
  std::vector<volatile std::uint64_t*> live;
  for (deadline* d : nodes)
    if (d != nullptr) live.push_back(reinterpret_cast<volatile std::uint64_t*>(d));
  if (live.empty()) return 0.0;
  std::vector<volatile std::uint64_t*> pick(std::size_t{1} << 20);
  std::minstd_rand rng(11);
  for (auto& p : pick) p = live[rng() % live.size()];
  constexpr int rounds = 4;
  const double cpu0 = thread_cpu_seconds();
  for (int r = 0; r < rounds; ++r)
    for (volatile std::uint64_t* p : pick) *p = *p;
  return (thread_cpu_seconds() - cpu0) * 1e9 / (static_cast<double>(rounds) * static_cast<double>(pick.size()));
}

void bm_idle(benchmark::State& state, timer_kind kind) {
  const auto n = static_cast<long>(state.range(0));
  const std::uint64_t clock_ns = clock_read_cost_ns();
  for (auto _ : state) {
    tally t;
    t.nodes.assign(static_cast<std::size_t>(n), nullptr);
    double floor_ns = 0;
#ifdef COGWHEEL_TIMER_COVERAGE
    timer::detail::wheel_coverage window;  // the wheel's paths over the measured 15 s
#endif
    long silent = 0;
    double cpu = 0;
    std::uint64_t timer_ns = 0;
    network net;
    net.boxes = std::vector<mailbox>(static_cast<std::size_t>(n));
    net.due.resize(15000);
    run([&]() -> task<void> {
      net.start = now();
      std::minstd_rand rng(5);
      for (long i = 0; i < n; ++i) {
        const bool goes_silent = rng() % 10 == 0;  // 10% go silent after 1..5 heartbeats
        silent += goes_silent ? 1 : 0;
        spawn(connection(static_cast<std::uint32_t>(i), goes_silent ? 1 + static_cast<long>(rng() % 5) : -1, net, t));
      }
      co_await sleep_for(0ns);
      spawn(network_driver(net));
#ifdef COGWHEEL_TIMER_COVERAGE
      timer::detail::coverage() = {};
#endif
      const double cpu0 = thread_cpu_seconds();
      const std::uint64_t timer0 = this_core_metrics().timer_work_ns;
      co_await sleep_until(net.start + 15s);
      cpu = thread_cpu_seconds() - cpu0;
#ifdef COGWHEEL_TIMER_COVERAGE
      window = timer::detail::coverage();
#endif
      timer_ns = this_core_metrics().timer_work_ns - timer0;
      floor_ns = in_place_floor_ns(t.nodes);
    }(), runtime_options{.timers = kind, .ready_budget = static_cast<unsigned>(n + 16), .paused_clock = true,
                         .measure_timer_work = true});
    // Per heartbeat: the timed resets' mean less the empty pairs' mean, calibrated in place.
    const double reset_each = t.resets_timed == 0 || t.empties_timed == 0
                                  ? 0.0
                                  : static_cast<double>(t.reset_ns) / static_cast<double>(t.resets_timed) -
                                        static_cast<double>(t.empty_ns) / static_cast<double>(t.empties_timed);
    const double reset_ns = reset_each * static_cast<double>(t.heartbeats);
    const double timer_s = (static_cast<double>(timer_ns) + std::max(0.0, reset_ns)) * 1e-9;
    state.SetIterationTime(cpu);
    state.counters["timer_pct"] = 100.0 * timer_s / cpu;
    state.counters["advance_pct"] = 100.0 * static_cast<double>(timer_ns) * 1e-9 / cpu;
    state.counters["reset_pct"] = 100.0 * std::max(0.0, reset_ns) * 1e-9 / cpu;
    state.counters["cpu_ns_per_heartbeat"] = cpu * 1e9 / static_cast<double>(t.heartbeats);
    state.counters["timer_ns_per_heartbeat"] = timer_s * 1e9 / static_cast<double>(t.heartbeats);
    // The clock pair's cost where the resets run, against a tight loop's (the old calibration).
    state.counters["clock_pair_ns"] =
        t.empties_timed == 0 ? 0.0 : static_cast<double>(t.empty_ns) / static_cast<double>(t.empties_timed);
    state.counters["clock_loop_ns"] = static_cast<double>(clock_ns);
    state.counters["in_place_floor_ns"] = floor_ns;
    state.counters["timer_per_floor"] =
        floor_ns > 0 ? timer_s * 1e9 / static_cast<double>(t.heartbeats) / floor_ns : 0.0;
    state.counters["kicked"] = static_cast<double>(t.kicked);
    state.counters["silent"] = static_cast<double>(silent);
    state.counters["wrongly_kicked"] = static_cast<double>(t.wrongly_kicked);
#ifdef COGWHEEL_TIMER_COVERAGE
    {
      const timer::detail::wheel_coverage& c = window;
      const double hb = static_cast<double>(t.heartbeats);
      state.counters["visit_entries_per_hb"] = static_cast<double>(c.visit_entries) / hb;
      state.counters["visit_nodes_per_hb"] = static_cast<double>(c.visit_nodes) / hb;
      state.counters["visit_moves_per_hb"] = static_cast<double>(c.visit_moves) / hb;
      state.counters["sample_nodes_per_hb"] = static_cast<double>(c.sample_nodes) / hb;
      state.counters["due_nodes_per_hb"] = static_cast<double>(c.due_nodes) / hb;
      state.counters["cascade_moves_per_hb"] = static_cast<double>(c.cascade_moves) / hb;
      state.counters["visit_restarts"] = static_cast<double>(c.visit_restarts);
      long filed = 0;
      for (auto f : c.filed) filed += static_cast<long>(f);
      state.counters["filed_per_hb"] = static_cast<double>(filed) / hb;
    }
#endif
  }
}

// The miss floor: one random 32-byte node among n touched (its first word incremented); the
// indices come from a precomputed table read in order, so only the node's miss is timed.
void bm_miss_floor(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  struct alignas(32) node {
    std::uint64_t word[4] = {};
  };
  std::vector<node> nodes(n);
  std::vector<std::uint32_t> pick(std::size_t{1} << 20);
  std::minstd_rand rng(11);
  for (auto& p : pick) p = static_cast<std::uint32_t>(rng() % n);
  std::size_t j = 0;
  for (auto _ : state) {
    ++nodes[pick[j]].word[0];
    j = (j + 1) & (pick.size() - 1);
  }
  benchmark::DoNotOptimize(nodes.data());
  state.SetItemsProcessed(state.iterations());
}

void register_all() {
  benchmark::RegisterBenchmark("miss_floor", bm_miss_floor)->Arg(1000000);
  for (auto [name, kind] : {std::pair{"idle/wheel", timer_kind::wheel}, std::pair{"idle/heap", timer_kind::heap}})
    benchmark::RegisterBenchmark(name, bm_idle, kind)
        ->Arg(100000)
        ->Arg(1000000)
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
