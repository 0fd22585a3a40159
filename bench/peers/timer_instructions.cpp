// timer_instructions: one timer workload run once, with no timing, so that callgrind can count
// the instructions a queue spends per operation (timer_instructions.sh drives it). This machine
// is a VM without hardware counters and is shared: instruction counts are the one measure of a
// small change that does not move with the load. The workloads are timer_bench's:
//   churn            cancel a random one of N pending timers and schedule it 1..60,000 ms ahead
//   schedule_cancel  schedule a spare timer among N pending ones and cancel it at once
//   expire           schedule N timers 1..60,000 ms ahead and advance 1 ms at a time until all
//                    fired (OPS is the number of such rounds)
//   idle             idle_bench's pattern on the bare wheel (wheel only): N connections whose
//                    3 s deadline a heartbeat every 500..1499 ms pushes to now + 3 s, 10% silent
//                    after 1..5 heartbeats, OPS ms in 1 ms steps; advance() runs in
//                    measured_idle_advance, the heartbeat's reschedule in measured_idle_reset,
//                    and the heartbeat count is printed (issue 27 item 8, docs/timer.md)
// Queues: cogwheel's timer_wheel; the benchmark references bench/linked_wheel.hpp (linked) and
// bench/striped_list_wheel.hpp (striped4, striped8, striped16: the design probe of docs/timer.md);
// and ratas when built with it (COGWHEEL_PEER_RATAS).
// Usage: timer_instructions QUEUE WORKLOAD N OPS. The measured loop is measured_<workload>.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <cogwheel/timer/wheel.hpp>

#include "../linked_wheel.hpp"
#include "../striped_list_wheel.hpp"
#ifdef COGWHEEL_PEER_RATAS
#include "ratas_timers.hpp"
#endif

namespace {

using namespace std::chrono_literals;
using milliseconds = std::chrono::milliseconds;

std::uint64_t xorshift(std::uint64_t& x) {
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

// A wheel behind the interface of bench/peers' adapters (index-addressed timers): cogwheel's
// timer_wheel, or a benchmark reference (linked_wheel, striped_list_wheel<K>). Node is its node
// type; every node gets an empty callback where the node has one.
template <class Wheel, class Node>
class wheel_timers {
 public:
  explicit wheel_timers(std::size_t n)
      : queue_(1ms, cogwheel::timer::clock::time_point(milliseconds(1'000'000'000))),
        nodes_(new Node[n + 1]), spare_(n) {
    for (std::size_t i = 0; i <= n; ++i) {
      if constexpr (requires(Node& x) { x.set_on_expire([](Node&) noexcept {}); })
        nodes_[i].set_on_expire([](Node&) noexcept {});
      else if constexpr (requires(Node& x) { x.on_expire; })
        nodes_[i].on_expire = [](Node&) noexcept {};
    }
  }
  void schedule(std::size_t i, milliseconds delay) { queue_.schedule(nodes_[i], now_ + delay); }
  void cancel(std::size_t i) { queue_.cancel(nodes_[i]); }
  void schedule_spare(milliseconds delay) { schedule(spare_, delay); }
  void cancel_spare() { cancel(spare_); }
  bool empty() const noexcept { return queue_.empty(); }
  void tick() {
    now_ += 1ms;
    queue_.advance(now_);
  }
  ~wheel_timers() {  // timer_node aborts when destroyed while scheduled
    for (std::size_t i = 0; i <= spare_; ++i) queue_.cancel(nodes_[i]);
  }

 private:
  Wheel queue_;
  std::unique_ptr<Node[]> nodes_;
  std::size_t spare_;
  cogwheel::timer::clock::time_point now_ = queue_.now();
};
using cogwheel_timers = wheel_timers<cogwheel::timer::timer_wheel, cogwheel::timer::timer_node>;

#ifdef COGWHEEL_PEER_RATAS
struct ratas_queue : peers::ratas_timers {
  explicit ratas_queue(std::size_t n) : ratas_timers(n) {}
  void tick() { advance(now() + 1); }
};
#endif

struct inputs {
  std::vector<std::uint32_t> pick;
  std::vector<milliseconds> delay;
};

template <class Q>
[[gnu::noinline]] void measured_churn(Q& q, const inputs& in) {
  for (std::size_t j = 0; j < in.pick.size(); ++j) {
    q.cancel(in.pick[j]);
    q.schedule(in.pick[j], in.delay[j]);
  }
}

template <class Q>
[[gnu::noinline]] void measured_schedule_cancel(Q& q, const inputs& in) {
  for (const milliseconds d : in.delay) {
    q.schedule_spare(d);
    q.cancel_spare();
  }
}

template <class Q>
[[gnu::noinline]] void measured_expire(Q& q, const inputs& in, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) q.schedule(i, in.delay[i]);
  while (!q.empty()) q.tick();
}

// The idle pattern's two halves, each its own function so that callgrind can count them apart.
[[gnu::noinline]] void measured_idle_advance(cogwheel::timer::timer_wheel& w, cogwheel::timer::clock::time_point now) {
  w.advance(now);
}
[[gnu::noinline]] void measured_idle_reset(cogwheel::timer::timer_wheel& w, cogwheel::timer::timer_node& n,
                                           cogwheel::timer::clock::time_point deadline) {
  w.reschedule(n, deadline);
}

// A connection record of about a coroutine frame's size, the node first (as in idle_bench).
struct idle_connection {
  cogwheel::timer::timer_node node;
  std::uint64_t rng = 0;
  long beats = -1;  // heartbeats left before it goes silent; < 0: never
  bool kicked = false;
  char frame[128] = {};
};

int run_idle(std::size_t n, std::size_t ms) {
  const cogwheel::timer::clock::time_point start{milliseconds(1'000'000'000)};
  auto conns = std::make_unique<idle_connection[]>(n);
  cogwheel::timer::timer_wheel w(1ms, start);
  std::vector<std::vector<std::uint32_t>> due(ms);
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (std::size_t i = 0; i < n; ++i) {
    idle_connection& c = conns[i];
    c.rng = i + 1;
    c.beats = xorshift(x) % 10 == 0 ? static_cast<long>(1 + xorshift(x) % 5) : -1;
    c.node.set_on_expire([](cogwheel::timer::timer_node& node) noexcept {
      reinterpret_cast<idle_connection&>(node).kicked = true;  // node is the first member
    });
    w.schedule(c.node, start + 3s);
    const std::size_t at = 500 + xorshift(c.rng) % 1000;
    if (at < ms) due[at].push_back(static_cast<std::uint32_t>(i));
  }
  std::uint64_t heartbeats = 0;
  for (std::size_t t = 0; t < ms; ++t) {
    const auto now = start + milliseconds(t);
    measured_idle_advance(w, now);
    std::vector<std::uint32_t> list;
    list.swap(due[t]);
    for (const std::uint32_t id : list) {
      idle_connection& c = conns[id];
      if (c.kicked) continue;
      ++heartbeats;
      measured_idle_reset(w, c.node, now + 3s);
      if (c.beats < 0 || --c.beats > 0) {
        const std::size_t at = t + 500 + xorshift(c.rng) % 1000;
        if (at < ms) due[at].push_back(id);
      }
    }
  }
  std::printf("heartbeats %llu moved %llu\n", static_cast<unsigned long long>(heartbeats),
              static_cast<unsigned long long>(w.moved()));
  for (std::size_t i = 0; i < n; ++i) w.cancel(conns[i].node);
  return 0;
}

template <class Q>
int run(const char* workload, std::size_t n, std::size_t ops) {
  Q q(n);
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  inputs in;
  const std::size_t draws = std::strcmp(workload, "expire") == 0 ? n : ops;
  for (std::size_t j = 0; j < draws; ++j) {
    in.pick.push_back(static_cast<std::uint32_t>(xorshift(x) % n));
    in.delay.push_back(milliseconds(1 + xorshift(x) % 60'000));
  }
  if (std::strcmp(workload, "expire") == 0) {
    for (std::size_t r = 0; r < ops; ++r) measured_expire(q, in, n);
    return 0;
  }
  for (std::size_t i = 0; i < n; ++i) q.schedule(i, milliseconds(1 + xorshift(x) % 60'000));
  if (std::strcmp(workload, "churn") == 0) {
    measured_churn(q, in);
  } else if (std::strcmp(workload, "schedule_cancel") == 0) {
    measured_schedule_cancel(q, in);
  } else {
    std::fprintf(stderr, "unknown workload %s\n", workload);
    return 2;
  }
  for (std::size_t i = 0; i < n; ++i) q.cancel(i);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s wheel|linked|striped4|striped8|striped8l|striped16|ratas churn|schedule_cancel|expire|idle N OPS\n", argv[0]);
    return 2;
  }
  const std::size_t n = std::strtoull(argv[3], nullptr, 0);
  const std::size_t ops = std::strtoull(argv[4], nullptr, 0);
  if (n == 0 || ops == 0) return 2;
  if (std::strcmp(argv[1], "wheel") == 0 && std::strcmp(argv[2], "idle") == 0) return run_idle(n, ops);
  if (std::strcmp(argv[1], "wheel") == 0) return run<cogwheel_timers>(argv[2], n, ops);
  using cogwheel_bench::striped_list_wheel;
  using cogwheel_bench::striped_node;
  if (std::strcmp(argv[1], "linked") == 0)
    return run<wheel_timers<cogwheel_bench::linked_wheel, cogwheel_bench::linked_node>>(argv[2], n, ops);
  if (std::strcmp(argv[1], "striped4") == 0)
    return run<wheel_timers<striped_list_wheel<4>, striped_node>>(argv[2], n, ops);
  if (std::strcmp(argv[1], "striped8") == 0)
    return run<wheel_timers<striped_list_wheel<8>, striped_node>>(argv[2], n, ops);
  if (std::strcmp(argv[1], "striped8l") == 0)
    return run<wheel_timers<striped_list_wheel<8, striped_node, true>, striped_node>>(argv[2], n, ops);
  if (std::strcmp(argv[1], "striped16") == 0)
    return run<wheel_timers<striped_list_wheel<16>, striped_node>>(argv[2], n, ops);
#ifdef COGWHEEL_PEER_RATAS
  if (std::strcmp(argv[1], "ratas") == 0) return run<ratas_queue>(argv[2], n, ops);
#endif
  std::fprintf(stderr, "queue %s not built\n", argv[1]);
  return 3;
}
