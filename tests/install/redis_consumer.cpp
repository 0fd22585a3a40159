// redis_consumer: a program outside the repository that uses the installed Redis client
// (cogwheel::redis, the cogwheel-redis pkg-config module), built by tests/install_check.sh next to
// consumer.cpp wherever hiredis is installed. No server is needed: it connects to a loopback
// port nobody listens on and expects the refusal as a value.
// Exits 0 on success, 1 on a failure, 77 when the kernel refuses io_uring (nothing was checked).
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <utility>

#include <cogwheel/cogwheel.hpp>
#include <cogwheel/redis/client.hpp>

using namespace std::chrono_literals;

static cogwheel::task<bool> check() {
  unsigned short port = 0;
  {  // a port that was free a moment ago and has no listener now
    auto listener = cogwheel::tcp_listener::bind(cogwheel::socket_address::ipv4_loopback(0));
    if (!listener) co_return false;
    port = listener->local_address().port();
  }
  cogwheel::redis::client_options options;
  options.address = cogwheel::socket_address::ipv4_loopback(port);
  options.connect_timeout = 1000ms;
  auto c = co_await cogwheel::redis::client::connect(std::move(options));
  std::printf("redis_consumer: connect to port %u: %s\n", port,
              c ? "connected (unexpected)" : c.error().message().c_str());
  // COGWHEEL_EXPECT_REDIS_TLS=0/1 (tests/install_check.sh): whether this build speaks TLS.
  const bool tls = cogwheel::redis::tls_supported();
  std::printf("redis_consumer: TLS %s\n", tls ? "supported" : "not built");
  if (const char* want = std::getenv("COGWHEEL_EXPECT_REDIS_TLS"); want != nullptr && (want[0] == '1') != tls) {
    std::printf("redis_consumer: expected TLS %s\n", want[0] == '1' ? "supported" : "not built");
    co_return false;
  }
  co_return !c;
}

int main() {
  try {
    return cogwheel::run(check()) ? 0 : 1;
  } catch (const std::system_error& e) {  // the ring could not be set up
    std::printf("redis_consumer: %s\n", e.what());
    const bool no_uring = e.code() == std::errc::function_not_supported || e.code() == std::errc::operation_not_permitted;
    return no_uring ? 77 : 1;
  }
}
