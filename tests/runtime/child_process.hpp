// A forked child for tests that change what the whole process sees: a seccomp filter on
// io_uring_setup, COGWHEEL_BACKEND, its stderr. The test process forks while it runs no loop
// and no thread; the child only ever _exit()s, so nothing of GoogleTest, atexit or the
// sanitizers' exit hooks (LeakSanitizer) runs there. The child's exit code says what happened
// (0 passed, codes from child_first_free_code are the body's own), its stderr comes back
// through a pipe, and an alarm kills a child that hangs.
#pragma once

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cogwheel::test {

// The child's exit codes that are not the body's.
inline constexpr int child_passed = 0;
inline constexpr int child_sanitizer_report = 1;     // what ASan and UBSan exit with: never one of ours
inline constexpr int child_seccomp_unavailable = 2;  // the filter could not be installed: skip
inline constexpr int child_threw = 3;                // the body let an exception out (what() on stderr)
inline constexpr int child_first_free_code = 4;      // the body's own codes start here

// A test takes a tenth of a second; under sanitizers a few times that.
constexpr unsigned child_hang_limit_seconds = 10;

#if defined(__x86_64__)
inline constexpr std::uint32_t this_audit_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
inline constexpr std::uint32_t this_audit_arch = AUDIT_ARCH_AARCH64;
#endif

// From here on io_uring_setup fails with `error` in this process and in every thread it starts;
// every other system call is allowed. Empty on success, else why the filter is not in place.
inline std::string block_io_uring_setup(int error) {
#if defined(__x86_64__) || defined(__aarch64__)
  sock_filter filter[] = {
      // A system call of another ABI (i386's int 0x80) has other numbers: kill rather than guess.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, this_audit_arch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(error) & SECCOMP_RET_DATA)),
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
  (void)error;
  return "no seccomp filter written for this architecture (x86_64 and aarch64 only)";
#endif
}

// One line on the child's stderr, unbuffered.
inline void say(std::string_view line) {
  const std::string l = std::string(line) + "\n";
  [[maybe_unused]] const auto n = ::write(STDERR_FILENO, l.data(), l.size());
}

struct child_setup {
  int io_uring_setup_error = 0;            // io_uring_setup fails with this errno (seccomp); 0: allowed
  const char* backend_variable = nullptr;  // COGWHEEL_BACKEND in the child; nullptr: unset
};

struct child_result {
  int exit_code = -1;  // -1: killed by a signal
  int signal = 0;
  std::string err;  // everything the child wrote to stderr

  // For a failure message: what the exit code means (`names` from child_first_free_code on).
  std::string describe(std::span<const char* const> names) const {
    std::string d;
    const int own = exit_code - child_first_free_code;
    if (signal == SIGALRM)
      d = "hung: killed after " + std::to_string(child_hang_limit_seconds) + " s";
    else if (signal != 0)
      d = std::string("killed by ") + ::strsignal(signal);
    else if (exit_code == child_sanitizer_report)
      d = "exit code 1 (a sanitizer's report?)";
    else if (exit_code == child_threw)
      d = "an exception escaped";
    else if (own >= 0 && static_cast<std::size_t>(own) < names.size())
      d = names[static_cast<std::size_t>(own)];
    else
      d = "exit code " + std::to_string(exit_code);
    return d + "; its stderr:\n" + err;
  }
};

// Runs body() (returning the exit code) in a forked child set up as asked; its outcome.
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
    ::alarm(child_hang_limit_seconds);  // SIGALRM's default action ends the child
    if (setup.backend_variable != nullptr)
      ::setenv("COGWHEEL_BACKEND", setup.backend_variable, 1);
    else
      ::unsetenv("COGWHEEL_BACKEND");  // CI runs the suites once per backend through it
    if (setup.io_uring_setup_error != 0) {
      if (const std::string why = block_io_uring_setup(setup.io_uring_setup_error); !why.empty()) {
        say(why);
        ::_exit(child_seccomp_unavailable);
      }
    }
    int code = child_threw;
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
  for (;;) {  // to the end first: a child blocked on a full pipe would never exit
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

inline std::vector<std::string> lines_of(const std::string& text) {
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

inline bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace cogwheel::test
