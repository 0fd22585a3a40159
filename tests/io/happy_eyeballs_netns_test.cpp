// Happy Eyeballs on real routes: each test runs in a forked child inside a network namespace of
// its own (unshare(CLONE_NEWNET); reported skipped where the test may not create one, or where
// `ip` or veth links are missing). There a veth link carries 2001:db8::/64 and 192.0.2.0/24 to
// a neighbour that does not exist (a permanent neighbour entry with an unused MAC address): SYNs
// sent there vanish, as on a network whose IPv6 is broken. 127.0.0.1 on the namespace's own
// loopback accepts.
//   - IPv6 dropping beside IPv4 accepting: connected over IPv4 after exactly attempt_delay
//     (paused clock);
//   - every address dropping: cut at the with_timeout deadline exactly, no descriptor left.
#include <cogwheel/io/tcp.hpp>

#include <gtest/gtest.h>

#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include <cogwheel/cogwheel.hpp>

#include "../runtime/child_process.hpp"
#include "../support/temp_file.hpp"
#include "support.hpp"

namespace cogwheel::io_test {
namespace {

using namespace std::chrono_literals;
using test_support::temp_file;

// The child's own exit codes (from test::child_first_free_code).
enum child_code : int {
  no_namespace = test::child_first_free_code,  // skip: unshare or the link set-up failed
  failed,                                      // a check failed (said on stderr)
};
constexpr const char* child_code_names[] = {"no namespace (skip)", "a check failed"};

// In a new network namespace, the routes of the file comment. False (said on stderr) if any
// step fails.
bool enter_namespace_with_dropping_routes() {
  if (::unshare(CLONE_NEWNET) != 0) {
    test::say(std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno));
    return false;
  }
  const char* script =
      "ip link set lo up && ip link add cw0 type veth peer name cw1 && ip link set cw0 up && ip link set cw1 up && "
      "ip -6 addr add 2001:db8::2/64 dev cw0 nodad && ip addr add 192.0.2.2/24 dev cw0 && "
      "ip -6 neigh replace 2001:db8::1 lladdr 02:00:00:00:00:01 dev cw0 nud permanent && "
      "ip neigh replace 192.0.2.1 lladdr 02:00:00:00:00:01 dev cw0 nud permanent";
  if (std::system((std::string("{ ") + script + "; } >/dev/null 2>&1").c_str()) != 0) {
    test::say("could not set up the veth link with ip(8) in the new namespace");
    return false;
  }
  return true;
}

void expect_at_or_fail(clock::duration elapsed, clock::duration expected, bool& ok, const char* what) {
  if (elapsed < expected || elapsed >= expected + 1ms) {
    test::say(std::string(what) + ": took " + std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count()) + " us");
    ok = false;
  }
}

// Runs body(ok) in a namespaced child with `hosts` as the hosts file, on the paused clock.
template <class Body>
void in_namespace(const std::string& hosts_text, Body body) {
  const test::child_result r = test::in_child({.backend_variable = std::getenv("COGWHEEL_BACKEND")}, [&]() -> int {
    if (!enter_namespace_with_dropping_routes()) return no_namespace;
    temp_file hosts(hosts_text);
    runtime_options o;
    o.paused_clock = true;
    o.resolver.hosts_file = hosts.path();
    o.resolver.servers = {"127.0.0.1:1"};  // every name here is in the hosts file
    o.resolver.search = std::vector<std::string>{};
    o.resolver.attempts = 1;
    bool ok = true;
    body(o, ok);
    return ok ? test::child_passed : failed;
  });
  if (r.exit_code == no_namespace) GTEST_SKIP() << "no network namespace here: " << r.err;
  EXPECT_EQ(r.exit_code, test::child_passed) << r.describe(child_code_names);
}

TEST(happy_eyeballs_netns, ipv6_route_dropping_syns_falls_back_to_ipv4_after_the_attempt_delay) {
  in_namespace("2001:db8::1 split.test\n127.0.0.1 split.test\n", [](const runtime_options& o, bool& ok) {
    run([](bool& ok) -> task<> {
      auto l = tcp_listener::bind(socket_address::ipv4_loopback(0));
      if (!l) {
        test::say("bind: " + l.error().message());
        ok = false;
        co_return;
      }
      const std::uint16_t port = l->local_address().port();
      const int before = open_descriptors();
      const auto start = now();
      auto s = co_await with_timeout(tcp_stream::connect("split.test", port, {.attempt_delay = 250ms}), 5s);
      if (!s) {
        test::say("connect: " + s.error().message());
        ok = false;
        co_return;
      }
      expect_at_or_fail(now() - start, 250ms, ok, "IPv4 after the attempt delay");
      if (!s->peer_address()->is_ipv4()) {
        test::say("connected over " + s->peer_address()->to_string());
        ok = false;
      }
      if (open_descriptors() != before + 1) {  // the stream alone: the IPv6 attempt was closed
        test::say("descriptors: " + std::to_string(open_descriptors() - before) + " opened, 1 expected");
        ok = false;
      }
      auto accepted = co_await with_timeout(l->accept(), 5s);
      if (!accepted) ok = false;
    }(ok), o);
  });
}

TEST(happy_eyeballs_netns, every_route_dropping_is_cut_at_the_deadline_leaving_nothing_open) {
  in_namespace("2001:db8::1 dark.test\n192.0.2.1 dark.test\n", [](const runtime_options& o, bool& ok) {
    run([](bool& ok) -> task<> {
      const int before = open_descriptors();
      const auto start = now();
      auto s = co_await with_timeout(tcp_stream::connect("dark.test", 80, {.attempt_delay = 100ms}), 1s);
      if (s || s.error() != errc::timed_out) {
        test::say(std::string("expected timed_out, got ") + (s ? "a connection" : s.error().message()));
        ok = false;
      }
      expect_at_or_fail(now() - start, 1s, ok, "the deadline");
      if (open_descriptors() != before) {
        test::say("descriptors left open: " + std::to_string(open_descriptors() - before));
        ok = false;
      }
    }(ok), o);
  });
}

}  // namespace
}  // namespace cogwheel::io_test
