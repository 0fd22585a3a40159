// Where io_uring is blocked, an unchanged cogwheel program runs on epoll and says so once.
// A child process installs a seccomp filter (raw BPF through prctl) that makes io_uring_setup
// fail with EPERM, as container runtimes' default profiles do, then runs an ordinary program:
// TCP echo over loopback, a read that times out having consumed nothing, a sleep, and a
// two-core runtime calling across cores with submit_to. Also: COGWHEEL_BACKEND=io_uring there
// fails at start with a message that says what to do; COGWHEEL_BACKEND=epoll picks epoll
// without a word; the variable wins over runtime_options::backend.
//
// Every program runs in a forked child (fork + waitpid; the child only ever _exit()s, so
// nothing of GoogleTest or the sanitizers' exit hooks runs there). The child's exit code names
// the first check that failed, its stderr comes back through a pipe, and an alarm kills a child
// that hangs. The test process itself runs no loop and starts no thread.
#include <cogwheel/cogwheel.hpp>  // first: what a user includes, unchanged

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

#include "../io/support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

// The child's exit code: which check failed first. 0 passed; 1 is what a sanitizer's report
// exits with, never a check (so that it cannot pass for a skip).
enum check : int {
  passed = 0,
  sanitizer_report,
  seccomp_unavailable,  // the filter could not be installed: the test skips
  not_on_epoll,
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
  threw,
  check_count,
};

constexpr std::array<const char*, check_count> check_names = {
    "passed",
    "exit code 1 (a sanitizer's report?)",
    "seccomp_unavailable",
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
    "threw",
};

// ---- in the child ----

#if defined(__x86_64__)
constexpr std::uint32_t this_audit_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t this_audit_arch = AUDIT_ARCH_AARCH64;
#endif

// From here on io_uring_setup fails with EPERM in this process and in every thread it starts;
// every other system call is allowed. Empty on success, else why the filter is not in place.
std::string block_io_uring_setup() {
#if defined(__x86_64__) || defined(__aarch64__)
  sock_filter filter[] = {
      // A system call of another ABI (i386's int 0x80) has other numbers: kill rather than guess.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, this_audit_arch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  // Without CAP_SYS_ADMIN a filter needs no_new_privs (it could otherwise fool a setuid binary).
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return std::string("prctl(PR_SET_NO_NEW_PRIVS): ") + std::strerror(errno);
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0)
    return std::string("prctl(PR_SET_SECCOMP): ") + std::strerror(errno);
  return {};
#else
  return "no seccomp filter written for this architecture (x86_64 and aarch64 only)";
#endif
}

void say(std::string_view line) {
  const std::string l = std::string(line) + "\n";
  [[maybe_unused]] const auto n = ::write(STDERR_FILENO, l.data(), l.size());
}

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

// ---- in the parent ----

// The test takes a tenth of a second; under sanitizers a few times that.
constexpr unsigned hang_limit_seconds = 10;

struct child_result {
  int exit_code = -1;  // -1: killed by a signal (see `signal`)
  int signal = 0;
  std::string err;  // everything the child wrote to stderr

  std::string describe() const {
    std::string d;
    if (signal == SIGALRM)
      d = "hung: killed after " + std::to_string(hang_limit_seconds) + " s";
    else if (signal != 0)
      d = std::string("killed by ") + ::strsignal(signal);
    else if (exit_code >= 0 && exit_code < check_count)
      d = check_names[static_cast<std::size_t>(exit_code)];
    else
      d = "exit code " + std::to_string(exit_code);
    return d + "; its stderr:\n" + err;
  }
};

struct child_setup {
  bool block_io_uring = false;
  const char* backend_variable = nullptr;  // COGWHEEL_BACKEND in the child; nullptr: unset
};

// Runs body() in a forked child set up as asked; its exit code and stderr.
template <class F>
child_result in_child(child_setup setup, F body) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {.exit_code = -1, .err = "pipe2 failed"};
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t pid = ::fork();
  if (pid < 0) return {.exit_code = -1, .err = "fork failed"};
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::alarm(hang_limit_seconds);  // a hung child dies (SIGALRM) instead of hanging the test
    if (setup.backend_variable != nullptr)
      ::setenv("COGWHEEL_BACKEND", setup.backend_variable, 1);
    else
      ::unsetenv("COGWHEEL_BACKEND");  // CI runs the suite once per backend through it
    if (setup.block_io_uring) {
      if (const std::string why = block_io_uring_setup(); !why.empty()) {
        say(why);
        ::_exit(seccomp_unavailable);
      }
    }
    int code = threw;
    try {
      code = body();
    } catch (const std::exception& e) {
      say(std::string("uncaught: ") + e.what());
    } catch (...) {
      say("uncaught exception");
    }
    ::_exit(code);
  }
  ::close(pipe_fds[1]);
  child_result r;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n > 0) r.err.append(buf, static_cast<std::size_t>(n));
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

TEST(backend_fallback, a_program_runs_unchanged_on_epoll_where_seccomp_blocks_io_uring_and_says_so_once) {
  const child_result r = in_child({.block_io_uring = true}, [] { return whole_program(backend_kind::epoll); });
  if (r.exit_code == seccomp_unavailable) GTEST_SKIP() << "cannot install a seccomp filter: " << r.err;
  ASSERT_EQ(r.exit_code, passed) << r.describe();
  // One line for the whole process, although three loops (run(), then two cores) fell back.
  const auto lines = lines_of(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_TRUE(contains(lines[0], "io_uring_setup")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "running on epoll")) << lines[0];
  EXPECT_TRUE(contains(lines[0], std::strerror(EPERM))) << "the reason is missing: " << lines[0];
}

TEST(backend_fallback, forcing_io_uring_where_it_is_blocked_fails_at_start_saying_what_to_do) {
  const child_result r = in_child({.block_io_uring = true, .backend_variable = "io_uring"}, forced_io_uring_program);
  if (r.exit_code == seccomp_unavailable) GTEST_SKIP() << "cannot install a seccomp filter: " << r.err;
  ASSERT_EQ(r.exit_code, passed) << r.describe();
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
  ASSERT_EQ(r.exit_code, passed) << r.describe();
  EXPECT_EQ(r.err, "");
}

TEST(backend_fallback, the_variable_wins_over_the_option) {
  const child_result r = in_child({.backend_variable = "io_uring"}, [] {
    return run(
        []() -> task<int> { co_return current_backend() == backend_kind::io_uring ? passed : not_on_io_uring; }(),
        runtime_options{.backend = backend_kind::epoll});
  });
  if (r.exit_code == threw && contains(r.err, "io_uring"))
    GTEST_SKIP() << "io_uring is not available to this process: " << r.err;
  ASSERT_EQ(r.exit_code, passed) << r.describe();
  EXPECT_EQ(r.err, "");
}

TEST(backend_fallback, the_option_chooses_epoll_when_the_variable_is_unset) {
  const child_result r = in_child({}, [] {
    return run(
        []() -> task<int> { co_return current_backend() == backend_kind::epoll ? passed : not_on_epoll; }(),
        runtime_options{.backend = backend_kind::epoll});
  });
  ASSERT_EQ(r.exit_code, passed) << r.describe();
  EXPECT_EQ(r.err, "");
}

TEST(backend_fallback, a_variable_naming_no_backend_fails_at_start_naming_it_and_the_choices) {
  const child_result r = in_child({.backend_variable = "kqueue"}, unknown_backend_program);
  ASSERT_EQ(r.exit_code, passed) << r.describe();
  const auto lines = lines_of(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;
  for (const std::string& line : lines) {
    EXPECT_TRUE(contains(line, "COGWHEEL_BACKEND='kqueue'")) << line;
    EXPECT_TRUE(contains(line, "io_uring") && contains(line, "epoll")) << line;
  }
}

}  // namespace
}  // namespace cogwheel
