// Back-pressure on accept: a listener holds at most listen_options::max_unclaimed connections
// accepted ahead of accept() calls; past that the kernel's backlog applies, and accepting
// resumes as the application takes connections.
#include "support.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cogwheel::io_test {
namespace {

// Starts a non-blocking connect to `to` (it completes in the kernel's backlog, or waits there).
int start_connect(const socket_address& to) {
  const int fd = ::socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) (void)::connect(fd, to.data(), to.size());
  return fd;
}

void holds_at_most_the_bound(std::size_t bound) {
  run([](std::size_t bound) -> task<void> {
    listen_options options;
    options.backlog = 16;
    if (bound != 0) options.max_unclaimed = bound;
    const std::size_t limit = bound != 0 ? bound : listen_options{}.max_unclaimed;
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0), options);
    CO_ASSERT_OK(listener);
    const int base = open_descriptors();
    constexpr int clients = 300;
    std::vector<int> fds;
    auto first = with_timeout(listener->accept(), 5s);  // one accept() call, then none
    fds.push_back(start_connect(listener->local_address()));
    auto one = co_await std::move(first);
    CO_ASSERT_OK(one);
    for (int i = 1; i < clients; ++i) fds.push_back(start_connect(listener->local_address()));
    co_await sleep_for(100ms);  // the listener accepts what it may
    const int server_side = open_descriptors() - base - clients - 1;  // minus the one taken
    EXPECT_LE(server_side, static_cast<int>(limit));
    EXPECT_GE(server_side, static_cast<int>(std::min<std::size_t>(limit, 16)));  // it does accept ahead
    // Taking connections makes room: accepting goes on past those accepted ahead, from the
    // kernel's backlog (which holds established connections beyond the bound).
    for (int i = 0; i < server_side + 2; ++i) {
      auto s = co_await with_timeout(listener->accept(), 10s);
      CO_ASSERT_OK(s);
    }
    for (int fd : fds) ::close(fd);
  }(bound));
}

TEST(accept_limit, a_listener_holds_no_more_unclaimed_connections_than_its_bound) { holds_at_most_the_bound(8); }

TEST(accept_limit, the_default_bound_keeps_300_connecting_clients_from_taking_300_descriptors) {
  holds_at_most_the_bound(0);
}

TEST(accept_limit, closing_a_listener_closes_what_it_accepted_ahead) {
  run([]() -> task<void> {
    const int base = open_descriptors();
    {
      auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0), {.max_unclaimed = 4});
      CO_ASSERT_OK(listener);
      auto first = with_timeout(listener->accept(), 5s);
      const int c0 = start_connect(listener->local_address());
      auto one = co_await std::move(first);
      CO_ASSERT_OK(one);
      one->close();
      std::vector<int> fds;
      for (int i = 0; i < 10; ++i) fds.push_back(start_connect(listener->local_address()));
      co_await sleep_for(50ms);
      listener->close();
      ::close(c0);
      for (int fd : fds) ::close(fd);
    }
    EXPECT_EQ(open_descriptors(), base);
  }());
}

}  // namespace
}  // namespace cogwheel::io_test
