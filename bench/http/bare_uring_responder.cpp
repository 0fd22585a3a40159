// bare_uring_responder: the floor for examples/http's CPU per request. A single-thread liburing
// server with no coroutines, no timers and no HTTP parser: it counts the ends of request heads
// ("\r\n\r\n") in what it reads and answers each with the very bytes http_server sends for
// GET / (Server, Date, Content-Type, Content-Length and the body of --body-bytes, the same
// "Hello, World!\n" text), so a keep-alive or pipelining client such as wrk sees the same
// stream from both. Anything a request carries beyond its head (a body) is not understood: this
// is a benchmark peer for GET-only clients, not a server.
//
// What it keeps from http_server, so that the difference between the two is the runtime and the
// HTTP work: the ring set-up (IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN, falling back as the
// runtime does), TCP_NODELAY on each connection, one operation in flight per connection (a recv,
// or a send of the answers to what the recv brought), a pre-built response shared by every
// connection and rebuilt when the second changes, no copy for a lone answer. What it leaves out:
// timeouts, the buffer pool (each connection owns a 4 KiB read buffer), the parser, routing.
//
// Usage: bare_uring_responder [--port=8080] [--body-bytes=13]
// Needs: Linux 6.1+ (DEFER_TASKRUN; older kernels take the fallbacks), liburing 2.3+.
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>

namespace {

long flag_int(int argc, char** argv, std::string_view name, long fallback) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.size() > name.size() + 3 && a.substr(0, 2) == "--" && a.substr(2, name.size()) == name &&
        a[name.size() + 2] == '=')
      return std::strtol(argv[i] + name.size() + 3, nullptr, 10);
  }
  return fallback;
}

// The response for one second, shared by the sends in flight: a send may outlive the second
// that built it, so each holds a reference (one thread: a plain count).
struct response {
  unsigned refs = 1;  // the cache's own
  std::string bytes;
};

void unref(response* r) {
  if (r != nullptr && --r->refs == 0) delete r;
}

// http_server's fixed answer (examples/http/http_server_response.cpp: append_head, fixed_body)
// to an HTTP/1.1 keep-alive request: no Connection header.
struct response_cache {
  std::size_t body_bytes = 13;
  std::time_t second = -1;
  response* current = nullptr;

  response* get() {
    const std::time_t now = std::time(nullptr);
    if (now != second) {
      second = now;
      std::tm tm{};
      ::gmtime_r(&now, &tm);
      char date[40];
      std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
      static constexpr std::string_view text = "Hello, World!\n";
      std::string body;
      while (body.size() < body_bytes) body += text.substr(0, body_bytes - body.size());
      auto* r = new response;
      r->bytes = "HTTP/1.1 200 OK\r\nServer: cogwheel\r\nDate: ";
      r->bytes += date;
      r->bytes += "\r\nContent-Type: text/plain\r\nContent-Length: ";
      r->bytes += std::to_string(body.size());
      r->bytes += "\r\n\r\n";
      r->bytes += body;
      unref(current);
      current = r;
    }
    return current;
  }
};

constexpr std::size_t read_bytes = 4096;
constexpr std::uint64_t accept_tag = 1;  // user_data of the multishot accept; connections are aligned pointers

struct connection {
  explicit connection(int f) noexcept : fd(f) {}
  int fd;
  unsigned matched = 0;         // bytes of "\r\n\r\n" matched at the end of what was read so far
  response* shared = nullptr;   // a lone answer, sent from the cache's block
  std::string many;             // several answers (pipelined requests), concatenated
  const char* out = nullptr;    // the rest of the send in flight
  std::size_t out_left = 0;
  char buf[read_bytes];
};

// How many request heads end in data, carrying the partial match across reads.
unsigned count_ends(connection& c, const char* data, std::size_t n) {
  static constexpr char end[] = "\r\n\r\n";
  unsigned ends = 0, m = c.matched;
  for (std::size_t i = 0; i < n; ++i) {
    const char ch = data[i];
    if (ch == end[m]) {
      if (++m == 4) {
        ++ends;
        m = 0;
      }
    } else {
      m = ch == '\r' ? 1 : 0;
    }
  }
  c.matched = m;
  return ends;
}

io_uring ring;

io_uring_sqe* sqe() {
  io_uring_sqe* s = io_uring_get_sqe(&ring);
  while (s == nullptr) {
    io_uring_submit(&ring);
    s = io_uring_get_sqe(&ring);
  }
  return s;
}

void arm_recv(connection& c) {
  io_uring_sqe* s = sqe();
  io_uring_prep_recv(s, c.fd, c.buf, read_bytes, 0);
  io_uring_sqe_set_data(s, &c);
}

void arm_send(connection& c) {
  io_uring_sqe* s = sqe();
  io_uring_prep_send(s, c.fd, c.out, c.out_left, MSG_NOSIGNAL);
  io_uring_sqe_set_data(s, &c);
}

void arm_accept(int listener) {
  io_uring_sqe* s = sqe();
  io_uring_prep_multishot_accept(s, listener, nullptr, nullptr, 0);
  io_uring_sqe_set_data64(s, accept_tag);
}

void finish(connection* c) {
  ::close(c->fd);
  unref(c->shared);
  delete c;
}

}  // namespace

int main(int argc, char** argv) {
  const auto port = static_cast<std::uint16_t>(flag_int(argc, argv, "port", 8080));
  response_cache cache;
  cache.body_bytes = static_cast<std::size_t>(flag_int(argc, argv, "body-bytes", 13));

  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 4096) != 0) {
    std::fprintf(stderr, "bare_uring_responder: port %u: %s\n", port, std::strerror(errno));
    return 1;
  }

  // The runtime's set-up (runtime/src/uring_driver.cpp) with its ring sizes for sq_entries=4096.
  int err = -EINVAL;
  for (unsigned flags : {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, unsigned{IORING_SETUP_COOP_TASKRUN}, 0u}) {
    io_uring_params p{};
    p.flags = flags | IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
    p.cq_entries = 4 * 4096;
    err = io_uring_queue_init_params(4096, &ring, &p);
    if (err != -EINVAL) break;
  }
  if (err < 0) {
    std::fprintf(stderr, "bare_uring_responder: io_uring_queue_init: %s\n", std::strerror(-err));
    return 1;
  }
  std::printf("bare_uring_responder: port %u, body %zu bytes\n", port, cache.body_bytes);
  std::fflush(stdout);

  arm_accept(listener);
  for (;;) {
    const int r = io_uring_submit_and_wait(&ring, 1);
    if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
      std::fprintf(stderr, "bare_uring_responder: io_uring_enter: %s\n", std::strerror(-r));
      return 1;
    }
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      const int res = cqe->res;
      if (cqe->user_data == accept_tag) {
        if (res >= 0) {
          ::setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          auto* c = new connection(res);
          arm_recv(*c);
        }
        if ((cqe->flags & IORING_CQE_F_MORE) == 0) arm_accept(listener);  // the multishot ended
        continue;
      }
      auto* c = static_cast<connection*>(io_uring_cqe_get_data(cqe));
      if (c->out_left == 0) {  // a recv
        if (res <= 0) {
          finish(c);
          continue;
        }
        const unsigned ends = count_ends(*c, c->buf, static_cast<std::size_t>(res));
        if (ends == 0) {
          arm_recv(*c);
          continue;
        }
        response* r = cache.get();
        if (ends == 1) {
          ++r->refs;
          c->shared = r;
          c->out = r->bytes.data();
          c->out_left = r->bytes.size();
        } else {
          c->many.clear();
          for (unsigned i = 0; i < ends; ++i) c->many += r->bytes;
          c->out = c->many.data();
          c->out_left = c->many.size();
        }
        arm_send(*c);
        continue;
      }
      if (res <= 0) {  // a send failed: the client went away
        finish(c);
        continue;
      }
      c->out += res;
      c->out_left -= static_cast<std::size_t>(res);
      if (c->out_left > 0) {
        arm_send(*c);
        continue;
      }
      unref(c->shared);
      c->shared = nullptr;
      arm_recv(*c);
    }
    io_uring_cq_advance(&ring, seen);
  }
}
