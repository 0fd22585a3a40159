// tls_consumer: a program outside the repository that uses the installed TLS library
// (cogwheel::tls, the cogwheel-tls pkg-config module, Meson's dependency('cogwheel-tls')), built
// by tests/install_check.sh by every route wherever cogwheel::tls is built (OpenSSL 3 found).
// No certificate is needed: it connects to a loopback listener that never answers and expects
// the handshake to time out as a value (a client context, a stream's connect and its timeout
// all come from the library, so a program linked without cogwheel_tls does not link).
// Exits 0 on success, 1 on a failure, 77 when the kernel refuses io_uring (nothing was checked).
#include <cstdio>
#include <system_error>
#include <utility>

#include <cogwheel/cogwheel.hpp>
#include <cogwheel/tls/stream.hpp>

using namespace std::chrono_literals;

static cogwheel::task<bool> check() {
  auto ctx = cogwheel::tls::context::client();
  if (!ctx || ctx->is_server()) co_return false;
  auto listener = cogwheel::tcp_listener::bind(cogwheel::socket_address::ipv4_loopback(0));
  if (!listener) co_return false;
  // The kernel completes the TCP handshake from the backlog; nobody accepts or answers the
  // ClientHello, so the TLS handshake ends by its timeout.
  auto tcp = co_await cogwheel::tcp_stream::connect(listener->local_address());
  if (!tcp) co_return false;
  auto tls = co_await cogwheel::with_timeout(
      cogwheel::tls::stream::connect(std::move(*tcp), *ctx, "localhost"), 20ms);
  std::printf("tls_consumer: handshake with a silent server: %s\n",
              tls ? "succeeded (unexpected)" : tls.error().message().c_str());
  co_return !tls && tls.error() == cogwheel::errc::timed_out;
}

int main() {
  try {
    return cogwheel::run(check()) ? 0 : 1;
  } catch (const std::system_error& e) {  // the ring could not be set up
    std::printf("tls_consumer: %s\n", e.what());
    const bool no_uring = e.code() == std::errc::function_not_supported || e.code() == std::errc::operation_not_permitted;
    return no_uring ? 77 : 1;
  }
}
