// deadline_bench: what deadline scopes cost (docs/deadlines.md), as in-run ratios.
//
//   scope/ready_op/naked            an operation that completes inside start() (the cheapest
//   scope/ready_op/inside_scope     possible: no kernel, no queue), awaited in a task without
//                                   a scope, and in a task under with_timeout(task, 1h): the
//                                   check before start (the effective deadline against the
//                                   clock) is all the difference; the worst case
//   scope/udp_send/naked            a UDP send_to on loopback (a real operation that completes
//   scope/udp_send/inside_scope     at once), the same two ways
//   scope/never_fires               with_timeout(task, 1h) around a task that completes at
//                                   once: a scope that never fires. This row compiles against
//                                   the runtime before scopes existed too (commit 04391f2):
//                                   build it there, run both binaries interleaved, compare.
//
// Usage: deadline_bench [--benchmark_filter=scope] [--benchmark_repetitions=5]
//                       [--benchmark_report_aggregates_only=true]
// Needs: nothing beyond the runtime (io_uring, or epoll where it is blocked).
#include <benchmark/benchmark.h>

#include <chrono>
#include <coroutine>

#include <cogwheel/cogwheel.hpp>

#if __has_include(<cogwheel/runtime/detail/deadline_scope.hpp>)
#define COGWHEEL_HAS_SCOPES 1
#else
#define COGWHEEL_HAS_SCOPES 0
#endif

namespace {

using namespace cogwheel;
using namespace std::chrono_literals;

task<void> completes_at_once() { co_return; }

void bm_never_fires(benchmark::State& state) {
  run([](benchmark::State& state) -> task<void> {
    for (auto _ : state) {
      result<void> r = co_await with_timeout(completes_at_once(), 1h);
      benchmark::DoNotOptimize(r);
    }
  }(state));
}

#if COGWHEEL_HAS_SCOPES

// Completes inside start(): the awaiting coroutine goes on at once (symmetric transfer).
class ready_operation : public operation<ready_operation> {
 public:
  std::coroutine_handle<> start(continuation c) noexcept { return c.complete(); }
  void cancel() noexcept {}
  cogwheel::result<int> result() const noexcept { return 1; }
};

template <class Body>
void run_maybe_scoped(Body body, bool scoped) {
  run([](Body body, bool scoped) -> task<void> {
    if (scoped)
      (void)co_await with_timeout(body(), 1h);
    else
      co_await body();
  }(std::move(body), scoped));
}

void bm_ready_op(benchmark::State& state, bool scoped) {
  run_maybe_scoped([&state]() -> task<void> {
    for (auto _ : state) {
      auto r = co_await ready_operation();
      benchmark::DoNotOptimize(r);
    }
  }, scoped);
}

void bm_udp_send(benchmark::State& state, bool scoped) {
  auto sink = udp_socket::bind(socket_address::ipv4_loopback(0));
  auto from = udp_socket::bind(socket_address::ipv4_loopback(0));
  if (!sink || !from) {
    state.SkipWithError("cannot bind UDP sockets on loopback");
    return;
  }
  const socket_address target = sink->local_address();
  run_maybe_scoped([&]() -> task<void> {
    const std::byte payload[16]{};
    for (auto _ : state) {
      auto n = co_await from->send_to(payload, target);  // nobody reads: the kernel drops
      benchmark::DoNotOptimize(n);                        // what the buffer cannot hold
    }
  }, scoped);
}

#endif

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
#if COGWHEEL_HAS_SCOPES
  benchmark::RegisterBenchmark("scope/ready_op/naked", bm_ready_op, false);
  benchmark::RegisterBenchmark("scope/ready_op/inside_scope", bm_ready_op, true);
  benchmark::RegisterBenchmark("scope/udp_send/naked", bm_udp_send, false);
  benchmark::RegisterBenchmark("scope/udp_send/inside_scope", bm_udp_send, true);
#endif
  benchmark::RegisterBenchmark("scope/never_fires", bm_never_fires);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
