// Where io_uring is blocked, an unchanged cogwheel program runs on epoll and says so once.
// A child process installs a seccomp filter (raw BPF through prctl) that makes io_uring_setup
// fail with EPERM, as container runtimes' default profiles do (or ENOSYS, as others do), then
// runs an ordinary program: TCP echo over loopback, a read that times out having consumed
// nothing, a sleep, and a two-core runtime calling across cores with submit_to. Also:
// COGWHEEL_BACKEND=io_uring there fails at start with a message that says what to do;
// COGWHEEL_BACKEND=epoll picks epoll without a word; the variable wins over
// runtime_options::backend; a variable naming no backend fails at start. Every program runs in
// a forked child (child_process.hpp), whose exit code names the first check that failed.
#include <cogwheel/cogwheel.hpp>  // first: what a user includes, unchanged

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

#include "../io/support.hpp"
#include "child_process.hpp"

namespace cogwheel {
namespace {

using namespace io_test;
using test::child_result;
using test::contains;
using test::in_child;
using test::lines_of;
using test::say;

// The child's exit code: which check failed first (child_process.hpp's codes come before).
enum check : int {
  passed = test::child_passed,
  not_on_epoll = test::child_first_free_code,
  connect_failed,
  echo_failed,
  read_did_not_time_out,
  timed_out_read_touched_the_buffer,
  bytes_after_the_timeout_lost,
  peer_did_not_close,
  sleep_too_short,
  core_not_on_epoll,
  submit_to_went_wrong,
  not_on_io_uring,
  started_anyway,
  wrong_error_code,
  check_end,
};

constexpr std::array<const char*, check_end - test::child_first_free_code> check_names = {
    "not_on_epoll",
    "connect_failed",
    "echo_failed",
    "read_did_not_time_out",
    "timed_out_read_touched_the_buffer",
    "bytes_after_the_timeout_lost",
    "peer_did_not_close",
    "sleep_too_short",
    "core_not_on_epoll",
    "submit_to_went_wrong",
    "not_on_io_uring",
    "started_anyway",
    "wrong_error_code",
};

// Echoes what arrives until the peer shuts down its side, then closes (at once: the frame, and
// the stream in it, live until when_all has them all).
task<int> echo(tcp_stream s) {
  std::array<std::byte, 256> buf;
  for (;;) {
    auto n = co_await with_timeout(s.read(buf), 2s);
    if (!n) co_return echo_failed;
    if (*n == 0) {
      s.close();
      co_return passed;
    }
    if (!co_await s.write_all(std::span(buf.data(), *n))) co_return echo_failed;
  }
}

// Talks to the echo: a few messages, then a read that times out (nothing is on its way), then
// proof that the timed-out read took nothing: what is sent afterwards all comes back.
task<int> talk(tcp_stream& s) {
  std::array<std::byte, 64> buf;
  for (int i = 0; i < 5; ++i) {
    const std::string message = "message " + std::to_string(i);
    if (!co_await s.write_all(bytes_of(message))) co_return echo_failed;
    auto n = co_await with_timeout(read_exactly(s, std::span(buf.data(), message.size())), 2s);
    if (!n || text_of(std::span(buf.data(), *n)) != message) co_return echo_failed;
  }
  const std::byte sentinel{0xA5};
  buf.fill(sentinel);
  auto r = co_await with_timeout(s.read(buf), 30ms);
  if (r || r.error() != errc::timed_out) co_return read_did_not_time_out;
  for (std::byte b : buf)
    if (b != sentinel) co_return timed_out_read_touched_the_buffer;
  if (!co_await s.write_all(bytes_of("after"))) co_return echo_failed;
  // A read left registered by the timeout would swallow these bytes: this one would then wait.
  auto after = co_await with_timeout(read_exactly(s, std::span(buf.data(), 5)), 1s);
  if (!after || text_of(std::span(buf.data(), *after)) != "after") co_return bytes_after_the_timeout_lost;
  if (!co_await s.shutdown()) co_return echo_failed;
  auto eof = co_await with_timeout(s.read(buf), 2s);
  if (!eof || *eof != 0) co_return peer_did_not_close;
  co_return passed;
}

// The program a user would write, on one core; only `expected` is about backends.
task<int> single_core_program(backend_kind expected) {
  if (current_backend() != expected) co_return expected == backend_kind::epoll ? not_on_epoll : not_on_io_uring;
  auto pair = co_await connect_pair();  // a listener on 127.0.0.1:0, a client, the accepted end
  if (!pair) co_return connect_failed;
  auto [echoed, talked] = co_await when_all(echo(std::move(pair->server)), talk(pair->client));
  if (echoed != passed) co_return echoed;
  if (talked != passed) co_return talked;
  const auto before = now();
  co_await sleep_for(10ms);
  if (now() - before < 10ms) co_return sleep_too_short;
  co_return passed;
}

// Two cores, each checking its loop's backend and calling the other (a plain function, then a
// task that sleeps there: the other loop's wake-ups and timers both work).
int two_core_program(backend_kind expected) {
  std::atomic<int> outcome{passed};
  runtime rt(runtime_options{.cores = 2, .pin_threads = false});
  rt.run([&](unsigned core) -> task<void> {
    if (current_backend() != expected) {
      outcome = core_not_on_epoll;
      co_return;
    }
    const unsigned other = 1 - core;
    const unsigned where = co_await submit_to(other, [] { return this_core(); });
    const unsigned slept_on = co_await submit_to(other, []() -> task<unsigned> {
      co_await sleep_for(2ms);
      co_return this_core();
    });
    if (where != other || slept_on != other || this_core() != core) outcome = submit_to_went_wrong;
  });
  return outcome;
}

int whole_program(backend_kind expected) {
  if (const int r = run(single_core_program(expected)); r != passed) return r;
  return two_core_program(expected);
}

// With io_uring forced where it is blocked: both ways of starting a loop must refuse, with a
// system_error carrying EPERM. Its message goes to stderr for the parent to read.
int forced_io_uring_program() {
  try {
    run([]() -> task<void> { co_return; }());
    return started_anyway;
  } catch (const std::system_error& e) {
    say(std::string("run: ") + e.what());
    if (e.code() != std::errc::operation_not_permitted) return wrong_error_code;
  }
  try {
    runtime rt(runtime_options{.cores = 2, .pin_threads = false});
    rt.run([](unsigned) -> task<void> { co_return; });
    return started_anyway;
  } catch (const std::system_error& e) {
    say(std::string("runtime: ") + e.what());
    if (e.code() != std::errc::operation_not_permitted) return wrong_error_code;
  }
  return passed;
}

// With COGWHEEL_BACKEND naming no backend: both ways of starting a loop refuse, naming it.
int unknown_backend_program() {
  try {
    run([]() -> task<void> { co_return; }());
    return started_anyway;
  } catch (const std::invalid_argument& e) {
    say(std::string("run: ") + e.what());
  }
  try {
    runtime rt(runtime_options{.cores = 2, .pin_threads = false});
    rt.run([](unsigned) -> task<void> { co_return; });
    return started_anyway;
  } catch (const std::invalid_argument& e) {
    say(std::string("runtime: ") + e.what());
  }
  return passed;
}

// The whole program under a filter answering `error`, and the one line it must print.
void expect_it_runs_on_epoll_and_says_why_once(int error) {
  const child_result r = in_child({.io_uring_setup_error = error}, [] { return whole_program(backend_kind::epoll); });
  if (r.exit_code == test::child_seccomp_unavailable) GTEST_SKIP() << "cannot install a seccomp filter: " << r.err;
  ASSERT_EQ(r.exit_code, passed) << r.describe(check_names);
  // One line for the whole process, although three loops (run(), then two cores) fell back.
  const auto lines = lines_of(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_TRUE(contains(lines[0], "io_uring_setup")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "running on epoll")) << lines[0];
  EXPECT_TRUE(contains(lines[0], std::strerror(error))) << "the reason is missing: " << lines[0];
}

TEST(backend_fallback, a_program_runs_unchanged_on_epoll_where_seccomp_blocks_io_uring_and_says_so_once) {
  expect_it_runs_on_epoll_and_says_why_once(EPERM);
}

TEST(backend_fallback, a_filter_answering_enosys_as_if_io_uring_did_not_exist_falls_back_the_same_way) {
  expect_it_runs_on_epoll_and_says_why_once(ENOSYS);
}

TEST(backend_fallback, forcing_io_uring_where_it_is_blocked_fails_at_start_saying_what_to_do) {
  const child_result r = in_child({.io_uring_setup_error = EPERM, .backend_variable = "io_uring"}, forced_io_uring_program);
  if (r.exit_code == test::child_seccomp_unavailable) GTEST_SKIP() << "cannot install a seccomp filter: " << r.err;
  ASSERT_EQ(r.exit_code, passed) << r.describe(check_names);
  EXPECT_FALSE(contains(r.err, "running on epoll")) << "forced to io_uring, yet it fell back:\n" << r.err;
  const auto lines = lines_of(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;  // the two what()s, nothing else
  for (const std::string& line : lines) {
    EXPECT_TRUE(contains(line, std::strerror(EPERM))) << "the cause is missing: " << line;
    // The remedies: let io_uring_setup through, or choose the epoll backend.
    EXPECT_TRUE(contains(line, "io_uring_setup")) << line;
    EXPECT_TRUE(contains(line, "COGWHEEL_BACKEND=epoll")) << line;
  }
}

TEST(backend_fallback, cogwheel_backend_epoll_runs_on_epoll_without_a_word) {
  const child_result r = in_child({.backend_variable = "epoll"}, [] { return whole_program(backend_kind::epoll); });
  ASSERT_EQ(r.exit_code, passed) << r.describe(check_names);
  EXPECT_EQ(r.err, "");
}

TEST(backend_fallback, the_variable_wins_over_the_option) {
  const child_result r = in_child({.backend_variable = "io_uring"}, [] {
    return run(
        []() -> task<int> { co_return current_backend() == backend_kind::io_uring ? passed : not_on_io_uring; }(),
        runtime_options{.backend = backend_kind::epoll});
  });
  if (r.exit_code == test::child_threw && contains(r.err, "io_uring"))
    GTEST_SKIP() << "io_uring is not available to this process: " << r.err;
  ASSERT_EQ(r.exit_code, passed) << r.describe(check_names);
  EXPECT_EQ(r.err, "");
}

TEST(backend_fallback, the_option_chooses_epoll_when_the_variable_is_unset) {
  const child_result r = in_child({}, [] {
    return run(
        []() -> task<int> { co_return current_backend() == backend_kind::epoll ? passed : not_on_epoll; }(),
        runtime_options{.backend = backend_kind::epoll});
  });
  ASSERT_EQ(r.exit_code, passed) << r.describe(check_names);
  EXPECT_EQ(r.err, "");
}

TEST(backend_fallback, a_variable_naming_no_backend_fails_at_start_naming_it_and_the_choices) {
  const child_result r = in_child({.backend_variable = "kqueue"}, unknown_backend_program);
  ASSERT_EQ(r.exit_code, passed) << r.describe(check_names);
  const auto lines = lines_of(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;
  for (const std::string& line : lines) {
    EXPECT_TRUE(contains(line, "COGWHEEL_BACKEND='kqueue'")) << line;
    EXPECT_TRUE(contains(line, "io_uring") && contains(line, "epoll")) << line;
  }
}

}  // namespace
}  // namespace cogwheel
