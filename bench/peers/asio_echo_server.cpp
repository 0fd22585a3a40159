// asio_echo_server: the Asio peer of `examples/echo_server --cores=1 --mode=timeout`, written the
// way Asio's C++20 coroutine examples write it: one io_context on one thread, a coroutine per
// connection (co_spawn), and every read raced against a steady_timer with awaitable operators:
//
//   co_await (socket.async_read_some(buf, use_awaitable) || timer.async_wait(use_awaitable))
//
// bench/peers/echo_compare.sh drives it with examples/load_client, next to echo_server.
//
// Usage: asio_echo_server [--port=7000] [--bind=127.0.0.1] [--read-timeout-ms=30000]
//                         [--tokens=use_awaitable|as_tuple]
//   use_awaitable  errors are exceptions, as in the line above. The timer that loses the race
//                  completes with operation_aborted, so every message throws and catches one.
//   as_tuple       as_tuple(use_awaitable) on both sides: errors are values, no exception per
//                  message. (Also: with use_awaitable a read that fails, e.g. at EOF, is not a
//                  "success" for ||, which then waits for the timer; with as_tuple it ends at once.)
// Stop it with Ctrl-C (SIGINT) or SIGTERM; it then prints, in echo_server's format,
//   served C connections, M messages; K kicked for idleness; CPU S s (U us per message)
// where CPU is the process's CPU time (user + system) since it started.
// Needs: standalone Asio 1.22+ (Debian: libasio-dev), a C++20 compiler; a descriptor per connection.
#include <sys/resource.h>
#include <time.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <variant>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

namespace {

constexpr auto use_nothrow = asio::experimental::as_tuple(use_awaitable);

struct settings {
  std::string bind = "127.0.0.1";
  unsigned short port = 7000;
  std::chrono::milliseconds read_timeout{30'000};
  bool exceptions = true;  // --tokens=use_awaitable
};

// One thread runs everything, so plain counters.
struct totals {
  long connections = 0;
  long messages = 0;
  long kicked = 0;
};

// Errors as exceptions: eof or a reset ends the connection through the catch.
awaitable<void> session_use_awaitable(tcp::socket socket, const settings& cfg, totals& t) {
  asio::steady_timer timer(socket.get_executor());
  std::array<char, 4096> buf;
  try {
    for (;;) {
      timer.expires_after(cfg.read_timeout);
      auto r = co_await (socket.async_read_some(asio::buffer(buf), use_awaitable) ||
                         timer.async_wait(use_awaitable));
      if (r.index() == 1) {
        ++t.kicked;
        co_return;
      }
      ++t.messages;
      co_await asio::async_write(socket, asio::buffer(buf.data(), std::get<0>(r)), use_awaitable);
    }
  } catch (const std::exception&) {
    // asio::system_error (eof, reset) or asio::multiple_exceptions: the connection is over.
  }
}

// Errors as values (as_tuple): the same loop without an exception per message.
awaitable<void> session_as_tuple(tcp::socket socket, const settings& cfg, totals& t) {
  asio::steady_timer timer(socket.get_executor());
  std::array<char, 4096> buf;
  for (;;) {
    timer.expires_after(cfg.read_timeout);
    auto r = co_await (socket.async_read_some(asio::buffer(buf), use_nothrow) ||
                       timer.async_wait(use_nothrow));
    if (r.index() == 1) {
      ++t.kicked;
      co_return;
    }
    const auto [read_error, n] = std::get<0>(r);
    if (read_error) co_return;
    ++t.messages;
    const auto written = co_await asio::async_write(socket, asio::buffer(buf.data(), n), use_nothrow);
    if (std::get<0>(written)) co_return;
  }
}

awaitable<void> accept_loop(tcp::acceptor& acceptor, const settings& cfg, totals& t) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_nothrow);
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      // Out of descriptors, typically: retrying at once would spin.
      std::fprintf(stderr, "accept: %s (backing off 10 ms)\n", ec.message().c_str());
      asio::steady_timer pause(acceptor.get_executor(), 10ms);
      co_await pause.async_wait(use_nothrow);
      continue;
    }
    ++t.connections;
    socket.set_option(tcp::no_delay(true), ec);
    if (cfg.exceptions)
      asio::co_spawn(acceptor.get_executor(), session_use_awaitable(std::move(socket), cfg, t), asio::detached);
    else
      asio::co_spawn(acceptor.get_executor(), session_as_tuple(std::move(socket), cfg, t), asio::detached);
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

double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  settings cfg;
  cfg.bind = flag(argc, argv, "bind", cfg.bind);
  cfg.port = static_cast<unsigned short>(std::stoul(flag(argc, argv, "port", "7000")));
  cfg.read_timeout = std::chrono::milliseconds(std::stol(flag(argc, argv, "read-timeout-ms", "30000")));
  const std::string tokens = flag(argc, argv, "tokens", "use_awaitable");
  if (tokens != "use_awaitable" && tokens != "as_tuple") {
    std::fprintf(stderr, "--tokens: use_awaitable or as_tuple\n");
    return 2;
  }
  cfg.exceptions = tokens == "use_awaitable";
  raise_fd_limit();

  asio::io_context ctx{1};
  asio::error_code ec;
  const tcp::endpoint endpoint(asio::ip::make_address(cfg.bind, ec), cfg.port);
  if (ec) {
    std::fprintf(stderr, "--bind=%s: %s\n", cfg.bind.c_str(), ec.message().c_str());
    return 2;
  }
  tcp::acceptor acceptor(ctx);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(tcp::acceptor::max_listen_connections, ec);
  if (ec) {
    std::fprintf(stderr, "listen on %s:%u: %s\n", cfg.bind.c_str(), cfg.port, ec.message().c_str());
    return 1;
  }

  totals t;
  asio::signal_set signals(ctx, SIGINT, SIGTERM);
  signals.async_wait([&](const asio::error_code&, int) { ctx.stop(); });
  asio::co_spawn(ctx, accept_loop(acceptor, cfg, t), asio::detached);
  std::printf("asio_echo_server: %s:%u, 1 thread, tokens %s, read timeout %lld ms; Ctrl-C stops\n",
              cfg.bind.c_str(), cfg.port, tokens.c_str(), static_cast<long long>(cfg.read_timeout.count()));
  std::fflush(stdout);
  ctx.run();

  const double cpu = process_cpu_seconds();
  std::printf("served %ld connections, %ld messages; %ld kicked for idleness; CPU %.3f s (%.2f us per message)\n",
              t.connections, t.messages, t.kicked, cpu,
              t.messages > 0 ? cpu * 1e6 / static_cast<double>(t.messages) : 0.0);
}
