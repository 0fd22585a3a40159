// udp_request: the request/retry pattern of DNS and the QUIC handshake, over UDP. A client sends
// a request and waits for the reply under a timeout; when the timeout passes it sends again
// with the timeout doubled (exponential back-off), up to --attempts times. Every request carries
// an id that the reply echoes, and the client drops replies that are not for the request it
// waits on: late replies to earlier attempts arrive, out of order, after it moved on. The
// server echoes requests but drops --drop of them and holds --delay-share of its replies back
// by --delay-ms, as a lossy, reordering network would.
//
// Usage: udp_request [--requests=2000] [--clients=16] [--drop=0.3] [--delay-share=0.1]
//                    [--delay-ms=50] [--timeout-ms=20] [--attempts=6] [--ipv6] [--tick-us=1000]
//          client and server in one process, on one core
//        udp_request --server [--port=7001] [--drop=0.3] [--delay-share=0.1] [--delay-ms=50]
//          only the lossy echo server, until Ctrl-C
//        udp_request --to=127.0.0.1:7001 [--requests=...] [--clients=...] [--timeout-ms=...]
//          only the clients, against a server elsewhere
// Prints requests answered and given up, attempts, stale replies dropped, the round trip of
// answered requests and how late the timeouts resumed their coroutine after the deadline
// (p50/p99/max; the wheel fires within a tick, --tick-us, after it: a deadline taken just after
// a tick boundary, as when a retry follows a timeout, rounds up to nearly a whole tick).
// Needs: Linux with io_uring (5.19+), or epoll where it is blocked (COGWHEEL_BACKEND=epoll).
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <cogwheel/cogwheel.hpp>

#include "support.hpp"

using namespace cogwheel;
using namespace std::chrono_literals;

namespace {

struct settings {
  int requests = 2000;
  int clients = 16;
  double drop = 0.3;
  double delay_share = 0.1;
  clock::duration delay = 50ms;
  clock::duration timeout = 20ms;
  int attempts = 6;
};

// On the wire: the request's id (client << 32 | sequence) and the attempt; echoed as it is.
struct message {
  std::uint64_t id = 0;
  std::uint32_t attempt = 0;
};

struct client_report {
  long answered = 0;
  long gave_up = 0;
  long attempts = 0;
  long stale = 0;                   // replies to an earlier request or attempt, dropped
  std::vector<double> round_trip_us;  // first send to the reply, answered requests
  std::vector<double> lateness_us;    // deadline to the coroutine resuming with timed_out
};

struct server_report {
  long received = 0;
  long dropped = 0;
  long delayed = 0;
};

task<void> reply_later(udp_socket& s, message m, socket_address to, clock::duration delay) {
  co_await sleep_for(delay);
  (void)co_await s.send_to(std::as_bytes(std::span(&m, 1)), to);
}

// Echoes every request it keeps; runs until its task is cancelled (the end of run()).
task<void> lossy_echo_server(udp_socket& s, const settings& cfg, server_report& report) {
  std::mt19937_64 random(42);
  std::uniform_real_distribution<double> share(0.0, 1.0);
  for (;;) {
    message m;
    auto got = co_await s.receive_from(std::as_writable_bytes(std::span(&m, 1)));
    if (!got) {
      if (got.error() == errc::operation_canceled) co_return;
      continue;  // a stray datagram of another size (errc::message_size), a refused reply
    }
    ++report.received;
    if (share(random) < cfg.drop) {
      ++report.dropped;
      continue;
    }
    if (share(random) < cfg.delay_share) {
      ++report.delayed;
      spawn(reply_later(s, m, got->second, cfg.delay));
      continue;
    }
    (void)co_await s.send_to(std::as_bytes(std::span(&m, 1)), got->second);
  }
}

// Waits until `until` for the reply to `id`; false when the deadline passed first.
task<result<bool>> await_reply(udp_socket& s, std::uint64_t id, clock::time_point until, client_report& report) {
  for (;;) {
    message reply;
    auto n = co_await with_deadline(s.receive(std::as_writable_bytes(std::span(&reply, 1))), until);
    if (!n) {
      if (n.error() != errc::timed_out) co_return n.error();
      report.lateness_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - until).count());
      co_return false;
    }
    if (*n == sizeof reply && reply.id == id) co_return true;
    ++report.stale;
  }
}

task<void> client(unsigned index, socket_address server, int requests, const settings& cfg, client_report& report) {
  auto any = socket_address::parse(server.is_ipv6() ? "[::]:0" : "0.0.0.0:0");
  auto s = udp_socket::bind(*any);
  if (!s) {
    std::fprintf(stderr, "bind: %s\n", s.error().message().c_str());
    co_return;
  }
  if (auto c = co_await s->connect(server); !c) {
    std::fprintf(stderr, "connect %s: %s\n", server.to_string().c_str(), c.error().message().c_str());
    co_return;
  }
  for (int i = 0; i < requests; ++i) {
    const message request{std::uint64_t{index} << 32 | static_cast<std::uint32_t>(i), 0};
    const auto first_sent = clock::now();
    clock::duration wait = cfg.timeout;
    bool answered = false;
    for (int attempt = 1; attempt <= cfg.attempts && !answered; ++attempt, wait *= 2) {
      message m = request;
      m.attempt = static_cast<std::uint32_t>(attempt);
      ++report.attempts;
      if (auto sent = co_await s->send(std::as_bytes(std::span(&m, 1))); !sent) {
        std::fprintf(stderr, "send: %s\n", sent.error().message().c_str());
        co_return;
      }
      auto r = co_await await_reply(*s, request.id, clock::now() + wait, report);
      if (!r) {
        std::fprintf(stderr, "receive: %s\n", r.error().message().c_str());  // e.g. no server
        co_return;
      }
      answered = *r;
    }
    if (answered) {
      ++report.answered;
      report.round_trip_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - first_sent).count());
    } else {
      ++report.gave_up;
    }
  }
}

task<client_report> run_clients(socket_address server, const settings& cfg) {
  std::vector<client_report> reports(static_cast<std::size_t>(cfg.clients));
  std::vector<task<void>> clients;
  for (int c = 0; c < cfg.clients; ++c) {
    const int share = cfg.requests / cfg.clients + (c < cfg.requests % cfg.clients ? 1 : 0);
    clients.push_back(client(static_cast<unsigned>(c), server, share, cfg, reports[static_cast<std::size_t>(c)]));
  }
  co_await when_all(std::move(clients));
  client_report all;
  for (auto& r : reports) {
    all.answered += r.answered;
    all.gave_up += r.gave_up;
    all.attempts += r.attempts;
    all.stale += r.stale;
    all.round_trip_us.insert(all.round_trip_us.end(), r.round_trip_us.begin(), r.round_trip_us.end());
    all.lateness_us.insert(all.lateness_us.end(), r.lateness_us.begin(), r.lateness_us.end());
  }
  co_return all;
}

void print(const client_report& in, const settings& cfg) {
  client_report r = in;
  std::printf("requests %d: answered %ld, gave up %ld (after %d attempts); %ld attempts (%.3f per request); "
              "%ld stale replies dropped\n",
              cfg.requests, r.answered, r.gave_up, cfg.attempts, r.attempts,
              static_cast<double>(r.attempts) / cfg.requests, r.stale);
  std::printf("round trip of answered requests: p50 %.0f us, p99 %.0f us, max %.0f us\n",
              examples::percentile(r.round_trip_us, 50), examples::percentile(r.round_trip_us, 99),
              examples::percentile(r.round_trip_us, 100));
  std::printf("timeouts: %zu, resumed after the deadline by p50 %.0f us, p99 %.0f us, max %.0f us\n",
              r.lateness_us.size(), examples::percentile(r.lateness_us, 50), examples::percentile(r.lateness_us, 99),
              examples::percentile(r.lateness_us, 100));
}

void print(const server_report& r) {
  std::printf("server: %ld requests received, %ld dropped, %ld replies delayed\n", r.received, r.dropped, r.delayed);
}

}  // namespace

int main(int argc, char** argv) {
  settings cfg;
  cfg.requests = static_cast<int>(examples::flag_int(argc, argv, "requests", cfg.requests));
  cfg.clients = std::max(1, static_cast<int>(examples::flag_int(argc, argv, "clients", cfg.clients)));
  cfg.drop = examples::flag_double(argc, argv, "drop", cfg.drop);
  cfg.delay_share = examples::flag_double(argc, argv, "delay-share", cfg.delay_share);
  cfg.delay = std::chrono::milliseconds(examples::flag_int(argc, argv, "delay-ms", 50));
  cfg.timeout = std::chrono::milliseconds(examples::flag_int(argc, argv, "timeout-ms", 20));
  cfg.attempts = static_cast<int>(examples::flag_int(argc, argv, "attempts", cfg.attempts));
  const std::string to = examples::flag(argc, argv, "to", "");
  const runtime_options options{.tick = std::chrono::microseconds(examples::flag_int(argc, argv, "tick-us", 1000))};

  if (examples::has_flag(argc, argv, "server")) {
    const auto port = static_cast<std::uint16_t>(examples::flag_int(argc, argv, "port", 7001));
    server_report report;
    runtime rt(runtime_options{.cores = 1, .tick = options.tick, .stop_on_signals = true});
    rt.run([&](unsigned) -> task<void> {
      auto s = udp_socket::bind(socket_address::ipv4_any(port));
      if (!s) {
        std::fprintf(stderr, "bind port %u: %s\n", port, s.error().message().c_str());
        co_return;
      }
      std::printf("udp_request server: %s, dropping %.0f%%, delaying %.0f%% of replies; Ctrl-C stops\n",
                  s->local_address().to_string().c_str(), cfg.drop * 100, cfg.delay_share * 100);
      std::fflush(stdout);
      co_await lossy_echo_server(*s, cfg, report);
    });
    print(report);
    return 0;
  }

  if (!to.empty()) {
    auto server = socket_address::parse(to);
    if (!server) {
      std::fprintf(stderr, "--to=%s: not an address like 127.0.0.1:7001 or [::1]:7001\n", to.c_str());
      return 2;
    }
    const client_report report = run(run_clients(*server, cfg), options);
    print(report, cfg);
    return report.answered + report.gave_up == cfg.requests ? 0 : 1;
  }

  const bool ipv6 = examples::has_flag(argc, argv, "ipv6");
  std::printf("udp_request: %d requests from %d clients, timeout %lld ms doubling over %d attempts; server drops "
              "%.0f%% and delays %.0f%% of replies by %lld ms\n",
              cfg.requests, cfg.clients, static_cast<long long>(cfg.timeout / 1ms), cfg.attempts, cfg.drop * 100,
              cfg.delay_share * 100, static_cast<long long>(cfg.delay / 1ms));
  // Bound before the loop starts and alive after it ends: the server and its delayed replies
  // use it until run() has destroyed them.
  auto s = udp_socket::bind(ipv6 ? socket_address::ipv6_loopback(0) : socket_address::ipv4_loopback(0));
  if (!s) {
    std::fprintf(stderr, "bind: %s\n", s.error().message().c_str());
    return 1;
  }
  server_report served;
  const client_report report = run([](udp_socket& s, const settings& cfg, server_report& served) -> task<client_report> {
    spawn(lossy_echo_server(s, cfg, served));
    co_return co_await run_clients(s.local_address(), cfg);
  }(*s, cfg, served), options);
  print(served);
  print(report, cfg);
  return report.answered + report.gave_up == cfg.requests ? 0 : 1;
}
