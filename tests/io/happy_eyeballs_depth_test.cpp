// tcp_stream::connect(host, port) over many addresses keeps a constant depth: each test runs its
// loop on a thread whose stack is small (small_stack below), so a race that nests a coroutine
// per address, and cascades completions or stop requests through them on the C++ stack, dies of
// a stack overflow here. Addresses come from a hosts file of the test's own (127.1.x.y, as many
// as a hostile name server could give and more), all on one port where:
//   - nothing listens: every attempt is refused, one after another;
//   - a listener with a full accept queue on 0.0.0.0 drops SYNs: every attempt hangs until the
//     connect is cut (with_timeout at every moment of the race, or a deadline scope);
//   - the local address to bind is taken: every attempt fails inside start(), synchronously.
// One case takes its 128 addresses from the fake DNS server instead, answered late. The peak of
// live heap allocations during a connect (task frames included) must not grow with its
// addresses. Every case also checks that no descriptor is left open.
#include <cogwheel/io/tcp.hpp>

#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <cogwheel/cogwheel.hpp>

#include "../support/fake_dns.hpp"
#include "../support/temp_file.hpp"
#include "support.hpp"

namespace {
// Live heap allocations of the whole process and their peak since the last reset_peak(): what
// one connect holds at its busiest. Task frames normally come from the frame pools, which this
// count cannot see: here they go through operator new (read at the first frame).
std::atomic<long> live_allocations{0};
std::atomic<long> peak_allocations{0};
const int frames_counted = ::setenv("COGWHEEL_FRAME_POOL", "0", 1);

void reset_peak() { peak_allocations.store(live_allocations.load()); }
}  // namespace

void* operator new(std::size_t n) {
  if (void* p = std::malloc(n == 0 ? 1 : n)) {
    const long live = live_allocations.fetch_add(1, std::memory_order_relaxed) + 1;
    long peak = peak_allocations.load(std::memory_order_relaxed);
    while (live > peak && !peak_allocations.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
    return p;
  }
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  live_allocations.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }

namespace cogwheel::io_test {
namespace {

using test_support::fake_dns;
using test_support::temp_file;

using namespace std::chrono_literals;

// The stack the loop runs on: the chain of races this replaced overflowed it (Release and ASan,
// both backends) with 1,000 addresses failing inside bind() or cut in flight; the loop needs a
// constant few KiB, redzones included.
constexpr std::size_t small_stack = 32 * 1024;

// Runs fn on a new thread with a stack of small_stack bytes, and waits for it.
void on_small_stack(const std::function<void()>& fn) {
  pthread_attr_t attr;
  ASSERT_EQ(::pthread_attr_init(&attr), 0);
  ASSERT_EQ(::pthread_attr_setstacksize(&attr, small_stack), 0);
  pthread_t thread;
  auto body = [](void* p) -> void* {
    (*static_cast<const std::function<void()>*>(p))();
    return nullptr;
  };
  ASSERT_EQ(::pthread_create(&thread, &attr, body, const_cast<std::function<void()>*>(&fn)), 0);
  ::pthread_attr_destroy(&attr);
  ::pthread_join(thread, nullptr);
}

// A hosts file naming `count` IPv4 loopback addresses (127.1.x.y) "many.test".
temp_file many_hosts(int count) {
  std::string text;
  char line[64];
  for (int i = 0; i < count; ++i) {
    std::snprintf(line, sizeof line, "127.1.%d.%d many.test\n", i / 250, i % 250 + 1);
    text += line;
  }
  return temp_file(text);
}

runtime_options with_hosts(const temp_file& hosts, bool paused) {
  runtime_options o;
  o.paused_clock = paused;
  o.resolver.hosts_file = hosts.path();
  o.resolver.servers = {"127.0.0.1:1"};  // every name here is in the hosts file
  o.resolver.search = std::vector<std::string>{};
  o.resolver.attempts = 1;
  return o;
}

// A port nothing listens on (bound, then closed).
std::uint16_t closed_port() {
  auto probe = tcp_listener::bind(socket_address::ipv4_any(0));
  if (!probe) return 0;
  const std::uint16_t port = probe->local_address().port();
  probe->close();
  return port;
}

// A listener on 0.0.0.0 that accepts nothing, its accept queue full: SYNs to any 127.x.y.z on
// its port are dropped, so a connect there hangs until cancelled.
class black_hole {
 public:
  black_hole() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const socket_address at = socket_address::ipv4_any(0);
    if (::bind(fd_, at.data(), at.size()) != 0 || ::listen(fd_, 0) != 0) return;
    auto bound = socket_address::local_of(fd_);
    if (!bound) return;
    port_ = bound->port();
    const socket_address to = socket_address::ipv4_loopback(port_);
    for (int i = 0; i < 2; ++i) {  // the first fills the queue, the second is already dropped
      const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      (void)::connect(c, to.data(), to.size());
      fillers_.push_back(c);
      ::usleep(20000);
    }
  }
  black_hole(const black_hole&) = delete;
  black_hole& operator=(const black_hole&) = delete;
  ~black_hole() {
    for (int c : fillers_) ::close(c);
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const noexcept { return port_ != 0; }
  std::uint16_t port() const noexcept { return port_; }

 private:
  int fd_ = -1;
  std::vector<int> fillers_;
  std::uint16_t port_ = 0;
};

TEST(happy_eyeballs_depth, refused_addresses_one_after_another_on_a_small_stack) {
  const std::uint16_t port = closed_port();
  ASSERT_NE(port, 0);
  for (int count : {128, 1000}) {
    const temp_file hosts = many_hosts(count);
    const int before = open_descriptors();
    on_small_stack([&] {
      run([](std::uint16_t port) -> task<> {
        auto s = co_await with_timeout(tcp_stream::connect("many.test", port), 60s);
        EXPECT_EQ(s.error(), std::errc::connection_refused);
      }(port), with_hosts(hosts, false));
    });
    EXPECT_EQ(open_descriptors(), before) << count << " addresses";
  }
}

TEST(happy_eyeballs_depth, what_a_connect_holds_does_not_grow_with_its_addresses) {
  // Refused one after another: the race holds one attempt at a time, so its peak of live
  // allocations is the same for 16 addresses as for 512 (the answer's own vectors aside: a
  // few doublings).
  const std::uint16_t port = closed_port();
  ASSERT_NE(port, 0);
  ASSERT_EQ(frames_counted, 0);
  long held[2] = {0, 0};
  int i = 0;
  for (int count : {16, 512}) {
    const temp_file hosts = many_hosts(count);
    run([](std::uint16_t port, long& held) -> task<> {
      (void)co_await resolve("many.test", 9);  // the name is cached: its lookup holds nothing new
      const long before = live_allocations.load();
      reset_peak();
      auto s = co_await with_timeout(tcp_stream::connect("many.test", port), 60s);
      EXPECT_EQ(s.error(), std::errc::connection_refused);
      held = peak_allocations.load() - before;
    }(port, held[i++]), with_hosts(hosts, false));
  }
  EXPECT_LE(held[1], held[0] + 8) << "16 addresses: " << held[0] << " live at most, 512: " << held[1];
}

TEST(happy_eyeballs_depth, attempts_failing_inside_start_on_a_small_stack) {
  // Binding to a local address whose port a listener holds fails with EADDRINUSE before the
  // connect is submitted: each attempt ends within the call that starts it.
  auto taken = tcp_listener::bind(socket_address::ipv4_loopback(0));
  ASSERT_TRUE(taken);
  const socket_address local = taken->local_address();
  for (int count : {128, 1000}) {
    const temp_file hosts = many_hosts(count);
    const int before = open_descriptors();
    on_small_stack([&] {
      run([](socket_address local) -> task<> {
        auto s = co_await with_timeout(tcp_stream::connect("many.test", 9, {.local_address = local}), 60s);
        EXPECT_EQ(s.error(), std::errc::address_in_use);
      }(local), with_hosts(hosts, false));
    });
    EXPECT_EQ(open_descriptors(), before) << count << " addresses";
  }
}

TEST(happy_eyeballs_depth, black_holed_attempts_cut_at_every_moment_on_a_small_stack) {
  // 1 ms apart on the paused clock: a cut at k ms finds k + 1 attempts in flight (all of them
  // from 128 on); at 0 ms, before the first has been reaped.
  black_hole hole;
  if (!hole.ok()) GTEST_SKIP() << "no black hole on 0.0.0.0 here";
  const temp_file hosts = many_hosts(128);
  const int before = open_descriptors();
  const int step = scaled(10, 1) < 10 ? 7 : 1;  // sanitized (COGWHEEL_TEST_SCALE < 1): every 7th
  on_small_stack([&] {
    run([](std::uint16_t port, int step) -> task<> {
      for (int cut = 0; cut <= 140; cut += step) {
        const auto start = now();
        auto s = co_await with_timeout(tcp_stream::connect("many.test", port, {.attempt_delay = 1ms}),
                                       std::chrono::milliseconds(cut));
        EXPECT_EQ(s.error(), errc::timed_out) << "cut at " << cut << " ms";
        EXPECT_LT(now() - start, std::chrono::milliseconds(cut) + 1ms);
      }
      // The same under a deadline scope around the caller, and a stop from a sibling that wins.
      deadline d(130ms);
      auto in_scope = co_await with_deadline(
          [](std::uint16_t port) -> task<result<tcp_stream>> {
            co_return co_await tcp_stream::connect("many.test", port, {.attempt_delay = 1ms});
          }(port),
          d);
      EXPECT_EQ(in_scope.error(), errc::timed_out);
      auto raced = co_await when_any(tcp_stream::connect("many.test", port, {.attempt_delay = 1ms}),
                                     [](std::uint16_t) -> task<result<tcp_stream>> {
                                       co_await sleep_for(129ms);
                                       co_return errc::timed_out;
                                     }(port));
      EXPECT_EQ(raced.index, 1u);
    }(hole.port(), step), with_hosts(hosts, true));
  });
  EXPECT_EQ(open_descriptors(), before);
}

TEST(happy_eyeballs_depth, a_thousand_black_holed_attempts_in_flight_stopped_on_a_small_stack) {
  black_hole hole;
  if (!hole.ok()) GTEST_SKIP() << "no black hole on 0.0.0.0 here";
  const temp_file hosts = many_hosts(1000);
  const int before = open_descriptors();
  on_small_stack([&] {
    run([](std::uint16_t port) -> task<> {
      auto s = co_await with_timeout(tcp_stream::connect("many.test", port, {.attempt_delay = 1ms}), 2s);
      EXPECT_EQ(s.error(), errc::timed_out);
    }(hole.port()), with_hosts(hosts, true));
  });
  EXPECT_EQ(open_descriptors(), before);
}

TEST(happy_eyeballs_depth, connects_whose_frames_are_destroyed_mid_race_leave_nothing_open) {
  // Spawned, then left suspended when run() ends: the frame goes with up to 128 attempts in
  // flight (each cancelled and waited for as it is destroyed), or before the first started.
  black_hole hole;
  if (!hole.ok()) GTEST_SKIP() << "no black hole on 0.0.0.0 here";
  const temp_file hosts = many_hosts(128);
  const int before = open_descriptors();
  for (int after : {0, 1, 2, 64, 200}) {
    on_small_stack([&] {
      run([](std::uint16_t port, int after) -> task<> {
        spawn([](std::uint16_t port) -> task<> {
          (void)co_await tcp_stream::connect("many.test", port, {.attempt_delay = 1ms});
          ADD_FAILURE() << "a black-holed connect ended";
        }(port));
        co_await sleep_for(std::chrono::milliseconds(after));
      }(hole.port(), after), with_hosts(hosts, true));
    });
    EXPECT_EQ(open_descriptors(), before) << "destroyed after " << after << " ms";
  }
}

TEST(happy_eyeballs_depth, a_name_server_giving_128_black_holed_addresses_cut_at_every_moment) {
  // 64 A (127.1.0.x) and 64 AAAA (::ffff:127.1.0.x, IPv4-mapped: the same loopback black hole),
  // answered 10 ms late (AAAA 20 ms), TTL 0 (never cached): connects are cut
  // before, between and after the answers, with up to every attempt in flight (the shape of a
  // name server that decides how many addresses a name has).
  // Counted with the server gone too: a TCP query's connection is its thread's to close.
  const int before = open_descriptors();
  int asked = 0;
  {
    fake_dns dns;
    if (!dns.ok()) GTEST_SKIP() << "cannot listen on a loopback port for the fake DNS server";
    black_hole hole;
    if (!hole.ok()) GTEST_SKIP() << "no black hole on 0.0.0.0 here";
    fake_dns::rule r{.ttl = 0, .delay = 10ms, .aaaa_delay = 20ms};
    for (int i = 1; i <= 64; ++i) {
      r.a.push_back("127.1.0." + std::to_string(i));
      r.aaaa.push_back("::ffff:127.1.0." + std::to_string(i));
    }
    dns.set("hostile.test", r);
    const temp_file empty("");
    runtime_options o = with_hosts(empty, false);
    o.resolver.servers = {dns.server()};
    o.resolver.timeout = 5000ms;
    const int step = scaled(10, 1) < 10 ? 20 : 6;  // ms between cuts; sanitized: fewer
    on_small_stack([&] {
      run([](std::uint16_t port, int step) -> task<> {
        for (int cut = 0; cut <= 180; cut += step) {
          auto s = co_await with_timeout(tcp_stream::connect("hostile.test", port, {.attempt_delay = 1ms}),
                                         std::chrono::milliseconds(cut));
          EXPECT_EQ(s.error(), errc::timed_out) << "cut at " << cut << " ms";
        }
      }(hole.port(), step), o);
    });
    asked = dns.queries("hostile.test", 28);
  }
  EXPECT_EQ(open_descriptors(), before);
  EXPECT_GE(asked, 1);  // the addresses did come from the name server
}

}  // namespace
}  // namespace cogwheel::io_test
