// A listening socket that fails every accept (shut down under the listener: EINVAL; anything
// but a connection, a cancellation or running out of descriptors, which backs off): each
// accept() call gets the error, and the listener does not accept ahead again until a caller
// asks. Re-armed at once, its accepts failed and re-armed in a busy loop (60,568 submissions
// in 200 ms of an idle core).
#include <sys/socket.h>

#include <chrono>

#include "support.hpp"

namespace cogwheel::io_test {
namespace {

using namespace std::chrono_literals;

TEST(accept_failure, a_listener_whose_socket_fails_every_accept_does_not_spin_the_core) {
  run([]() -> task<void> {
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(listener);
    // One accept() that gave up: the listener accepts ahead from here on.
    auto none = co_await with_timeout(listener->accept(), 5ms);
    EXPECT_EQ(none.error(), errc::timed_out);
    ::shutdown(listener->native_handle(), SHUT_RDWR);  // every accept now fails with EINVAL
    const std::uint64_t before = this_core_metrics().submissions;
    co_await sleep_for(50ms);  // nobody asks
    EXPECT_LT(this_core_metrics().submissions - before, 20u);  // the timer's, the failed batch's
    // Each call gets the error, at once.
    for (int i = 0; i < 3; ++i) {
      auto r = co_await with_timeout(listener->accept(), 5s);
      EXPECT_EQ(r.error(), std::errc::invalid_argument);
    }
  }());
}

TEST(accept_failure, every_caller_waiting_when_the_socket_fails_gets_the_error) {
  run([]() -> task<void> {
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0), {.max_unclaimed = 1});
    CO_ASSERT_OK(listener);
    auto waiter = [](tcp_listener& l) -> task<std::error_code> {
      auto r = co_await with_timeout(l.accept(), 5s);
      co_return r ? std::error_code() : r.error();
    };
    auto fail_soon = [](tcp_listener& l) -> task<std::error_code> {
      co_await sleep_for(5ms);  // both callers wait by now, one accept request in flight
      ::shutdown(l.native_handle(), SHUT_RDWR);
      co_return std::error_code();
    };
    auto [a, b, c] = co_await when_all(waiter(*listener), waiter(*listener), fail_soon(*listener));
    EXPECT_EQ(a, std::errc::invalid_argument);
    EXPECT_EQ(b, std::errc::invalid_argument);  // not left waiting with nothing in flight
    (void)c;
  }());
}

}  // namespace
}  // namespace cogwheel::io_test
