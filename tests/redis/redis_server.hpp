// A real redis-server for a test or a bench: started on a free loopback port with a temporary
// directory (no RDB snapshots; AOF only when asked), stopped (SIGKILL + waitpid) and its
// directory removed by the destructor, so also when a test fails. available() is false when
// no redis-server binary is on PATH: the caller skips. server_config picks the loopback
// address, the port, and TLS (then it serves on a TLS port only: --port 0 --tls-port).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/listening.hpp"

namespace cogwheel::redis_test {

inline bool redis_server_available() {
  return std::system("command -v redis-server >/dev/null 2>&1") == 0;
}

// A port nobody listens on right now (bind to port 0, read it, close).
inline std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

struct server_config {
  bool append_only = false;
  std::string bind = "127.0.0.1";  // a loopback address (127.0.0.2 is one too)
  std::uint16_t port = 0;          // 0: a free one
  // TLS (all three set): PEM files; clients are not asked for certificates.
  std::string tls_cert = {}, tls_key = {}, tls_ca = {};
};

class redis_server {
 public:
  explicit redis_server(bool append_only = false) : redis_server(server_config{.append_only = append_only}) {}
  explicit redis_server(server_config c) : port_(c.port != 0 ? c.port : free_port()), aof_(c.append_only), config_(std::move(c)) {
    char tmpl[] = "/tmp/cogwheel-redis-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    // free_port()'s port is free when it returns, not when redis-server binds it: another
    // process (a parallel test) may take it meanwhile, and then this server exits. Another
    // port then, unless the caller chose this one.
    for (int attempt = 0; !start() && config_.port == 0 && attempt < 5; ++attempt) {
      kill();
      port_ = free_port();
    }
  }
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;
  ~redis_server() {
    kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::uint16_t port() const noexcept { return port_; }
  pid_t pid() const noexcept { return pid_; }
  bool running() const noexcept { return pid_ > 0; }

  // Starts (again, on the same port and directory: an AOF restart) and waits until it accepts.
  bool start() {
    const std::string port = std::to_string(port_);
    // Built before fork(): the child of a process with other threads (a fake DNS server's)
    // must not allocate.
    std::vector<std::string> args{"redis-server", "--bind", config_.bind, "--dir", dir_, "--save", "",
                                  "--appendonly", aof_ ? "yes" : "no", "--appendfsync", "always",
                                  "--daemonize", "no", "--loglevel", "warning", "--logfile", "redis.log"};
    if (tls()) {
      args.insert(args.end(), {"--port", "0", "--tls-port", port, "--tls-cert-file", config_.tls_cert, "--tls-key-file",
                               config_.tls_key, "--tls-ca-cert-file", config_.tls_ca, "--tls-auth-clients", "no"});
    } else {
      args.insert(args.end(), {"--port", port});
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      // Dies with the test, even one that crashes; keeps the test's output pipes to itself.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execvp("redis-server", argv.data());
      ::_exit(127);
    }
    return wait_ready();
  }
  void kill(int sig = SIGKILL) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, sig);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void signal(int sig) const { ::kill(pid_, sig); }

 private:
  bool tls() const { return !config_.tls_cert.empty(); }

  // False once the server has exited (a build without TLS refuses the TLS options, another
  // process holds the port). Ready means this server listens on the port (not some other
  // process that took it first: a test connected there would hang or share its keys) and,
  // without TLS, answers PING (the AOF may still be loading).
  bool wait_ready() {
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (listening() && (tls() || answers_ping())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  bool listening() const { return test_support::pid_listens_on(pid_, port_); }

  // A PING on a fresh connection gets +PONG within a second.
  bool answers_ping() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const timeval second{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &second, sizeof second);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, config_.bind.c_str(), &a.sin_addr);
    a.sin_port = htons(port_);
    bool pong = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      const char ping[] = "PING\r\n";
      char buf[16] = {};
      const bool sent = ::write(fd, ping, sizeof ping - 1) > 0;
      const ssize_t n = sent ? ::read(fd, buf, sizeof buf) : -1;
      pong = n > 0 && std::string(buf, static_cast<std::size_t>(n)).rfind("+PONG", 0) == 0;
    }
    ::close(fd);
    return pong;
  }

  std::uint16_t port_;
  bool aof_;
  server_config config_;
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace cogwheel::redis_test
