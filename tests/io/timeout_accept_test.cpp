// with_timeout / with_deadline on accept and connect: a timed-out accept leaves later
// connections to the listener, an accept racing its timer loses no connection, and a connect
// that cannot complete in time closes its socket.
#include <cogwheel/io/tcp.hpp>  // first: the header compiles on its own

#include <sys/socket.h>

#include <atomic>
#include <thread>
#include <vector>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

TEST(timeout_io, accept_times_out_and_the_listener_keeps_later_connections) {
  run(
      []() -> task<void> {
        auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
        CO_ASSERT_OK(listener);
        const auto start = loop_now();
        auto none = co_await with_timeout(listener->accept(), 30ms);
        EXPECT_EQ(none.error(), errc::timed_out);
        EXPECT_GE(loop_now() - start, 30ms);
        auto c = co_await tcp_stream::connect(listener->local_address());
        CO_ASSERT_OK(c);
        auto s = co_await with_timeout(listener->accept(), 1s);
        CO_ASSERT_OK(s);
        EXPECT_EQ(s->peer_address().value(), c->local_address());
      }(),
      paused());
}

TEST(timeout_io, accept_racing_its_timeout_loses_no_connection) {
  static const int rounds = scaled(300);
  run(
      []() -> task<void> {
        auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
        CO_ASSERT_OK(listener);
        std::vector<tcp_stream> clients;
        int accepted = 0;
        int timed_out = 0;
        static constexpr clock::duration offsets[] = {-200us, 0us, 100us, 0us, 200us};
        for (int i = 0; i < rounds; ++i) {
          const clock::time_point at = clock::now() + 1ms;
          auto connect_at = [](socket_address to, clock::time_point when, std::vector<tcp_stream>& out) -> task<void> {
            co_await sleep_until(when);
            auto c = co_await tcp_stream::connect(to);
            CO_ASSERT_OK(c);
            out.push_back(std::move(*c));
          };
          spawn(connect_at(listener->local_address(), at + offsets[i % std::size(offsets)], clients));
          auto s = co_await with_deadline(listener->accept(), at);
          if (s)
            ++accepted;
          else {
            EXPECT_EQ(s.error(), errc::timed_out);
            ++timed_out;
          }
        }
        while (clients.size() < static_cast<std::size_t>(rounds)) co_await sleep_for(1ms);
        while (accepted < rounds) {  // every connection is still there for a later accept
          auto s = co_await with_timeout(listener->accept(), 2s);
          CO_ASSERT_OK(s);
          ++accepted;
        }
        auto extra = co_await with_timeout(listener->accept(), 20ms);
        EXPECT_EQ(extra.error(), errc::timed_out);
        EXPECT_GT(timed_out, 0);
      }(),
      runtime_options{.tick = 100us});
}

TEST(timeout_io, task_destroyed_while_waiting_in_accept_leaves_the_connection_to_the_next) {
  run([]() -> task<void> {
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(listener);
    auto accept_once = [](tcp_listener& l) -> task<void> {
      (void)co_await l.accept();
      ADD_FAILURE() << "a destroyed accept() completed";
    };
    frame_holder holder = hold(accept_once(*listener));
    co_await yield();
    holder.frame.destroy();
    auto c = co_await tcp_stream::connect(listener->local_address());
    CO_ASSERT_OK(c);
    auto s = co_await with_timeout(listener->accept(), 1s);
    CO_ASSERT_OK(s);
  }());
}

TEST(timeout_io, connect_completes_within_its_timeout) {
  run([]() -> task<void> {
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
    CO_ASSERT_OK(listener);
    auto c = co_await with_timeout(tcp_stream::connect(listener->local_address()), 1s);
    CO_ASSERT_OK(c);
    EXPECT_TRUE(c->is_open());
    auto refused_addr = listener->local_address();
    listener->close();
    auto r = co_await with_timeout(tcp_stream::connect(refused_addr), 1s);
    EXPECT_EQ(r.error(), errc::connection_refused);  // an error, not a timeout
  }());
}

TEST(timeout_io, connect_to_a_full_accept_queue_times_out_and_closes_its_socket) {
  // Loopback can make a connect hang: a listener whose accept queue is full drops SYNs, and
  // the client retransmits only after a second. backlog 0 leaves room for one connection.
  run([]() -> task<void> {
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0), listen_options{.backlog = 0});
    CO_ASSERT_OK(listener);
    std::vector<tcp_stream> queued;
    result<tcp_stream> hung = errc::operation_in_progress;
    int fds_before = 0;
    for (int i = 0; i < 8; ++i) {
      fds_before = open_descriptors();
      // Long enough for a loopback connect on a loaded machine, shorter than the first SYN
      // retransmission (1 s).
      auto c = co_await with_timeout(tcp_stream::connect(listener->local_address()), 300ms);
      if (!c) {
        hung = std::move(c);
        break;
      }
      queued.push_back(std::move(*c));
    }
    CO_ASSERT_TRUE(!hung);
    EXPECT_EQ(hung.error(), errc::timed_out) << hung.error().message();
    EXPECT_GE(queued.size(), 1u);
    EXPECT_EQ(open_descriptors(), fds_before);  // the cancelled connect's socket is closed

    // Taking the queued connections makes room: connecting works again.
    for (std::size_t i = 0; i < queued.size(); ++i) {
      auto s = co_await with_timeout(listener->accept(), 1s);
      CO_ASSERT_OK(s);
    }
    auto again = co_await with_timeout(tcp_stream::connect(listener->local_address()), 2s);
    CO_ASSERT_OK(again);
  }());
}

}  // namespace
}  // namespace cogwheel
