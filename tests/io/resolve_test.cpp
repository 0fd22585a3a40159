// resolve(host, port): numbers and the hosts file answer at once; other names are asked of a
// DNS server the test starts on loopback (fake_dns.hpp), whose every kind of answer and
// failure maps to its own error; timeouts cut a lookup exactly and detach its query; answers
// are cached for their TTL and failures for negative_ttl; nothing is left open afterwards.
#include <cogwheel/io/resolve.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <cogwheel/cogwheel.hpp>

#include "../support/fake_dns.hpp"

#include "support.hpp"
#include "../support/temp_file.hpp"

namespace cogwheel::io_test {
namespace {

using test_support::fake_dns;
using test_support::temp_file;

using namespace std::chrono_literals;

// Options that ask only `dns` (no search list, one try of `timeout`) with an empty hosts file.
runtime_options asking(const fake_dns& dns, const temp_file& hosts, std::chrono::milliseconds timeout = 2000ms,
                       bool paused = false) {
  runtime_options o;
  o.paused_clock = paused;
  o.resolver.servers = {dns.server()};
  o.resolver.search = std::vector<std::string>{};
  o.resolver.ndots = 1;
  o.resolver.timeout = timeout;
  o.resolver.attempts = 1;
  o.resolver.hosts_file = hosts.path();
  return o;
}

std::vector<std::string> texts(const std::vector<socket_address>& v) {
  std::vector<std::string> out;
  for (const socket_address& a : v) out.push_back(a.to_string());
  return out;
}

// resolve(name, 1) within 5 s gives this one address.
task<> expect_answer(std::string name, std::string want) {
  auto r = co_await with_timeout(resolve(name, 1), 5s);
  CO_ASSERT_OK(r);
  EXPECT_EQ(texts(*r), std::vector<std::string>{want}) << name;
}

class resolve_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dns_.ok()) GTEST_SKIP() << "cannot listen on a loopback port for the fake DNS server";
    descriptors_ = open_descriptors();
  }
  void TearDown() override {
    if (dns_.ok()) {
      // The fake server's thread closes a TCP connection only once it has read the client's
      // end of stream: give it a moment before counting.
      for (int i = 0; i < 100 && open_descriptors() != descriptors_; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_EQ(open_descriptors(), descriptors_) << "a socket was left open";
    }
  }
  fake_dns dns_;
  temp_file hosts_{"10.1.2.3 fromfile.test alias.test\n::1 fromfile.test\n# 10.9.9.9 commented.test\n"};
  int descriptors_ = 0;
};

TEST_F(resolve_test, numeric_hosts_answer_at_once_without_any_server) {
  run([]() -> task<> {
    auto v4 = co_await resolve("127.0.0.1", 80);
    CO_ASSERT_OK(v4);
    EXPECT_EQ(texts(*v4), std::vector<std::string>{"127.0.0.1:80"});
    auto v6 = co_await resolve("::1", 81);
    CO_ASSERT_OK(v6);
    EXPECT_EQ(texts(*v6), std::vector<std::string>{"[::1]:81"});
    auto bracketed = co_await resolve("[::1]", 82);
    CO_ASSERT_OK(bracketed);
    EXPECT_EQ(texts(*bracketed), std::vector<std::string>{"[::1]:82"});
  }(), asking(dns_, hosts_));
}

TEST_F(resolve_test, a_name_in_the_hosts_file_answers_from_it_without_a_query) {
  run([]() -> task<> {
    const auto start = now();
    auto r = co_await resolve("FromFile.test.", 443);
    CO_ASSERT_OK(r);
    EXPECT_EQ(texts(*r), (std::vector<std::string>{"[::1]:443", "10.1.2.3:443"}));
    auto alias = co_await resolve("alias.test", 1);
    CO_ASSERT_OK(alias);
    EXPECT_EQ(texts(*alias), std::vector<std::string>{"10.1.2.3:1"});
    EXPECT_EQ(now(), start);  // at once, not a loop iteration later
  }(), asking(dns_, hosts_, 2000ms, true));
  EXPECT_EQ(dns_.queries("fromfile.test") + dns_.queries("alias.test"), 0);
}

TEST_F(resolve_test, localhost_is_loopback_without_a_query_when_the_file_omits_it) {
  run([]() -> task<> {
    auto r = co_await resolve("localhost", 7);
    CO_ASSERT_OK(r);
    EXPECT_EQ(texts(*r), (std::vector<std::string>{"[::1]:7", "127.0.0.1:7"}));
    auto sub = co_await resolve("api.localhost", 7);
    CO_ASSERT_OK(sub);
    EXPECT_EQ(sub->size(), 2u);
  }(), asking(dns_, hosts_));
  EXPECT_EQ(dns_.queries("localhost"), 0);
}

TEST_F(resolve_test, addresses_come_from_the_server_ipv6_first_with_the_port) {
  dns_.set("both.test", {.a = {"192.0.2.1", "192.0.2.2"}, .aaaa = {"2001:db8::1"}});
  run([]() -> task<> {
    auto r = co_await with_timeout(resolve("both.test", 8080), 5s);
    CO_ASSERT_OK(r);
    EXPECT_EQ(texts(*r), (std::vector<std::string>{"[2001:db8::1]:8080", "192.0.2.1:8080", "192.0.2.2:8080"}));
  }(), asking(dns_, hosts_));
  EXPECT_EQ(dns_.queries("both.test", 1), 1);
  EXPECT_EQ(dns_.queries("both.test", 28), 1);
}

TEST_F(resolve_test, a_name_with_addresses_of_one_family_only_is_found) {
  dns_.set("v4only.test", {.a = {"192.0.2.7"}});
  run([]() -> task<> {
    auto r = co_await with_timeout(resolve("v4only.test", 1), 5s);
    CO_ASSERT_OK(r);
    EXPECT_EQ(texts(*r), std::vector<std::string>{"192.0.2.7:1"});
  }(), asking(dns_, hosts_));
}

TEST_F(resolve_test, each_failure_says_which) {
  dns_.set("fail.test", {.what = fake_dns::kind::servfail});
  dns_.set("refused.test", {.what = fake_dns::kind::refused});
  dns_.set("empty.test", {});
  run([]() -> task<> {
    auto nx = co_await with_timeout(resolve("nosuch.test", 1), 5s);
    EXPECT_EQ(nx.error(), resolve_errc::not_found);
    auto fail = co_await with_timeout(resolve("fail.test", 1), 5s);
    EXPECT_EQ(fail.error(), resolve_errc::server_failure);
    auto refused = co_await with_timeout(resolve("refused.test", 1), 5s);
    EXPECT_EQ(refused.error(), resolve_errc::refused);
    auto empty = co_await with_timeout(resolve("empty.test", 1), 5s);
    EXPECT_EQ(empty.error(), resolve_errc::no_data);
    auto bad = co_await resolve("", 1);
    EXPECT_EQ(bad.error(), resolve_errc::bad_name);
    EXPECT_EQ(nx.error().category().name(), std::string("cogwheel.resolve"));
    EXPECT_FALSE(nx.error().message().empty());
  }(), asking(dns_, hosts_));
}

TEST_F(resolve_test, a_silent_server_is_no_answer_after_timeout_and_attempts) {
  dns_.set("silent.test", {.what = fake_dns::kind::silent});
  run([]() -> task<> {
    const auto start = now();
    auto r = co_await with_timeout(resolve("silent.test", 1), 5s);
    EXPECT_EQ(r.error(), resolve_errc::no_answer);
    EXPECT_EQ(r.error(), std::errc::timed_out);  // no_answer is a timeout, for generic code
    EXPECT_GE(now() - start, 100ms);
    EXPECT_LT(now() - start, 2s);
  }(), asking(dns_, hosts_, 100ms));
  EXPECT_EQ(dns_.queries("silent.test", 1), 1);  // one attempt
}

TEST_F(resolve_test, with_timeout_cuts_a_lookup_exactly_on_the_paused_clock) {
  dns_.set("silent.test", {.what = fake_dns::kind::silent});
  run([]() -> task<> {
    const auto start = now();
    auto r = co_await with_timeout(resolve("silent.test", 1), 300ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_GE(now() - start, 300ms);
    EXPECT_LT(now() - start, 301ms);
  }(), asking(dns_, hosts_, 5000ms, true));
}

TEST_F(resolve_test, a_lookup_cut_short_goes_on_detached_and_fills_the_cache) {
  dns_.set("late.test", {.a = {"192.0.2.9"}, .delay = 150ms});
  run([this]() -> task<> {
    auto cut = co_await with_timeout(resolve("late.test", 1), 20ms);
    EXPECT_EQ(cut.error(), errc::timed_out);
    co_await sleep_for(400ms);  // both late answers (A and AAAA) arrive meanwhile
    const int asked = dns_.queries("late.test");
    auto again = co_await with_timeout(resolve("late.test", 2), 5s);
    CO_ASSERT_OK(again);
    EXPECT_EQ(texts(*again), std::vector<std::string>{"192.0.2.9:2"});
    EXPECT_EQ(dns_.queries("late.test"), asked);  // from the cache
  }(), asking(dns_, hosts_));
}

TEST_F(resolve_test, concurrent_lookups_of_one_name_share_one_query) {
  dns_.set("shared.test", {.a = {"192.0.2.3"}, .delay = 20ms});
  run([]() -> task<> {
    auto [a, b] = co_await when_all(resolve("shared.test", 1), resolve("shared.test", 2));
    CO_ASSERT_OK(a);
    CO_ASSERT_OK(b);
    EXPECT_EQ(texts(*b), std::vector<std::string>{"192.0.2.3:2"});
  }(), asking(dns_, hosts_));
  EXPECT_EQ(dns_.queries("shared.test", 1), 1);
  EXPECT_EQ(dns_.queries("shared.test", 28), 1);
}

TEST_F(resolve_test, answers_are_cached_for_their_ttl_only) {
  dns_.set("ttl.test", {.a = {"192.0.2.4"}, .ttl = 1});
  run([this]() -> task<> {
    CO_ASSERT_OK(co_await resolve("ttl.test", 1));
    CO_ASSERT_OK(co_await resolve("TTL.test", 1));
    EXPECT_EQ(dns_.queries("ttl.test", 1), 1);
    co_await sleep_for(1100ms);
    CO_ASSERT_OK(co_await resolve("ttl.test", 1));
    EXPECT_EQ(dns_.queries("ttl.test", 1), 2);
  }(), asking(dns_, hosts_));
}

TEST_F(resolve_test, not_found_is_cached_for_the_negative_ttl) {
  runtime_options o = asking(dns_, hosts_);
  o.resolver.negative_ttl = 200ms;
  run([this]() -> task<> {
    EXPECT_EQ((co_await resolve("gone.test", 1)).error(), resolve_errc::not_found);
    EXPECT_EQ((co_await resolve("gone.test", 1)).error(), resolve_errc::not_found);
    EXPECT_EQ(dns_.queries("gone.test", 1), 1);
    co_await sleep_for(250ms);
    EXPECT_EQ((co_await resolve("gone.test", 1)).error(), resolve_errc::not_found);
    EXPECT_EQ(dns_.queries("gone.test", 1), 2);
  }(), o);
}

TEST_F(resolve_test, server_failures_are_not_cached) {
  dns_.set("fail.test", {.what = fake_dns::kind::servfail});
  run([this]() -> task<> {
    (void)co_await resolve("fail.test", 1);
    (void)co_await resolve("fail.test", 1);
    EXPECT_EQ(dns_.queries("fail.test", 1), 2);
  }(), asking(dns_, hosts_));
}

TEST_F(resolve_test, search_domains_complete_short_names) {
  dns_.set("svc.corp.test", {.a = {"192.0.2.5"}});
  runtime_options o = asking(dns_, hosts_);
  o.resolver.search = std::vector<std::string>{"corp.test"};
  o.resolver.ndots = 2;
  run([]() -> task<> {
    auto r = co_await with_timeout(resolve("svc", 1), 5s);
    CO_ASSERT_OK(r);
    EXPECT_EQ(texts(*r), std::vector<std::string>{"192.0.2.5:1"});
  }(), o);
  EXPECT_GE(dns_.queries("svc.corp.test", 1), 1);
}

TEST_F(resolve_test, a_truncated_answer_is_asked_again_over_tcp) {
  dns_.set("big.test", {.what = fake_dns::kind::truncated, .a = {"192.0.2.6"}, .aaaa = {"2001:db8::6"}});
  run([]() -> task<> {
    auto r = co_await with_timeout(resolve("big.test", 1), 5s);
    CO_ASSERT_OK(r);
    EXPECT_EQ(texts(*r), (std::vector<std::string>{"[2001:db8::6]:1", "192.0.2.6:1"}));
  }(), asking(dns_, hosts_));
  EXPECT_GE(dns_.tcp_queries(), 2);
}

TEST_F(resolve_test, a_loop_ending_with_lookups_in_flight_leaves_nothing_behind) {
  dns_.set("silent.test", {.what = fake_dns::kind::silent});
  run([]() -> task<> {
    spawn([]() -> task<> { (void)co_await resolve("silent.test", 1); }());
    co_await sleep_for(30ms);  // the queries are out; the loop ends with them pending
  }(), asking(dns_, hosts_));
  // TearDown: every socket closed (and ASan: nothing allocated is left).
}

TEST_F(resolve_test, a_misconfigured_server_list_is_an_error_not_a_crash) {
  runtime_options o = asking(dns_, hosts_);
  o.resolver.servers = {"not an address"};
  run([]() -> task<> {
    auto r = co_await resolve("x.test", 1);
    EXPECT_EQ(r.error(), errc::invalid_argument);
  }(), o);
}

TEST_F(resolve_test, a_lookup_in_flight_on_the_paused_clock_does_not_spin_the_loop) {
  // c-ares times out in real time. On a paused clock a loop timer for it fires at once whenever
  // the loop is idle, and re-armed for the real time still wanted, fired again: the loop spun
  // (322,279 iterations in 500 ms, the virtual clock 6.5 days ahead) until c-ares gave up.
  dns_.set("silent.test", {.what = fake_dns::kind::silent});
  run([]() -> task<> {
    auto cut = co_await with_timeout(resolve("silent.test", 1), 300ms);  // detached, still in c-ares
    EXPECT_EQ(cut.error(), errc::timed_out);
    // Wait for real I/O: a datagram another thread sends 200 ms (real) from now.
    auto socket = udp_socket::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(socket);
    const socket_address to = socket->local_address();
    std::thread poke([to] {
      std::this_thread::sleep_for(200ms);
      const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      (void)::sendto(fd, "x", 1, 0, to.data(), to.size());
      ::close(fd);
    });
    const std::uint64_t before = this_core_metrics().iterations;
    std::byte buf[8];
    auto got = co_await socket->receive(buf);
    poke.join();
    CO_ASSERT_OK(got);
    // Blocked in the kernel: a few iterations (c-ares' retransmission wake-ups), not a spin.
    EXPECT_LT(this_core_metrics().iterations - before, 100u);
  }(), asking(dns_, hosts_, 5000ms, true));
}

// --- Hostile answers and names -----------------------------------------------------------

TEST_F(resolve_test, a_name_ending_in_a_dot_is_absolute_and_never_completed_by_the_search_list) {
  // "svc." names the top-level "svc": with the search list it must not become svc.corp.test,
  // and the cache must not answer one spelling with the other's addresses.
  dns_.set("svc", {.a = {"192.0.2.9"}});
  dns_.set("svc.corp.test", {.a = {"192.0.2.5"}});
  runtime_options o = asking(dns_, hosts_);
  o.resolver.search = std::vector<std::string>{"corp.test"};
  o.resolver.ndots = 2;
  run([]() -> task<> {
    co_await expect_answer("svc.", "192.0.2.9:1");
    co_await expect_answer("svc", "192.0.2.5:1");
    // From the cache, its own entry.
    co_await expect_answer("SVC.", "192.0.2.9:1");
  }(), o);
  EXPECT_EQ(dns_.queries("svc.corp.test", 1), 1);
}

TEST_F(resolve_test, an_answer_of_thousands_of_addresses_is_cut_to_the_bound_per_family) {
  // 3,000 A and 2,000 AAAA records (over TCP, ~80 KB of answers): a server may send that many,
  // but what the resolver keeps (and caches per name) is bounded.
  fake_dns::rule many{.what = fake_dns::kind::truncated};
  char text[64];
  for (int i = 0; i < 3000; ++i) {
    std::snprintf(text, sizeof text, "10.%d.%d.1", i / 256, i % 256);
    many.a.push_back(text);
  }
  for (int i = 0; i < 2000; ++i) {
    std::snprintf(text, sizeof text, "2001:db8::%x", i + 1);
    many.aaaa.push_back(text);
  }
  dns_.set("many.test", many);
  run([]() -> task<> {
    auto r = co_await with_timeout(resolve("many.test", 1), 10s);
    CO_ASSERT_OK(r);
    EXPECT_EQ(r->size(), 2 * max_addresses_per_family);
    if (r->size() <= max_addresses_per_family) co_return;
    // The first ones the server gave, in its order.
    EXPECT_EQ((*r)[0].to_string(), "[2001:db8::1]:1");
    EXPECT_EQ((*r)[max_addresses_per_family].to_string(), "10.0.0.1:1");
    auto cached = co_await resolve("many.test", 2);
    CO_ASSERT_OK(cached);
    EXPECT_EQ(cached->size(), 2 * max_addresses_per_family);
  }(), asking(dns_, hosts_));
  EXPECT_EQ(dns_.queries("many.test", 1), 2);  // UDP (truncated), then TCP; then the cache
}

TEST_F(resolve_test, held_ttl_zero_and_ttls_with_the_top_bit_set_are_never_cached) {
  // RFC 2181 §8: a TTL with the most significant bit set is read as 0.
  dns_.set("zero.test", {.a = {"192.0.2.10"}, .ttl = 0});
  dns_.set("huge.test", {.a = {"192.0.2.11"}, .ttl = 0x80000000u});
  run([]() -> task<> {
    for (int i = 0; i < 2; ++i) {
      CO_ASSERT_OK(co_await with_timeout(resolve("zero.test", 1), 5s));
      CO_ASSERT_OK(co_await with_timeout(resolve("huge.test", 1), 5s));
    }
  }(), asking(dns_, hosts_));
  EXPECT_EQ(dns_.queries("zero.test", 1), 2);
  EXPECT_EQ(dns_.queries("huge.test", 1), 2);
}

TEST_F(resolve_test, held_the_cache_keeps_at_most_its_capacity) {
  runtime_options o = asking(dns_, hosts_);
  o.resolver.cache_entries = 4;  // (name, family) entries: two names' worth
  const std::vector<std::string> names = {"n0.test", "n1.test", "n2.test", "n3.test", "n4.test",
                                          "n5.test", "n6.test", "n7.test", "n8.test", "n9.test"};
  for (const std::string& n : names) dns_.set(n, {.a = {"192.0.2.1"}});
  run([&names]() -> task<> {
    for (int round = 0; round < 2; ++round)
      for (const std::string& n : names) CO_ASSERT_OK(co_await with_timeout(resolve(n, 1), 5s));
  }(), o);
  int asked = 0;
  for (const std::string& n : names) asked += dns_.queries(n, 1);
  EXPECT_GE(asked, 10 + 8);  // the second round found at most two names cached
}

TEST_F(resolve_test, held_names_c_ares_answers_inside_the_call_still_complete_later) {
  // c-ares refuses .onion names (RFC 7686) from inside ares_getaddrinfo; over-long labels are
  // a bad name. Both complete through the loop, and nothing is left pending.
  run([]() -> task<> {
    auto onion = co_await with_timeout(resolve("abc.onion", 1), 5s);
    EXPECT_EQ(onion.error(), resolve_errc::not_found);
    auto label = co_await with_timeout(resolve(std::string(64, 'a') + ".test", 1), 5s);
    EXPECT_FALSE(label);
    auto both = co_await when_all(resolve("abc.onion", 1), resolve("abc.onion", 2));
    EXPECT_FALSE(std::get<0>(both));
  }(), asking(dns_, hosts_));
  EXPECT_EQ(dns_.queries("abc.onion"), 0);
}

TEST_F(resolve_test, held_lookups_cut_at_every_moment_of_a_shared_query_leave_the_others_whole) {
  // A answers after 4 ms, AAAA after 8 ms, TTL 0 (every round asks again). Each round, one
  // lookup is cut at a moment swept across the query's life (before it is sent, with one
  // family answered, with the answer posted but not yet run...), another is raced by
  // when_any against a sleep of that length (its frame destroyed), and a third sharing the
  // query must get the whole answer. ASan: nothing used after it is freed.
  dns_.set("slow.test", {.a = {"192.0.2.1"}, .aaaa = {"2001:db8::1"}, .ttl = 0, .delay = 4ms, .aaaa_delay = 8ms});
  using us = std::chrono::microseconds;
  auto pause = [](us d) -> task<> { co_await sleep_for(d); };
  auto cut_short = [](us d) -> task<> {
    auto r = co_await with_timeout(resolve("slow.test", 1), d);
    if (!r) {
      EXPECT_EQ(r.error(), errc::timed_out);
    }
  };
  auto raced = [pause](us d) -> task<> {
    auto r = co_await when_any(resolve("slow.test", 2), pause(d));
    if (r.index == 0) {
      EXPECT_TRUE(std::get<0>(r.value));
    }
  };
  auto whole = []() -> task<> {
    auto r = co_await with_timeout(resolve("slow.test", 3), 5s);
    CO_ASSERT_OK(r);
    EXPECT_EQ(texts(*r), (std::vector<std::string>{"[2001:db8::1]:3", "192.0.2.1:3"}));
  };
  run([&]() -> task<> {
    for (us cut{0}; cut < 12ms; cut += 250us) co_await when_all(cut_short(cut), raced(cut), whole());
  }(), asking(dns_, hosts_));
}

TEST_F(resolve_test, held_cname_chains_and_loops_in_an_answer_end_without_a_hang) {
  // A chain is followed within the answer; a loop (a -> b -> a -> b) or a chain of 100 is
  // read once, never followed round (no hang), and no name is asked a second time.
  dns_.set("cnamed.test", {.a = {"192.0.2.20"}, .cnames = {"real.test"}});
  dns_.set("loop.test", {.a = {"192.0.2.21"}, .cnames = {"loop2.test", "loop.test", "loop2.test"}});
  fake_dns::rule longest{.a = {"192.0.2.22"}};
  char name[32];
  for (int i = 0; i < 100; ++i) {
    std::snprintf(name, sizeof name, "c%d.test", i);
    longest.cnames.push_back(name);
  }
  dns_.set("chain.test", longest);
  run([]() -> task<> {
    co_await expect_answer("cnamed.test", "192.0.2.20:1");
    // c-ares reads the records in order, each CNAME from the name reached so far: the loop
    // and the long chain both end at the addresses after them.
    co_await expect_answer("loop.test", "192.0.2.21:1");
    co_await expect_answer("chain.test", "192.0.2.22:1");
  }(), asking(dns_, hosts_));
  EXPECT_EQ(dns_.queries("loop.test", 1), 1);
  EXPECT_EQ(dns_.queries("loop2.test"), 0);
}

}  // namespace
}  // namespace cogwheel::io_test
