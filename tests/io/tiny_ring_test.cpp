// Frames destroyed on a tiny ring (2 SQ and 2 CQ entries: every few SQEs fill the SQ, and the
// completions of one iteration overflow the CQ) while a connect, a shutdown or a read is in
// flight, or while its completion has already been reaped into the loop's batch but not yet
// dispatched (the frame is destroyed by a completion earlier in the same batch). Every
// operation's completion is dispatched exactly once (this_core_metrics().completions counts one per
// SQE, cancels excluded), no destroyed frame is resumed, no descriptor or byte goes astray, and
// the sanitizer builds see no access to a freed frame. On epoll (COGWHEEL_BACKEND=epoll) there
// is no ring to fill: the same frames and operations run, and only the ring's counters are
// not checked.
#include <cogwheel/cogwheel.hpp>  // first: the umbrella header compiles on its own

#include <sys/socket.h>

#include <cstdio>
#include <optional>
#include <string_view>
#include <vector>

#include "support.hpp"
#include "../support/backend.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

bool on_a_ring() { return !::test_support::testing_epoll(); }

runtime_options tiny_ring() {
  runtime_options o;
  o.sq_entries = 2;
  o.cq_entries = 2;
  return o;
}

// A group of frames of which the first to resume destroys all the others: whatever the others
// were suspended on, their operations' completions are either still in the kernel or further
// down the batch the loop is dispatching.
struct doomed_group {
  std::vector<std::optional<frame_holder>> frames;
  int resumed = 0;        // frames that went on after their operation
  int first = -1;         // the one that did, and destroyed the others
  int destroyed = 0;

  void destroy_all_but(int keep) {
    first = keep;
    for (int i = 0; i < static_cast<int>(frames.size()); ++i) {
      if (i == keep || !frames[i]) continue;
      frames[i]->frame.destroy();
      frames[i].reset();
      ++destroyed;
    }
  }
  // The survivor's frame, finished by now (final_suspend keeps it for us to destroy).
  void release_survivor() {
    if (first >= 0 && frames[first]) {
      frames[first]->frame.destroy();
      frames[first].reset();
    }
  }
};

// One member: awaits `op`, then (if it is the first) destroys the rest of the group.
template <class Op>
task<void> member(doomed_group& g, int index, Op op) {
  (void)co_await std::move(op);
  ++g.resumed;
  if (g.first < 0) g.destroy_all_but(index);
}

// Connects to `listener` (made with backlog 0) until a connect hangs: a listener whose accept
// queue is full drops SYNs, and the client retransmits only after a second. The connections
// that got in are kept in `queued`; false if none hung.
task<bool> fill_accept_queue(tcp_listener& listener, std::vector<tcp_stream>& queued) {
  for (int i = 0; i < 8; ++i) {
    auto c = co_await with_timeout(tcp_stream::connect(listener.local_address()), 100ms);
    if (!c) co_return true;
    queued.push_back(std::move(*c));
  }
  co_return false;
}

TEST(tiny_ring, frames_destroyed_with_connects_cancelled_in_the_same_batch_close_every_socket) {
  // Whether the 16 completions reach the CQ of 2 together (an overflow) depends on how fast the
  // kernel answers the cancels against how fast the loop reaps: a slow (sanitized) loop once in
  // five runs reaped them as they came. Every attempt checks what must hold; the batch the
  // test is about must have happened in one of them.
  bool exercised = false;
  for (int attempt = 0; attempt < 5 && !exercised; ++attempt) {
    run([](bool& exercised) -> task<void> {
      auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0), listen_options{.backlog = 0});
      CO_ASSERT_OK(listener);
      std::vector<tcp_stream> queued;
      CO_ASSERT_TRUE(co_await fill_accept_queue(*listener, queued));

      const int fds_before = open_descriptors();
      const auto before = this_core_metrics();
      constexpr int n = 16;
      doomed_group g;
      g.frames.resize(n);
      // All 16 timers are filed in this iteration for the same instant, so they fire in one
      // batch; each cancels its connect (the cancel SQEs fill the SQ of 2 again and again) and
      // the 16 completions reach the CQ of 2 together. The first connect dispatched resumes its
      // frame, which destroys the 15 others while their completions wait further down the batch.
      for (int i = 0; i < n; ++i)
        g.frames[i].emplace(hold(member(g, i, with_timeout(tcp_stream::connect(listener->local_address()), 50ms))));
      EXPECT_GT(open_descriptors(), fds_before);  // 16 sockets connecting
      co_await sleep_for(200ms);

      EXPECT_EQ(g.resumed, 1);
      EXPECT_EQ(g.destroyed, n - 1);
      g.release_survivor();
      const auto after = this_core_metrics();
      EXPECT_EQ(after.completions - before.completions, static_cast<unsigned>(n)) << "one completion per connect";
      exercised = !on_a_ring() ||
                  (after.sq_full_flushes > before.sq_full_flushes && after.cq_overflows > before.cq_overflows);
      EXPECT_EQ(open_descriptors(), fds_before) << "a destroyed connect left its socket open";
    }(exercised), tiny_ring());
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_TRUE(exercised) << "in 5 attempts the SQ never filled and the CQ never overflowed";
}

TEST(tiny_ring, frames_destroyed_with_connects_in_flight_wait_for_their_cancellation) {
  run([]() -> task<void> {
    auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0), listen_options{.backlog = 0});
    CO_ASSERT_OK(listener);
    std::vector<tcp_stream> queued;
    CO_ASSERT_TRUE(co_await fill_accept_queue(*listener, queued));

    const int fds_before = open_descriptors();
    const auto before = this_core_metrics();
    constexpr int n = 16;
    doomed_group g;
    g.frames.resize(n);
    for (int i = 0; i < n; ++i) g.frames[i].emplace(hold(member(g, i, tcp_stream::connect(listener->local_address()))));
    co_await sleep_for(20ms);  // every connect in the kernel, hung
    EXPECT_EQ(g.resumed, 0);
    g.destroy_all_but(-1);  // from outside the group: each destructor cancels and waits
    EXPECT_EQ(g.destroyed, n);
    const auto after = this_core_metrics();
    EXPECT_EQ(after.completions - before.completions, static_cast<unsigned>(n));
    if (on_a_ring()) {
      EXPECT_GT(after.sq_full_flushes, before.sq_full_flushes);
    }
    EXPECT_EQ(open_descriptors(), fds_before);
    co_await sleep_for(10ms);
    EXPECT_EQ(g.resumed, 0);
    EXPECT_EQ(this_core_metrics().completions, after.completions) << "a completion came after its frame was gone";
  }(), tiny_ring());
}

// Both ends of `pairs` connections; the server ends read what the clients do.
task<result<std::vector<stream_pair>>> connect_pairs(int pairs) {
  std::vector<stream_pair> out;
  for (int i = 0; i < pairs; ++i) {
    auto p = co_await connect_pair();
    if (!p) co_return p.error();
    out.push_back(std::move(*p));
  }
  co_return out;
}

// shutdown() is a plain syscall made when it starts (an SQE would run on io-wq, which looks
// the descriptor number up late): none is ever pending on a full ring, each member resumes at
// once, before anything could destroy its frame, and every stream is shut down.
TEST(tiny_ring, shutdowns_on_a_full_ring_take_effect_at_once_and_leave_nothing_pending) {
  run([]() -> task<void> {
    constexpr int n = 12;
    auto pairs = co_await connect_pairs(n);
    CO_ASSERT_OK(pairs);
    const int fds_before = open_descriptors();
    const auto before = this_core_metrics();
    doomed_group g;
    g.frames.resize(n);
    for (int i = 0; i < n; ++i) g.frames[i].emplace(hold(member(g, i, (*pairs)[i].client.shutdown(SHUT_WR))));
    EXPECT_EQ(g.resumed, n);
    EXPECT_EQ(g.destroyed, 0);
    for (auto& f : g.frames) {
      f->frame.destroy();
      f.reset();
    }
    const auto after = this_core_metrics();
    EXPECT_EQ(after.completions - before.completions, 0u) << "no shutdown went through the ring";

    // Every server end reads end of stream; the other direction works throughout.
    int took_effect = 0;
    for (stream_pair& p : *pairs) {
      std::byte b[8];
      auto r = co_await with_timeout(p.server.read(b), 2s);
      CO_ASSERT_OK(r);
      EXPECT_EQ(*r, 0u);
      if (r && *r == 0) ++took_effect;
      CO_ASSERT_OK(co_await p.server.write_all(bytes_of("back")));
      auto m = co_await with_timeout(p.client.read(b), 2s);
      CO_ASSERT_OK(m);
      EXPECT_EQ(text_of(std::span(b, *m)), "back");
    }
    EXPECT_EQ(took_effect, n);
    EXPECT_EQ(open_descriptors(), fds_before);
  }(), tiny_ring());
}

TEST(tiny_ring, frames_destroyed_while_their_reads_are_reaped_or_in_flight_steal_no_later_byte) {
  run([]() -> task<void> {
    constexpr int n = 12;
    auto pairs = co_await connect_pairs(n);
    CO_ASSERT_OK(pairs);
    // Even pairs have a byte waiting (their read completes at submission, into the same
    // batch as the first); odd pairs have none (their read stays in the kernel).
    for (int i = 0; i < n; i += 2) CO_ASSERT_OK(co_await (*pairs)[i].client.write_all(bytes_of("x")));
    co_await sleep_for(5ms);
    const auto before = this_core_metrics();
    doomed_group g;
    g.frames.resize(n);
    std::vector<std::vector<std::byte>> buffers(n, std::vector<std::byte>(16));
    for (int i = 0; i < n; ++i) g.frames[i].emplace(hold(member(g, i, (*pairs)[i].server.read(buffers[i]))));
    co_await sleep_for(20ms);
    EXPECT_EQ(g.resumed, 1);
    EXPECT_EQ(g.first, 0);  // the first SQE queued, with its byte there
    EXPECT_EQ(g.destroyed, n - 1);
    g.release_survivor();
    const auto after = this_core_metrics();
    EXPECT_EQ(after.completions - before.completions, static_cast<unsigned>(n)) << "one completion per read";
    if (on_a_ring()) {
      EXPECT_GT(after.sq_full_flushes, before.sq_full_flushes);
    }

    // What is written next reaches the next read whole: no destroyed read is still armed.
    for (stream_pair& p : *pairs) {
      CO_ASSERT_OK(co_await p.client.write_all(bytes_of("next")));
      std::vector<std::byte> b(4);
      auto m = co_await with_timeout(read_exactly(p.server, b), 2s);
      CO_ASSERT_OK(m);
      EXPECT_EQ(text_of(std::span(b.data(), *m)), "next");
    }
  }(), tiny_ring());
}

}  // namespace
}  // namespace cogwheel
