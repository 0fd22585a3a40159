// Faults a server meets: peers that reset, writes to dead peers (an error, never SIGPIPE),
// and running out of descriptors in an accept loop (no spinning, existing connections still
// served, recovery once descriptors free up), on the paused clock so the back-off is counted exactly.
#include <cogwheel/cogwheel.hpp>  // first: the umbrella header compiles on its own

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <vector>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

bool is_reset_or_broken_pipe(std::error_code ec) {
  return ec == errc::connection_reset || ec == errc::broken_pipe;
}

TEST(fault, peer_reset_during_a_read_gives_connection_reset) {
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(co_await pair->client.write_all(bytes_of("partial")));
    auto reset_soon = [](tcp_stream& s) -> task<void> {
      co_await sleep_for(5ms);  // the server is waiting in its second read by then
      CO_ASSERT_OK(s.set_linger(true, 0));
      s.close();  // linger 0: RST instead of FIN
    };
    spawn(reset_soon(pair->client));
    std::byte buf[64];
    auto first = co_await with_timeout(pair->server.read(buf), 5s);
    CO_ASSERT_OK(first);
    EXPECT_EQ(text_of(std::span(buf, *first)), "partial");
    auto r = co_await with_timeout(pair->server.read(buf), 5s);
    CO_ASSERT_TRUE(!r);
    EXPECT_EQ(r.error(), errc::connection_reset) << r.error().message();
  }());
}

TEST(fault, peer_reset_during_write_all_ends_it_with_the_error_and_an_exact_count) {
  run([]() -> task<void> {
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    (void)pair->client.set_receive_buffer_size(4096);
    (void)pair->server.set_send_buffer_size(16384);
    const std::vector<std::byte> data = pattern_bytes(8 << 20);
    std::size_t written = 0;
    auto reset_soon = [](tcp_stream& s) -> task<void> {
      co_await sleep_for(20ms);  // write_all is stuck on the full buffers by then
      CO_ASSERT_OK(s.set_linger(true, 0));
      s.close();
    };
    spawn(reset_soon(pair->client));
    auto r = co_await with_timeout(pair->server.write_all(data, written), 5s);
    CO_ASSERT_TRUE(!r);
    EXPECT_TRUE(is_reset_or_broken_pipe(r.error())) << r.error().message();
    EXPECT_GT(written, 0u);
    EXPECT_LT(written, data.size());
    // The stream stays usable as an object: further writes fail the same way, nothing hangs.
    auto again = co_await with_timeout(pair->server.write_all(bytes_of("x")), 5s);
    CO_ASSERT_TRUE(!again);
    EXPECT_TRUE(is_reset_or_broken_pipe(again.error())) << again.error().message();
  }());
}

// Writes to `s` until an error comes back (bounded); the error.
task<std::error_code> write_until_error(tcp_stream& s) {
  std::vector<std::byte> chunk(64 * 1024, std::byte{7});
  for (int i = 0; i < 200; ++i) {
    auto n = co_await with_timeout(s.write(chunk), 5s);
    if (!n) co_return n.error();
    co_await sleep_for(1ms);  // let the peer's RST come back
  }
  co_return std::error_code{};
}

task<void> write_to_dead_peers() {
  {
    // The peer resets: the write fails with ECONNRESET (or EPIPE once that was reported).
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    CO_ASSERT_OK(pair->server.set_linger(true, 0));
    pair->server.close();
    co_await sleep_for(5ms);
    const std::error_code first = co_await write_until_error(pair->client);
    EXPECT_TRUE(is_reset_or_broken_pipe(first)) << first.message();
    auto again = co_await pair->client.write(bytes_of("more"));
    CO_ASSERT_TRUE(!again);
    EXPECT_TRUE(is_reset_or_broken_pipe(again.error())) << again.error().message();
    auto all = co_await pair->client.write_all(bytes_of("more"));
    CO_ASSERT_TRUE(!all);
    EXPECT_TRUE(is_reset_or_broken_pipe(all.error())) << all.error().message();
  }
  {
    // The peer closes normally: the first write is answered with a RST, a later one fails.
    auto pair = co_await connect_pair();
    CO_ASSERT_OK(pair);
    pair->server.close();
    const std::error_code first = co_await write_until_error(pair->client);
    EXPECT_TRUE(is_reset_or_broken_pipe(first)) << first.message();
    auto all = co_await pair->client.write_all(bytes_of("x"));
    CO_ASSERT_TRUE(!all);
    EXPECT_TRUE(is_reset_or_broken_pipe(all.error())) << all.error().message();
  }
}

TEST(fault, writing_to_a_dead_peer_is_an_error_and_raises_no_sigpipe) {
  // In a child process with SIGPIPE at its default action (terminate): had a send raised it,
  // the child would die of the signal instead of exiting 0. (The library passes MSG_NOSIGNAL;
  // kernels since 5.x also add it to every io_uring send themselves, so this checks the
  // outcome, not which of the two provides it.)
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        struct sigaction sa {};
        sa.sa_handler = SIG_DFL;
        ::sigemptyset(&sa.sa_mask);
        ::sigaction(SIGPIPE, &sa, nullptr);
        run(write_to_dead_peers());
        std::fflush(stdout);
        std::exit(::testing::Test::HasFailure() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

// --- Running out of descriptors -------------------------------------------------------------

constexpr int fd_limit = 64;   // RLIMIT_NOFILE in the child
constexpr int clients = 100;   // more than fd_limit: the server runs out
constexpr int high_fd = 1000;  // where the client sockets live: above the limit, still usable

struct server_state {
  std::deque<tcp_stream> connections;  // a deque: references stay valid as it grows
  int accept_calls = 0;
  int emfile = 0;
  int other_errors = 0;
  int serving = 0;  // echo tasks still running
  bool accepting = true;
  std::vector<clock::time_point> emfile_at;  // when each EMFILE reached the accept loop
};

task<void> serve_echo(tcp_stream& s, int& serving) {
  ++serving;
  std::byte buf[256];
  for (;;) {
    auto n = co_await s.read(buf);
    if (!n || *n == 0) break;
    if (!co_await s.write_all(std::span(buf, *n))) break;
  }
  s.close();  // gives the descriptor back
  --serving;
}

task<void> accept_loop(tcp_listener& listener, server_state& st) {
  for (;;) {
    ++st.accept_calls;
    auto r = co_await listener.accept();
    if (r) {
      st.connections.push_back(std::move(*r));
      spawn(serve_echo(st.connections.back(), st.serving));
    } else if (r.error() == errc::too_many_files_open) {
      ++st.emfile;  // a real server would log it and carry on, as here
      st.emfile_at.push_back(now());
    } else if (r.error() == errc::operation_canceled) {
      st.accepting = false;  // the listener closed
      co_return;
    } else {
      ++st.other_errors;
    }
  }
}

task<void> echo_once(tcp_stream& client, std::string_view text) {
  CO_ASSERT_OK(co_await client.write_all(bytes_of(text)));
  std::vector<std::byte> back(text.size());
  auto n = co_await with_timeout(read_exactly(client, back), 2s);
  CO_ASSERT_OK(n);
  EXPECT_EQ(text_of(std::span(back.data(), *n)), text);
}

task<void> wait_until(auto condition, clock::duration limit) {
  const auto give_up = now() + limit;
  while (!condition() && now() < give_up) co_await sleep_for(5ms);
}

task<void> run_out_of_descriptors(std::vector<int> client_fds) {
  auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
  CO_ASSERT_OK(listener);
  const socket_address addr = listener->local_address();
  server_state st;
  spawn(accept_loop(*listener, st));

  // The clients connect (blocking connect(2): loopback completes the handshake at once, into
  // the listener's queue) and become streams; none needs a new descriptor.
  std::vector<tcp_stream> client;
  for (int fd : client_fds) {
    CO_ASSERT_TRUE(::connect(fd, addr.data(), addr.size()) == 0);
    client.emplace_back(fd);
  }
  co_await wait_until([&] { return st.emfile > 0; }, 3s);
  CO_ASSERT_TRUE(st.emfile > 0);
  const std::size_t accepted = st.connections.size();
  EXPECT_GT(accepted, 10u);
  EXPECT_LT(accepted, static_cast<std::size_t>(clients));
  EXPECT_EQ(st.other_errors, 0);

  // No spinning, counted exactly on the paused clock: while descriptors stay exhausted, each
  // round arms a batch of accept SQEs (up to 8 in flight), every one fails, the last to fail
  // reports EMFILE to the one waiting accept() and starts the back-off, which doubles from
  // 1 ms to 1 s. So the EMFILEs reach the loop 1, 2, 4, ... 512, 1000, 1000 ms apart, with one
  // accept() call and 8 completions per round, whatever the machine's speed.
  const int rounds_before = st.emfile;
  const int calls_before = st.accept_calls;
  const auto stats_before = this_core_metrics();
  co_await sleep_for(3s);
  const int rounds = st.emfile - rounds_before;
  EXPECT_EQ(st.accept_calls - calls_before, rounds) << "accept() calls: one per round";
  EXPECT_EQ(this_core_metrics().completions - stats_before.completions, 8u * static_cast<unsigned>(rounds))
      << "completions: one batch of 8 failing accept SQEs per round";
  std::vector<clock::duration> gaps;
  for (std::size_t i = 1; i < st.emfile_at.size(); ++i) gaps.push_back(st.emfile_at[i] - st.emfile_at[i - 1]);
  std::vector<clock::duration> expected;
  for (clock::duration d = 1ms; gaps.size() > expected.size(); d = std::min<clock::duration>(2 * d, 1s))
    expected.push_back(d);
  // The first back-off starts off the tick grid (at the iteration's timestamp), so it ends on
  // the next tick at or after 1 ms (never early, less than one tick late); every later one
  // starts on the grid and is exact.
  CO_ASSERT_TRUE(gaps.size() >= 11);
  EXPECT_GE(gaps[0], 1ms);
  EXPECT_LT(gaps[0], 2ms);
  gaps[0] = expected[0];
  EXPECT_EQ(gaps, expected);
  std::printf("out of descriptors: %zu accepted, %d EMFILE rounds in 3 s (paused clock), %zu gaps\n", accepted,
              rounds, gaps.size());
  EXPECT_EQ(st.connections.size(), accepted);

  // Connections already accepted are still served (the kernel queues them in order, so
  // client i is connection i).
  co_await echo_once(client[0], "still served");
  co_await echo_once(client[accepted - 1], "the last one too");

  // A new outgoing connection fails cleanly as well.
  auto c = co_await tcp_stream::connect(addr);
  CO_ASSERT_TRUE(!c);
  EXPECT_EQ(c.error(), errc::too_many_files_open) << c.error().message();

  // Recovery: clients hang up, the server closes those connections, and the listener takes
  // the queued ones within its (at most 1 s) back-off.
  constexpr std::size_t freed = 20;
  for (std::size_t i = 0; i < freed; ++i) client[i].close();
  co_await wait_until([&] { return st.connections.size() >= accepted + freed / 2; }, 5s);
  CO_ASSERT_TRUE(st.connections.size() > accepted);
  co_await echo_once(client[accepted], "accepted after recovery");
  EXPECT_EQ(st.other_errors, 0);

  // Wind down while `st` still lives: the accept loop ends with operation_canceled, the
  // echo tasks at their clients' end of stream.
  listener->close();
  client.clear();
  co_await wait_until([&] { return !st.accepting && st.serving == 0; }, 5s);
  EXPECT_EQ(st.serving, 0);
  EXPECT_FALSE(st.accepting);
}

void accept_loop_out_of_descriptors() {
  // Client sockets are made first and moved above the coming limit: descriptors beyond
  // RLIMIT_NOFILE stay usable, only new ones must be below it; so only the server runs out.
  std::vector<int> fds;
  for (int i = 0; i < clients; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, high_fd);
    ::close(fd);
    ASSERT_GE(high, high_fd) << "cannot place client sockets above the limit";
    fds.push_back(high);
  }
  // UBSan checks a virtual call's dynamic type once per type pair, probing memory through a
  // pipe: without descriptors that probe fails and it reports a bogus invalid vptr. Make the
  // error_category calls the test will make once while descriptors are still there.
  for (std::error_code ec : {std::error_code(EMFILE, std::system_category()), std::make_error_code(errc::timed_out)}) {
    (void)(ec == errc::too_many_files_open);
    (void)(ec == errc::operation_canceled);
    (void)ec.message();
  }
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  rl.rlim_cur = fd_limit;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &rl), 0);
  run(run_out_of_descriptors(std::move(fds)), runtime_options{.paused_clock = true});
}

TEST(fault, accept_loop_out_of_descriptors_backs_off_keeps_serving_and_recovers) {
  // In a child process, so the low descriptor limit touches no other test.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        accept_loop_out_of_descriptors();
        std::fflush(stdout);
        std::exit(::testing::Test::HasFailure() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace cogwheel
