// consumer: a program outside the repository, built against an installed (or subproject)
// cogwheel by tests/install_check.sh in three ways: find_package (cmake/), pkg-config
// (pkgconfig/) and a Meson subproject (meson-subproject/). It includes only the umbrella
// header, as a user would, and uses all three libraries: run and sleep_for (runtime, timer),
// with_timeout around an accept nobody answers (runtime, io).
// Exits 0 on success, 1 on a failure, 77 when the kernel refuses io_uring (nothing was checked).
#include <cstdio>
#include <system_error>

#include <cogwheel/cogwheel.hpp>

using namespace std::chrono_literals;

static cogwheel::task<bool> check() {
  co_await cogwheel::sleep_for(1ms);
  auto listener = cogwheel::tcp_listener::bind(cogwheel::socket_address::ipv4_loopback(0));
  if (!listener) co_return false;
  auto accepted = co_await cogwheel::with_timeout(listener->accept(), 5ms);
  std::printf("consumer: listened on %s, accept: %s\n", listener->local_address().to_string().c_str(),
              accepted.error().message().c_str());
  co_return accepted.error() == cogwheel::errc::timed_out;
}

int main() {
  try {
    return cogwheel::run(check()) ? 0 : 1;
  } catch (const std::system_error& e) {  // the ring could not be set up
    std::printf("consumer: %s\n", e.what());
    const bool no_uring = e.code() == std::errc::function_not_supported || e.code() == std::errc::operation_not_permitted;
    return no_uring ? 77 : 1;
  }
}
