// timer_peers_bench: bench/timer_bench.cpp's workloads on the timer queues of other libraries,
// with N pending timers, so each row lines up with the wheel's and the heap's row of timer_bench:
//
//   asio      standalone Asio's asio::steady_timer (expires_after + async_wait, cancel)
//   libuv     uv_timer_t (uv_timer_start, uv_timer_stop, uv_timer_again)
//   libevent  evtimer events (event_add with a timeval, event_del)
//   pq_lazy   std::priority_queue with lazy deletion (a generation per timer)
//   ratas     jsnell/ratas's TimerWheel (hierarchical, linked slots), when its header was given
//
// Names are <operation>/<peer>/<N> (timer_bench: <operation>/<wheel|heap>/<N>); the real-clock
// peers' expire rows run a fixed number of rounds, so Google Benchmark appends /iterations:K.
// Each peer is compiled in only when its library was found (COGWHEEL_PEER_*). What each peer's rows include,
// and what could not be measured the way timer_bench measures it: bench/peers/README.md.
//
//   timer_peers_bench [--peers_max_n=1000000] [Google Benchmark flags]
//     --peers_max_n  largest N for asio, libuv and libevent (their set-up and expire take
//                    seconds per round at 1e7); pq_lazy always runs up to 1e7 as timer_bench does.
//
// The timed loops do batches of 1024 operations and then call the peer's end_batch(): Asio runs
// the handlers of the waits it cancelled there (every cancel in Asio completes a handler); for
// the others it is empty.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "thread_clock.hpp"
#include "workload.hpp"

#include "pq_lazy_timers.hpp"
#ifdef COGWHEEL_PEER_ASIO
#include <asio/version.hpp>

#include "asio_timers.hpp"
#endif
#ifdef COGWHEEL_PEER_LIBUV
#include "libuv_timers.hpp"
#endif
#ifdef COGWHEEL_PEER_LIBEVENT
#include "libevent_timers.hpp"
#endif
#ifdef COGWHEEL_PEER_RATAS
#include "ratas_timers.hpp"
#endif

namespace peers {
namespace {

const std::vector<std::int64_t> pending_counts{1'000, 10'000, 100'000, 1'000'000, 10'000'000};
constexpr std::size_t batch = 1024;

// expire on a real clock: deadlines at whole milliseconds over this window, after a lead that
// covers arming them all, so the loop fires ~window_ms groups of due timers, one wake-up each.
constexpr std::uint64_t window_ms = 50;
constexpr std::chrono::milliseconds min_lead{10};

// N timers of one peer, and what the timed loops carry from one benchmark to the next.
template <class Peer>
struct population {
  explicit population(std::size_t n)
      : size(n), rng{0x5eed0000 + n}, order(shuffled_order(n, rng)), peer(n) {}

  // Precondition: no timer is pending. Schedules all N in shuffled order, each due 1..spread_ms
  // after the peer's time (timer_bench's deadlines, drawn from the same seed).
  void schedule_all() {
    for (const std::uint32_t i : order) peer.schedule(i, milliseconds(1 + rng.below(spread_ms)));
    peer.end_batch();
  }
  void cancel_all() {
    for (const std::uint32_t i : order) peer.cancel(i);
    peer.end_batch();
  }

  std::size_t size;
  splitmix64 rng;
  std::vector<std::uint32_t> order;  // a random permutation of 0..N-1: the schedule order
  Peer peer;
  std::size_t cursor = 0;            // the next entry of draws() to use
  std::uint64_t bumps_left = bumps_per_node * size;
  std::chrono::nanoseconds lead{min_lead + std::chrono::microseconds(size)};  // expire, real clock
};

// The N pending timers that churn, schedule_cancel, reschedule_later and next_deadline share.
template <class Peer>
struct pending_population : population<Peer> {
  explicit pending_population(std::size_t n) : population<Peer>(n) { this->schedule_all(); }
};

// expire's own timers (idle between rounds), so rounds reuse the queue's grown capacity.
template <class Peer>
struct expiry_bed : population<Peer> {
  using population<Peer>::population;
};

// One population alive at a time: at N = 1e6 one takes 100-300 MB, and benchmarks are registered
// peer by peer and N by N, so each is built once and freed before the next is built.
std::shared_ptr<void> live_population;
const void* live_kind = nullptr;
std::size_t live_size = 0;

template <class T>
T& only_population(std::size_t n) {
  static const char kind = 0;  // one address per T
  if (live_kind != &kind || live_size != n) {
    live_population.reset();
    live_population = std::make_shared<T>(n);
    live_kind = &kind;
    live_size = n;
  }
  return *static_cast<T*>(live_population.get());
}

template <class Peer>
void check_size(benchmark::State& state, const population<Peer>& p) {
  if (!p.peer.holds(p.size)) state.SkipWithError("the queue lost or gained timers");
}

// Cancel a random pending timer and schedule it again 1..60000 ms ahead. N stays constant.
template <class Peer>
void churn(benchmark::State& state, std::size_t n) {
  population<Peer>& p = only_population<pending_population<Peer>>(n);
  const draw_table& d = draws();
  Peer& q = p.peer;
  std::size_t j = p.cursor;
  while (state.KeepRunningBatch(batch)) {
    for (std::size_t k = 0; k < batch; ++k) {
      const std::size_t i = node_index(d.pick[j], n);
      q.cancel(i);
      q.schedule(i, d.delay[j]);
      j = (j + 1) & draw_table::mask;
    }
    q.end_batch();
  }
  p.cursor = j;
  state.SetItemsProcessed(state.iterations());
  check_size(state, p);
}

// Schedule one more timer (a spare, hot in cache) at a random deadline among the N, and cancel it
// at once: the timeout that is not needed.
template <class Peer>
void schedule_cancel(benchmark::State& state, std::size_t n) {
  population<Peer>& p = only_population<pending_population<Peer>>(n);
  const draw_table& d = draws();
  Peer& q = p.peer;
  std::size_t j = p.cursor;
  while (state.KeepRunningBatch(batch)) {
    for (std::size_t k = 0; k < batch; ++k) {
      q.schedule_spare(d.delay[j]);
      q.cancel_spare();
      j = (j + 1) & draw_table::mask;
    }
    q.end_batch();
  }
  p.cursor = j;
  state.SetItemsProcessed(state.iterations());
  check_size(state, p);
}

// Push a random pending timer's deadline 1..1000 ms later: the idle timeout of a connection that
// just saw traffic. Every bumps_per_node * N pushes, all deadlines are re-drawn (untimed).
template <class Peer>
void reschedule_later(benchmark::State& state, std::size_t n) {
  population<Peer>& p = only_population<pending_population<Peer>>(n);
  const draw_table& d = draws();
  Peer& q = p.peer;
  std::size_t j = p.cursor;
  while (state.KeepRunningBatch(batch)) {
    if (p.bumps_left < batch) [[unlikely]] {
      state.PauseTiming();
      p.cancel_all();
      p.schedule_all();
      p.bumps_left = bumps_per_node * n;
      state.ResumeTiming();
    }
    p.bumps_left -= batch;
    for (std::size_t k = 0; k < batch; ++k) {
      q.push_later(node_index(d.pick[j], n), d.bump[j]);
      j = (j + 1) & draw_table::mask;
    }
    q.end_batch();
  }
  p.cursor = j;
  state.SetItemsProcessed(state.iterations());
  check_size(state, p);
}

// Ask for the earliest deadline, as an event loop does before every sleep (peers that have such
// a call: libuv's uv_backend_timeout, pq_lazy's top after dropping stale entries).
template <class Peer>
void next_deadline(benchmark::State& state, std::size_t n) {
  population<Peer>& p = only_population<pending_population<Peer>>(n);
  Peer& q = p.peer;
  for (auto _ : state) benchmark::DoNotOptimize(q.next_deadline());
  state.SetItemsProcessed(state.iterations());
  check_size(state, p);
}

// expire on the fake clock, exactly as timer_bench: schedule N timers (untimed), then advance
// 1 ms at a time until every one has fired. ns_per_timer is the advance loop's CPU time divided
// by the timers fired.
template <class Peer>
void expire_fake_clock(benchmark::State& state, std::size_t n) {
  population<Peer>& p = only_population<expiry_bed<Peer>>(n);
  Peer& q = p.peer;
  double timed_ns = 0;
  std::uint64_t fired = 0;
  for (auto _ : state) {
    state.PauseTiming();
    p.schedule_all();
    state.ResumeTiming();
    const double begin = thread_cpu_ns();
    std::uint64_t now = q.now();
    std::uint64_t round = 0;
    while (!q.empty()) round += q.advance(++now);
    timed_ns += thread_cpu_ns() - begin;
    fired += round;
  }
  if (fired != n * state.iterations()) state.SkipWithError("not every timer fired exactly once");
  state.SetItemsProcessed(static_cast<std::int64_t>(fired));
  state.counters["ns_per_timer"] = fired == 0 ? 0.0 : timed_ns / static_cast<double>(fired);
}

// expire on the real clock, for peers whose loop reads it: arm N timers (untimed) due at whole
// milliseconds spread over window_ms after a lead that covers the arming, then run the peer's
// loop until every one has fired. ns_per_timer is the loop's CPU time (asleep between deadlines
// costs none) divided by the timers fired; it includes the loop's wake-ups (sleeps_per_round of
// them), which the fake clock does not have. late_rounds counts rounds whose arming outlasted the
// lead, so that some timers were already due when the loop started.
template <class Peer>
void expire_real_clock(benchmark::State& state, std::size_t n) {
  population<Peer>& p = only_population<expiry_bed<Peer>>(n);
  Peer& q = p.peer;
  double timed_ns = 0;
  std::uint64_t fired = 0;
  std::int64_t sleeps = 0;
  std::int64_t late = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const auto t0 = std::chrono::steady_clock::now();
    q.begin_arming(p.lead);
    for (const std::uint32_t i : p.order) q.arm(i, milliseconds(p.rng.below(window_ms)));
    const auto arming = std::chrono::steady_clock::now() - t0;
    if (arming > p.lead) ++late;
    p.lead = std::max<std::chrono::nanoseconds>(min_lead, arming * 3 / 2);  // for the next round
    state.ResumeTiming();
    const double begin = thread_cpu_ns();
    const std::int64_t sleeps0 = thread_sleeps();
    fired += q.run_until_idle();
    sleeps += thread_sleeps() - sleeps0;
    timed_ns += thread_cpu_ns() - begin;
  }
  if (fired != n * state.iterations()) state.SkipWithError("not every timer fired exactly once");
  const double rounds = static_cast<double>(state.iterations());
  state.SetItemsProcessed(static_cast<std::int64_t>(fired));
  state.counters["ns_per_timer"] = fired == 0 ? 0.0 : timed_ns / static_cast<double>(fired);
  state.counters["sleeps_per_round"] = static_cast<double>(sleeps) / rounds;
  state.counters["late_rounds"] = static_cast<double>(late);
}

using workload = void (*)(benchmark::State&, std::size_t);

benchmark::internal::Benchmark* add(const char* op, const char* peer, std::int64_t n, workload fn) {
  const std::string name = std::string(op) + "/" + peer + "/" + std::to_string(n);
  return benchmark::RegisterBenchmark(name.c_str(), [fn, n](benchmark::State& state) {
    fn(state, static_cast<std::size_t>(n));
  });
}

// Peer by peer, N ascending, every operation at one N before the next N: registration order is
// run order, so each population is built once (see only_population).
template <class Peer>
void register_peer(std::int64_t max_n) {
  for (const std::int64_t n : pending_counts) {
    if (n > max_n) break;
    add("churn", Peer::name, n, &churn<Peer>)->Unit(benchmark::kNanosecond);
    add("schedule_cancel", Peer::name, n, &schedule_cancel<Peer>)->Unit(benchmark::kNanosecond);
    add("reschedule_later", Peer::name, n, &reschedule_later<Peer>)->Unit(benchmark::kNanosecond);
    if constexpr (requires(Peer& q) { q.next_deadline(); })
      add("next_deadline", Peer::name, n, &next_deadline<Peer>)->Unit(benchmark::kNanosecond);
    if constexpr (Peer::fake_clock) {
      add("expire", Peer::name, n, &expire_fake_clock<Peer>)->Unit(benchmark::kMillisecond);
    } else {
      // Fixed rounds: a round mostly sleeps through its window, and the default policy would
      // repeat it until the CPU time reached --benchmark_min_time (minutes at small N).
      const std::int64_t rounds = std::clamp<std::int64_t>(1'000'000 / n, 2, 10);
      add("expire", Peer::name, n, &expire_real_clock<Peer>)->Unit(benchmark::kMillisecond)->Iterations(rounds);
    }
  }
}

// Takes --peers_max_n=N out of argv (Google Benchmark rejects flags it does not know).
std::int64_t take_max_n(int& argc, char** argv) {
  std::int64_t max_n = 1'000'000;
  constexpr const char* flag = "--peers_max_n=";
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0)
      max_n = std::strtoll(argv[i] + std::strlen(flag), nullptr, 10);
    else
      argv[out++] = argv[i];
  }
  argc = out;
  return max_n;
}

}  // namespace
}  // namespace peers

int main(int argc, char** argv) {
  [[maybe_unused]] const std::int64_t max_n = peers::take_max_n(argc, argv);  // pq_lazy alone: unused
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cogwheel_timer_tick", "pq_lazy: 1 ms fake clock; asio, libuv, libevent: real clock");
  benchmark::AddCustomContext("cogwheel_compiler", __VERSION__);
#ifdef NDEBUG
  benchmark::AddCustomContext("cogwheel_asserts", "off (NDEBUG)");
#else
  benchmark::AddCustomContext("cogwheel_asserts", "ON: not a release build, numbers are slow");
#endif
#ifdef COGWHEEL_PEER_ASIO
  benchmark::AddCustomContext("asio_version", std::to_string(ASIO_VERSION / 100000) + "." +
                                                  std::to_string(ASIO_VERSION / 100 % 1000) + "." +
                                                  std::to_string(ASIO_VERSION % 100));
  peers::register_peer<peers::asio_timers>(max_n);
#endif
#ifdef COGWHEEL_PEER_LIBUV
  benchmark::AddCustomContext("libuv_version", uv_version_string());
  peers::register_peer<peers::libuv_timers>(max_n);
#endif
#ifdef COGWHEEL_PEER_LIBEVENT
  benchmark::AddCustomContext("libevent_version", event_get_version());
  peers::register_peer<peers::libevent_timers>(max_n);
#endif
#ifdef COGWHEEL_PEER_RATAS
  peers::register_peer<peers::ratas_timers>(10'000'000);  // fake clock, as timer_bench: to 1e7
#endif
  peers::register_peer<peers::pq_lazy_timers>(10'000'000);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
