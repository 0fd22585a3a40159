// Past the deadline, nothing reaches the kernel: a socket operation started when its task's
// effective deadline has passed (its scope's timer not yet fired) or when the task is already
// stopped completes at once with errc::operation_canceled, and the backend's submission count
// does not move (this_core_metrics().submissions). Inside a scope that has not run out the same
// operation is submitted as usual. Both backends (CI runs it with COGWHEEL_BACKEND=epoll too);
// it links io for the sockets.
#include <cogwheel/io/udp.hpp>

#include <gtest/gtest.h>

#include <chrono>

#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/run.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/stats.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

std::uint64_t submissions() { return this_core_metrics().submissions; }

// A socket to send from and the address of another to send to, on loopback.
struct sender {
  udp_socket from;
  udp_socket sink;
  socket_address to;
};
result<sender> bind_sender() {
  auto from = udp_socket::bind(socket_address::ipv4_loopback(0));
  auto sink = udp_socket::bind(socket_address::ipv4_loopback(0));
  if (!from || !sink) return errc::address_not_available;
  const socket_address to = sink->local_address();
  return sender{std::move(*from), std::move(*sink), to};
}

TEST(deadline_io, a_receive_past_the_deadline_never_reaches_the_driver) {
  run([]() -> task<> {
    auto sock = udp_socket::bind(socket_address::ipv4_loopback(0));
    if (!sock) {
      ADD_FAILURE() << sock.error().message();
      co_return;
    }
    deadline d(1h);
    std::uint64_t submitted = 99;
    result<std::size_t> got{0};
    auto worker = [&]() -> task<> {
      d.reset_to(now() - 1ms);  // the budget is gone; its timer has not fired yet
      const std::uint64_t before = submissions();
      std::byte buf[16];
      got = co_await sock->receive(buf);
      submitted = submissions() - before;
    };
    auto r = co_await with_deadline(worker(), d);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(got.error(), errc::operation_canceled);
    EXPECT_EQ(submitted, 0u);
  }());
}

TEST(deadline_io, a_send_in_a_stopped_task_never_reaches_the_driver) {
  run([]() -> task<> {
    auto pair = bind_sender();
    if (!pair) {
      ADD_FAILURE() << pair.error().message();
      co_return;
    }
    std::uint64_t submitted = 99;
    result<std::size_t> sent{0};
    auto worker = [&]() -> task<> {
      co_await sleep_for(1h);  // the timeout fires here and stops the task
      const std::uint64_t before = submissions();
      const std::byte msg[4]{};
      sent = co_await pair->from.send_to(msg, pair->to);
      submitted = submissions() - before;
    };
    auto r = co_await with_timeout(worker(), 5ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(sent.error(), errc::operation_canceled);
    EXPECT_EQ(submitted, 0u);
  }());
}

TEST(deadline_io, inside_a_scope_that_has_not_run_out_the_operation_is_submitted) {
  run([]() -> task<> {
    auto pair = bind_sender();
    if (!pair) {
      ADD_FAILURE() << pair.error().message();
      co_return;
    }
    std::uint64_t submitted = 0;
    auto worker = [&]() -> task<result<std::size_t>> {
      const std::uint64_t before = submissions();
      const std::byte msg[4]{};
      auto sent = co_await pair->from.send_to(msg, pair->to);
      submitted = submissions() - before;
      co_return sent;
    };
    auto r = co_await with_timeout(worker(), 10s);
    EXPECT_TRUE(r.has_value());
    EXPECT_GE(submitted, 1u);
  }());
}

}  // namespace
}  // namespace cogwheel
