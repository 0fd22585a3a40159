// epoll_echo_server: the bare baseline for `examples/echo_server --cores=1 --mode=timeout`: a
// hand-written, single-threaded, non-blocking epoll TCP echo server with no timeouts at all, the
// minimal thing one writes without a runtime. It answers "what does a round trip cost with no
// timer, no coroutine and no completion queue", so echo_compare.sh measures the ratio in one run.
//
// Level-triggered, on purpose: each readiness gets one read() of up to 4 KiB and one write(), and
// a socket with bytes left over is simply reported again by the next epoll_wait. Edge-triggered
// would have to read until EAGAIN, which for a request/response client costs one extra read()
// (returning EAGAIN) per round trip: read+read+write per message instead of read+write (one
// epoll_wait is shared by the whole batch either way).
// A partial write keeps the pending bytes in the connection's buffer and switches its interest
// from EPOLLIN to EPOLLOUT (no more reads until they are sent); writable again, it switches back.
//
// bench/peers/echo_compare.sh drives it with examples/load_client, next to echo_server.
//
// Usage: epoll_echo_server [--port=7000] [--bind=127.0.0.1]
// Stop it with Ctrl-C (SIGINT) or SIGTERM (read from a signalfd, so there is no race with
// epoll_wait); it then prints, in echo_server's format,
//   served C connections, M messages; 0 kicked for idleness; CPU S s (U us per message)
// where CPU is the process's CPU time (user + system) since it started.
// Needs: Linux, a C++20 compiler, the standard library and POSIX only; a descriptor per connection.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

struct connection {
  int fd = -1;
  std::size_t off = 0;  // pending bytes are buf[off, len) while a write is incomplete
  std::size_t len = 0;
  char buf[4096];  // left uninitialized: new connection does not zero 4 KiB
};

// epoll_event.data.ptr is a connection, or one of these two tags.
char listener_tag;
char signal_tag;

struct totals {
  long connections = 0;
  long messages = 0;
};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "epoll_echo_server: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

void set_interest(int ep, connection* c, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = c;
  if (::epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) die("epoll_ctl(MOD)");
}

void close_connection(connection* c) {
  ::close(c->fd);  // also removes it from the epoll set (it was never dup'ed)
  delete c;
}

// Writes buf[off, len). True when all of it is out; false when the socket is full (the rest stays
// pending). Sets *dead on an error.
bool flush(connection* c, bool* dead) {
  while (c->off < c->len) {
    const ssize_t w = ::write(c->fd, c->buf + c->off, c->len - c->off);
    if (w > 0) {
      c->off += static_cast<std::size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return false;
    } else {
      *dead = true;
      return false;
    }
  }
  c->off = c->len = 0;
  return true;
}

// EPOLLIN (or EPOLLHUP/EPOLLERR, which the read then reports) on a connection that has nothing
// pending: one read, echoed back at once.
void on_readable(int ep, connection* c, totals& t) {
  const ssize_t n = ::read(c->fd, c->buf, sizeof c->buf);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {  // EOF or an error (reset)
    close_connection(c);
    return;
  }
  ++t.messages;
  c->off = 0;
  c->len = static_cast<std::size_t>(n);
  bool dead = false;
  if (flush(c, &dead)) return;
  if (dead)
    close_connection(c);
  else
    set_interest(ep, c, EPOLLOUT);
}

// EPOLLOUT on a connection with pending bytes: send them, then read again.
void on_writable(int ep, connection* c) {
  bool dead = false;
  if (flush(c, &dead))
    set_interest(ep, c, EPOLLIN);
  else if (dead)
    close_connection(c);
}

// Accepts everything queued. False when out of descriptors (or memory): the caller pauses.
bool accept_all(int ep, int listener, totals& t) {
  for (;;) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        std::fprintf(stderr, "accept: %s (backing off 10 ms)\n", std::strerror(errno));
        return false;
      }
      die("accept4");
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto* c = new connection;
    c->fd = fd;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl(ADD)");
    ++t.connections;
  }
}

// --name=value; fallback when absent.
std::string flag(int argc, char** argv, std::string_view name, std::string fallback) {
  const std::string key = "--" + std::string(name) + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.substr(0, key.size()) == key) return std::string(a.substr(key.size()));
  }
  return fallback;
}

// Raises the soft descriptor limit to the hard one: a thousand connections need a thousand.
void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
}

double monotonic_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.substr(0, 7) != "--port=" && a.substr(0, 7) != "--bind=") {
      std::fprintf(stderr, "usage: epoll_echo_server [--port=7000] [--bind=127.0.0.1]\n");
      return 2;
    }
  }
  const std::string bind = flag(argc, argv, "bind", "127.0.0.1");
  const unsigned long port = std::strtoul(flag(argc, argv, "port", "7000").c_str(), nullptr, 10);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (port > 65535 || ::inet_pton(AF_INET, bind.c_str(), &addr.sin_addr) != 1) {
    std::fprintf(stderr, "--bind=%s --port=%lu: not an IPv4 address and port\n", bind.c_str(), port);
    return 2;
  }
  raise_fd_limit();
  std::signal(SIGPIPE, SIG_IGN);

  // SIGINT and SIGTERM arrive through a signalfd in the epoll set.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (::sigprocmask(SIG_BLOCK, &stop_signals, nullptr) != 0) die("sigprocmask");
  const int sfd = ::signalfd(-1, &stop_signals, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) die("signalfd");

  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0) die("socket");
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, SOMAXCONN) != 0) {
    std::fprintf(stderr, "listen on %s:%lu: %s\n", bind.c_str(), port, std::strerror(errno));
    return 1;
  }

  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &listener_tag;
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) != 0) die("epoll_ctl(listener)");
  ev.data.ptr = &signal_tag;
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) != 0) die("epoll_ctl(signalfd)");

  std::printf("epoll_echo_server: %s:%lu, 1 thread, level-triggered epoll, no timeouts; Ctrl-C stops\n",
              bind.c_str(), port);
  std::fflush(stdout);

  totals t;
  bool accept_paused = false;  // out of descriptors: the listener is out of the set for 10 ms
  double resume_at_ms = 0;
  bool running = true;
  epoll_event events[256];
  while (running) {
    const int n = ::epoll_wait(ep, events, 256, accept_paused ? 1 : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    if (accept_paused && monotonic_ms() >= resume_at_ms) {
      ev.events = EPOLLIN;
      ev.data.ptr = &listener_tag;
      if (::epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) != 0) die("epoll_ctl(listener)");
      accept_paused = false;
    }
    for (int i = 0; i < n; ++i) {
      void* const key = events[i].data.ptr;
      if (key == &signal_tag) {
        running = false;
      } else if (key == &listener_tag) {
        if (!accept_all(ep, listener, t)) {
          if (::epoll_ctl(ep, EPOLL_CTL_DEL, listener, nullptr) != 0) die("epoll_ctl(DEL listener)");
          accept_paused = true;
          resume_at_ms = monotonic_ms() + 10;
        }
      } else {
        auto* c = static_cast<connection*>(key);
        if (c->off < c->len)
          on_writable(ep, c);
        else
          on_readable(ep, c, t);
      }
    }
  }

  const double cpu = process_cpu_seconds();
  std::printf("served %ld connections, %ld messages; 0 kicked for idleness; CPU %.3f s (%.2f us per message)\n",
              t.connections, t.messages, cpu,
              t.messages > 0 ? cpu * 1e6 / static_cast<double>(t.messages) : 0.0);
}
