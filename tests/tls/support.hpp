// Shared by the TLS tests: certificates made by the openssl tool (make_certs.sh) in a temp
// dir, contexts from them, real peers (openssl s_server / s_client, curl) started as child
// processes, a loopback pair with a relay in between that the test controls byte by byte, and
// the io tests' byte pattern. Tests skip when the openssl tool is missing.
#pragma once

#include <cogwheel/cogwheel.hpp>
#include <cogwheel/tls/stream.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../io/support.hpp"
#include "../support/listening.hpp"

extern char** environ;

namespace cogwheel::tls_test {

using namespace io_test;
using namespace std::chrono_literals;

inline bool have_tool(const char* name) {
  return std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0;
}

#define SKIP_WITHOUT_OPENSSL() \
  if (!::cogwheel::tls_test::have_tool("openssl")) GTEST_SKIP() << "the openssl command line tool is not installed"

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A temp dir with the certificates of make_certs.sh; removed again at the end.
class cert_dir {
 public:
  cert_dir() {
    char tmpl[] = "/tmp/cogwheel-tls-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return;
    path_ = tmpl;
    const std::string cmd = std::string("sh ") + COGWHEEL_TLS_TEST_DIR "/make_certs.sh " + path_;
    ok_ = std::system(cmd.c_str()) == 0;
  }
  cert_dir(const cert_dir&) = delete;
  cert_dir& operator=(const cert_dir&) = delete;
  ~cert_dir() {
    if (!path_.empty()) (void)std::system(("rm -rf " + path_).c_str());
  }
  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string pem(const std::string& name) const { return slurp(file(name)); }

  tls::context server(const std::string& name = "server") const {
    auto c = tls::context::server(pem(name + ".pem"), pem(name + ".key"));
    EXPECT_TRUE(c) << c.error().message();
    return c ? *c : tls::context();
  }
  // A client trusting the test CA.
  tls::context client() const {
    auto c = tls::context::client();
    EXPECT_TRUE(c) << c.error().message();
    if (!c) return {};
    auto t = c->trust(pem("ca.pem"));
    EXPECT_TRUE(t) << t.error().message();
    return *c;
  }

 private:
  std::string path_;
  bool ok_ = false;
};

#define SKIP_WITHOUT_CERTS(dir)                                         \
  SKIP_WITHOUT_OPENSSL();                                               \
  if (!(dir).ok()) FAIL() << "make_certs.sh failed in " << (dir).path()

// A child process; stdin from a pipe (input()), stdout and stderr into a file (output()).
// Killed (SIGKILL) and reaped by the destructor if still running.
class child {
 public:
  child(std::vector<std::string> argv, const std::string& out_path) : out_path_(out_path) {
    int in[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (::posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    stdin_ = in[1];
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  ~child() {
    close_input();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  void input(std::string_view s) { [[maybe_unused]] auto n = ::write(stdin_, s.data(), s.size()); }
  void close_input() {
    if (stdin_ >= 0) ::close(std::exchange(stdin_, -1));
  }
  // Waits (blocking, at most `limit`) for the exit: its status, or -1 when still running.
  int wait(std::chrono::milliseconds limit = 10s) {
    for (auto waited = 0ms;; waited += 10ms) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (waited >= limit) break;
      ::usleep(10000);
    }
    return -1;
  }
  // The exit status if it has exited, else -1 (never blocks).
  int try_wait() { return wait(0ms); }
  std::string output() const { return slurp(out_path_); }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::string out_path_;
};

// A free loopback port (bound and closed again: the caller's child binds it next).
inline std::uint16_t free_port() {
  auto l = tcp_listener::bind(socket_address::ipv4_loopback(0));
  if (!l) return 0;
  return l->local_address().port();
}

// A child server (openssl s_server) listening on a loopback port. free_port()'s port is free
// when picked, not when the child binds it: another process may take it in between, and a test
// that connected to "whoever listens" would talk to that stranger (and hang on its silence, or
// fail a handshake it never saw). So the server counts as up only once *this* child listens on
// the port (test_support::pid_listens_on), and a child that exits first (it could not bind) is
// started again on another free port, 5 times at most, unless the caller fixed the port.
class listening_child {
 public:
  // argv_for(port) is the command line; port 0 picks a free one.
  listening_child(const std::function<std::vector<std::string>(std::uint16_t)>& argv_for, const std::string& out_path,
                  std::uint16_t port = 0) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = port != 0 ? port : free_port();
      child_ = std::make_unique<child>(argv_for(port_), out_path);
      if (wait_listening() || port != 0) return;
    }
  }
  // True once the child listens on port() (false: it never did, and has been stopped).
  bool listening() const { return listening_; }
  std::uint16_t port() const { return port_; }
  child& process() { return *child_; }

 private:
  bool wait_listening() {
    for (int i = 0; i < 1000 && child_->started(); ++i) {  // 10 s: openssl starts in ~50 ms
      if (test_support::pid_listens_on(child_->pid(), port_)) return listening_ = true;
      if (child_->try_wait() >= 0) return false;  // exited: the port was taken
      ::usleep(10000);
    }
    child_.reset();  // never listened: stopped (SIGKILL) by child's destructor
    return false;
  }

  std::unique_ptr<child> child_;
  std::uint16_t port_ = 0;
  bool listening_ = false;
};

// A task under a timeout, as a task (for when_all, which takes tasks).
template <class T>
task<T> timed(task<T> t, clock::duration d) {
  co_return co_await with_timeout(std::move(t), d);
}

// Waits for the child's exit without blocking the loop (at most `limit`): its status, or -1.
inline task<int> exit_of(child& c, std::chrono::milliseconds limit = 10s) {
  for (auto waited = 0ms; waited < limit; waited += 10ms) {
    const int status = c.try_wait();
    if (status >= 0) co_return status;
    co_await sleep_for(10ms);
  }
  co_return -1;
}

// Reads until `buf` is full or the peer's close_notify; the bytes read.
inline task<result<std::size_t>> read_exactly(tls::stream& s, std::span<std::byte> buf) {
  std::size_t got = 0;
  while (got < buf.size()) {
    auto n = co_await s.read(buf.subspan(got));
    if (!n) co_return n.error();
    if (*n == 0) break;
    got += *n;
  }
  co_return got;
}

// Everything until close_notify.
inline task<result<std::string>> read_to_end(tls::stream& s) {
  std::string got;
  char buf[4096];
  for (;;) {
    auto n = co_await s.read(std::as_writable_bytes(std::span(buf)));
    if (!n) co_return n.error();
    if (*n == 0) co_return got;
    got.append(buf, *n);
  }
}

// Pattern bytes [from, from + n) checked in `got`: the first wrong position, or -1.
inline long first_wrong(std::span<const std::byte> got, std::uint64_t from) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != pattern_at(from + i)) return static_cast<long>(i);
  return -1;
}

}  // namespace cogwheel::tls_test
