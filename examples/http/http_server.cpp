// http_server: an HTTP/1.1 server with nginx's four timeouts (client_header_timeout,
// client_body_timeout, keepalive_timeout, send_timeout), each enforced by cogwheel's timers.
// One SO_REUSEPORT listener per core; keep-alive and pipelining; parsing by Node's http_parser
// (Debian: libhttp-parser-dev). GET / answers --body-bytes of text, POST /echo the request body
// (Content-Length or chunked), GET /metrics every core's runtime metrics in Prometheus's text
// format, anything else 404; 400, 413, 431 and 501 for what it refuses.
// What a connection does and when: http_server.hpp.
//
// Usage: http_server [--port=8080] [--cores=0 (all)] [--body-bytes=13]
//                    [--header-timeout-ms=60000] [--body-timeout-ms=60000]
//                    [--keepalive-timeout-ms=75000] [--send-timeout-ms=60000]
//                    [--max-header-bytes=8192] [--max-body-bytes=1048576] [--send-buffer-bytes=0]
//                    [--idle-buffer-bytes=1024] [--request-timeout-ms=0 (none)] [--park-after-ms=10]
//                    [--stats] [--no-pin] [--tls-cert=chain.pem --tls-key=key.pem [--tls-no-resumption]]
//   --send-buffer-bytes: SO_SNDBUF per connection (0: the kernel's autotuning), like nginx's
//            `listen ... sndbuf=`.
//   --idle-buffer-bytes: the read buffer a TLS connection keeps between requests (a plain one
//            reads from the core's buffer pool: its idle wait holds no buffer, docs/http.md).
//   --park-after-ms: a plain connection idle between requests this long leaves its coroutine
//            frame for a small record (cogwheel::park, docs/http.md); 0 at once, -1 never.
//   --request-timeout-ms: one request's whole budget, from its head to its response
//            (docs/deadlines.md); a request that overruns it is cut without a response.
//   --stats: on SIGINT/SIGTERM print requests served, connections closed by each timeout, refused
//            requests by status, kick lateness p50/p99/max and the process's CPU time.
//   --tls-cert/--tls-key: HTTPS only (when built with cogwheel::tls), the handshake under the
//            header timeout (http_server_tls.hpp).
// Try: curl -v http://127.0.0.1:8080/ ; wrk -t1 -c50 -d5s http://127.0.0.1:8080/ ;
//      curl http://127.0.0.1:8080/metrics
// Needs: Linux with io_uring (5.19+), or epoll where it is blocked (COGWHEEL_BACKEND=epoll);
// libhttp-parser-dev; one descriptor per connection.
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <memory>

#include <cogwheel/cogwheel.hpp>

#include "http_server.hpp"
#ifdef COGWHEEL_HTTP_TLS
#include "http_server_tls.hpp"
#endif
#include "support.hpp"

using namespace cogwheel;
using namespace http_example;

namespace {

std::chrono::milliseconds ms_flag(int argc, char** argv, const char* name, long fallback) {
  return std::chrono::milliseconds(examples::flag_int(argc, argv, name, fallback));
}

// glibc keeps the memory of freed connections (coroutine frames, buffers) for reuse, so after a
// wave of connections (a slowloris attack) the RSS would stay at its peak. Once a second, when
// the open connections have fallen below half of their peak, hand the free memory back.
task<void> return_memory(const server_stats& stats) {
  std::uint64_t peak = 0;
  for (;;) {
    co_await sleep_for(std::chrono::seconds(1));
    peak = std::max(peak, stats.open_connections);
    if (peak >= 1024 && stats.open_connections < peak / 2) {
      ::malloc_trim(0);
      peak = stats.open_connections;
    }
  }
}

void print_stats(server_stats& total) {
  std::printf(
      "stats: connections=%" PRIu64 " requests=%" PRIu64 " header_timeouts=%" PRIu64 " body_timeouts=%" PRIu64
      " keepalive_timeouts=%" PRIu64 " send_timeouts=%" PRIu64 " request_timeouts=%" PRIu64
      " bad_requests=%" PRIu64 " (400=%" PRIu64
      " 413=%" PRIu64 " 431=%" PRIu64 " 501=%" PRIu64 ") not_found=%" PRIu64 "\n",
      total.connections, total.requests, total.header_timeouts, total.body_timeouts, total.keepalive_timeouts,
      total.send_timeouts, total.request_timeouts, total.bad_requests(), total.status_400, total.status_413, total.status_431,
      total.status_501, total.status_404);
  auto& late = total.kick_lateness_us;
  std::printf("stats: kicks=%zu kick_lateness_us p50=%u p99=%u max=%u\n", late.size(),
              examples::percentile(late, 50), examples::percentile(late, 99), examples::percentile(late, 100));
  const double cpu = examples::process_cpu_seconds();
  std::printf("stats: cpu_s=%.3f cpu_us_per_request=%.3f\n", cpu,
              total.requests > 0 ? cpu * 1e6 / static_cast<double>(total.requests) : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  server_config cfg;
  cfg.body_bytes = static_cast<std::size_t>(examples::flag_int(argc, argv, "body-bytes", 13));
  cfg.max_header_bytes = static_cast<std::size_t>(examples::flag_int(argc, argv, "max-header-bytes", 8192));
  cfg.max_body_bytes = static_cast<std::size_t>(examples::flag_int(argc, argv, "max-body-bytes", 1 << 20));
  cfg.idle_buffer_bytes = static_cast<std::size_t>(examples::flag_int(argc, argv, "idle-buffer-bytes", 1024));
  cfg.send_buffer_bytes = static_cast<std::size_t>(examples::flag_int(argc, argv, "send-buffer-bytes", 0));
  cfg.header_timeout = ms_flag(argc, argv, "header-timeout-ms", 60000);
  cfg.body_timeout = ms_flag(argc, argv, "body-timeout-ms", 60000);
  cfg.keepalive_timeout = ms_flag(argc, argv, "keepalive-timeout-ms", 75000);
  cfg.send_timeout = ms_flag(argc, argv, "send-timeout-ms", 60000);
  cfg.request_timeout = ms_flag(argc, argv, "request-timeout-ms", 0);  // 0: no request budget
  cfg.park_after = ms_flag(argc, argv, "park-after-ms", 10);
  const auto port = static_cast<std::uint16_t>(examples::flag_int(argc, argv, "port", 8080));
  const unsigned cores = static_cast<unsigned>(examples::flag_int(argc, argv, "cores", 0));
  const bool stats_wanted = examples::has_flag(argc, argv, "stats");
  const long fds = examples::raise_fd_limit();
  const std::string tls_cert = examples::flag(argc, argv, "tls-cert", "");
  const std::string tls_key = examples::flag(argc, argv, "tls-key", "");
#ifdef COGWHEEL_HTTP_TLS
  tls::context tls_ctx;
  if (!tls_cert.empty() || !tls_key.empty()) {
    auto ctx = tls_context_from_files(tls_cert, tls_key, !examples::has_flag(argc, argv, "tls-no-resumption"));
    if (!ctx) {
      std::fprintf(stderr, "--tls-cert/--tls-key: %s\n", ctx.error().message().c_str());
      return 1;
    }
    tls_ctx = std::move(*ctx);
  }
#else
  if (!tls_cert.empty() || !tls_key.empty()) {
    std::fprintf(stderr, "--tls-cert/--tls-key: built without cogwheel::tls (OpenSSL 3)\n");
    return 1;
  }
#endif

  runtime rt(runtime_options{.cores = cores, .sq_entries = 4096,
                             .pin_threads = !examples::has_flag(argc, argv, "no-pin"), .stop_on_signals = true});
  // One block per core, touched only by that core's thread until run() returns.
  auto stats = std::make_unique<server_stats[]>(rt.cores());
  std::atomic<bool> failed{false};
  std::printf("http_server: port %u, %u cores, body %zu bytes, descriptor limit %ld; Ctrl-C stops\n", port,
              rt.cores(), cfg.body_bytes, fds);
  std::fflush(stdout);
  rt.run([&](unsigned core) -> task<void> {
    spawn(return_memory(stats[core]));
    auto listener = tcp_listener::bind(socket_address::ipv4_any(port), {.reuse_port = true});
    if (!listener) {  // the whole server stops: a core without a listener serves nobody
      std::fprintf(stderr, "bind port %u: %s\n", port, listener.error().message().c_str());
      failed = true;
      rt.stop();
      co_return;
    }
    for (;;) {
      auto conn = co_await listener->accept();
      if (!conn) {
        if (conn.error() == errc::operation_canceled) co_return;
        continue;  // EMFILE: the listener backs off by itself
      }
#ifdef COGWHEEL_HTTP_TLS
      if (tls_ctx) {
        spawn(serve_tls_connection(std::move(*conn), tls_ctx, cfg, stats[core]));
        continue;
      }
#endif
      spawn(serve_connection(std::move(*conn), cfg, stats[core]));
    }
  });
  if (failed) return 1;
  if (stats_wanted) {
    server_stats total;
    for (unsigned c = 0; c < rt.cores(); ++c) total += stats[c];
    print_stats(total);
  }
}
