// The event loop itself: fairness between ready coroutines, timers and I/O; the paused clock;
// interval ticks on a drift-free grid with missed ticks skipped and counted; a tiny ring that
// overflows its queues without losing a completion; frames destroyed while their completion is
// taken from the ring but not yet dispatched (in the reaped batch, or set aside when the kernel
// refuses a submission with EBUSY, injected here); and a clear error when the ring cannot be
// created.
#include "event_loop.hpp"  // the loop itself (runtime/src): this is its own test

#include <gtest/gtest.h>
#include <liburing.h>

#include <dlfcn.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <cogwheel/runtime/deadline.hpp>
#include <cogwheel/runtime/interval.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/runtime.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/task.hpp>
#include <cogwheel/runtime/timeout.hpp>

#include "test_support.hpp"
#include "../support/backend.hpp"

// Fault injection: the loop's io_uring_submit, which refuses with -EBUSY (submitting nothing) as
// many times as asked before passing on to liburing's. Kernels before 5.19 refused submissions
// this way while overflowed completions waited; 6.x kernels keep accepting (the overflow list
// grows instead), so the loop's set-aside path for EBUSY cannot be reached through the kernel
// here: this definition, linked into the test, takes the place of liburing's for the loop.
namespace fault {
int refuse_submits = 0;  // how many coming io_uring_submit calls to refuse
int refused = 0;         // how many were refused
}  // namespace fault

extern "C" int io_uring_submit(io_uring* ring) {
  using submit_fn = int (*)(io_uring*);
  static const auto real = reinterpret_cast<submit_fn>(::dlsym(RTLD_NEXT, "io_uring_submit"));
  if (fault::refuse_submits > 0) {
    --fault::refuse_submits;
    ++fault::refused;
    return -EBUSY;
  }
  return real(ring);
}

namespace cogwheel {
namespace {

using namespace std::chrono_literals;

// The smallest kernel operation: one NOP (IORING_OP_NOP; on epoll it completes at once), following the operation protocol of
// <cogwheel/runtime/operation.hpp> (as sleep_operation does) and completing from the loop's CQE
// dispatch (as every socket operation does).
class nop_operation : public operation<nop_operation>, private detail::io_completion {
 public:
  nop_operation() noexcept { on_cqe = &nop_operation::on_complete; }
  // Counts its completions into `completions`.
  explicit nop_operation(int& completions) noexcept : completions_(&completions) {
    on_cqe = &nop_operation::on_complete;
  }
  nop_operation(nop_operation&& o) noexcept : operation(std::move(o)), completions_(o.completions_) {
    on_cqe = &nop_operation::on_complete;
  }
  ~nop_operation() {
    if (in_flight_) {
      continuation_ = {};
      loop_->cancel_and_wait(*this, in_flight_);
    }
  }

  std::coroutine_handle<> start(detail::continuation c) {
    loop_ = &detail::current_loop();
    continuation_ = c;
    request_.opcode = detail::io_opcode::nop;
    in_flight_ = true;
    loop_->submit(*this, request_);
    return std::noop_coroutine();
  }
  void cancel() noexcept {}  // completes at once anyway
  int result() const noexcept { return res_; }

 private:
  static void on_complete(detail::io_completion& c, int res, unsigned /*flags*/) noexcept {
    auto& self = static_cast<nop_operation&>(c);
    self.in_flight_ = false;
    self.res_ = res;
    if (self.completions_ != nullptr) ++*self.completions_;
    if (self.continuation_) self.continuation_.complete().resume();
  }

  detail::event_loop* loop_ = nullptr;
  detail::io_request request_;
  detail::continuation continuation_;
  int res_ = -1;
  int* completions_ = nullptr;
  bool in_flight_ = false;
};

static_assert(cancellable_operation<nop_operation>);

TEST(loop, yield_lets_other_coroutines_run) {
  std::vector<int> trace;
  run([](std::vector<int>& out) -> task<> {
    spawn([](std::vector<int>& o) -> task<> {
      for (int i = 0; i < 3; ++i) {
        o.push_back(1);
        co_await yield();
      }
    }(out));
    for (int i = 0; i < 3; ++i) {
      out.push_back(0);
      co_await yield();
    }
  }(trace));
  EXPECT_EQ(trace, (std::vector<int>{0, 1, 0, 1, 0, 1}));
}

TEST(loop, ready_budget_bounds_the_coroutines_resumed_per_iteration) {
  runtime_options o;
  o.ready_budget = 4;
  const std::uint64_t iterations = run([]() -> task<std::uint64_t> {
    int done = 0;
    for (int i = 0; i < 16; ++i) spawn([](int& d) -> task<> {
      ++d;
      co_return;
    }(done));
    const std::uint64_t before = this_core_metrics().iterations;
    while (done < 16) co_await yield();
    co_return this_core_metrics().iterations - before;
  }(), o);
  EXPECT_GE(iterations, 4u);  // 16 starts plus our own yields, 4 per iteration
}

// Real clock, on purpose: a paused clock does not move while the loop is busy, and a
// yield-loop keeps it busy forever.
TEST(loop, endless_yield_loop_does_not_starve_timers_or_io) {
  run([]() -> task<> {
    std::size_t spins = 0;
    spawn([](std::size_t& n) -> task<> {
      for (;;) {
        ++n;
        co_await yield();
      }
    }(spins));
    const auto start = clock::now();
    co_await sleep_for(10ms);
    EXPECT_LT(clock::now() - start, 5s);
    EXPECT_GT(spins, 0u);
    EXPECT_EQ(co_await nop_operation(), 0);  // I/O completes too
    // The spinning task is destroyed when run() returns.
  }());
}

TEST(loop, paused_clock_jumps_to_the_next_deadline_when_idle) {
  const auto real_start = std::chrono::steady_clock::now();
  run([]() -> task<> {
    const auto start = test::loop_now();
    const auto jumps = this_core_metrics().clock_jumps;
    co_await sleep_for(1h);
    EXPECT_GE(test::loop_now() - start, 1h);
    EXPECT_LT(test::loop_now() - start, 1h + 1ms);
    EXPECT_GT(this_core_metrics().clock_jumps, jumps);
    EXPECT_LT(this_core_metrics().clock_jumps - jumps, 10u);  // one jump per wheel level at most
  }(), test::paused());
  EXPECT_LT(std::chrono::steady_clock::now() - real_start, 5s);
}

TEST(loop, paused_clock_does_not_move_while_work_is_ready) {
  run([]() -> task<> {
    const auto start = test::loop_now();
    spawn([]() -> task<> { co_await sleep_for(1ms); }());  // a timer it could jump to
    for (int i = 0; i < 100; ++i) co_await yield();
    EXPECT_EQ(test::loop_now(), start);
    EXPECT_EQ(this_core_metrics().clock_jumps, 0u);
  }(), test::paused());
}

TEST(loop, paused_clock_does_not_jump_past_io_completions) {
  run([]() -> task<> {
    const auto start = test::loop_now();
    spawn([]() -> task<> { co_await sleep_for(1h); }());
    for (int i = 0; i < 100; ++i) EXPECT_EQ(co_await nop_operation(), 0);
    EXPECT_EQ(test::loop_now(), start);
  }(), test::paused());
}

TEST(interval, ticks_on_a_grid_without_drift) {
  run([]() -> task<> {
    const auto start = test::loop_now();
    interval every(100ms);
    EXPECT_EQ(every.next_tick(), start + 100ms);
    for (int i = 1; i <= 10; ++i) {
      co_await every.next();
      const auto at = test::loop_now() - start;
      EXPECT_GE(at, i * 100ms);
      EXPECT_LT(at, i * 100ms + 1ms);  // within a tick of the grid point, never accumulating
      EXPECT_EQ(every.next_tick(), start + (i + 1) * 100ms);
    }
    EXPECT_EQ(every.missed_ticks(), 0u);
  }(), test::paused());
}

TEST(interval, work_between_ticks_does_not_shift_the_grid) {
  run([]() -> task<> {
    const auto start = test::loop_now();
    interval every(100ms);
    for (int i = 1; i <= 10; ++i) {
      co_await every.next();
      co_await sleep_for(37ms);  // work that takes less than a period
    }
    EXPECT_GE(test::loop_now() - start, 1s + 37ms);
    EXPECT_LT(test::loop_now() - start, 1s + 38ms);
    EXPECT_EQ(every.missed_ticks(), 0u);
  }(), test::paused());
}

// A paused clock can be "busy" too: the consumer is away (sleeping) for 3.5 periods, so grid
// points 100, 200 and 300ms pass while nobody awaits the interval.
TEST(interval, missed_ticks_are_skipped_and_counted) {
  run([]() -> task<> {
    const auto start = test::loop_now();
    interval every(100ms);
    co_await sleep_for(350ms);
    co_await every.next();  // the late tick for 100ms, delivered at once
    EXPECT_LT(test::loop_now() - start, 351ms);
    EXPECT_EQ(every.missed_ticks(), 2u);  // 200 and 300ms were skipped
    EXPECT_EQ(every.next_tick(), start + 400ms);
    co_await every.next();
    EXPECT_GE(test::loop_now() - start, 400ms);
    EXPECT_LT(test::loop_now() - start, 401ms);
  }(), test::paused());
}

// Real clock, on purpose: the loop is blocked by the coroutine itself (a blocking sleep of the
// thread), as a long computation would block it.
TEST(interval, missed_ticks_when_the_loop_was_blocked_are_skipped) {
  run([]() -> task<> {
    interval every(10ms);
    const auto grid = every.next_tick();
    co_await every.next();
    std::this_thread::sleep_for(35ms);  // blocks the whole loop: ~3 grid points pass
    const auto before = clock::now();
    co_await every.next();  // the late tick, at once; the points behind it are skipped
    const auto after = clock::now();
    EXPECT_GE(every.missed_ticks(), 2u);
    EXPECT_LE(every.missed_ticks(), static_cast<std::uint64_t>((after - grid) / 10ms));  // a slow machine misses more
    const auto next = every.next_tick();
    EXPECT_EQ((next - grid) % 10ms, clock::duration::zero()) << "off the grid";
    EXPECT_GT(next, before) << "skipped points replayed";
    co_await every.next();
    EXPECT_GE(clock::now(), next);
  }());
}

TEST(interval, tick_cut_short_by_a_timeout_keeps_its_grid_point) {
  run([]() -> task<> {
    const auto start = test::loop_now();
    interval every(100ms);
    result<void> r = co_await with_timeout(every.next(), 10ms);
    EXPECT_EQ(r.error(), errc::timed_out);
    EXPECT_EQ(every.next_tick(), start + 100ms);
    co_await every.next();  // the 100ms tick, not lost to the timeout
    EXPECT_GE(test::loop_now() - start, 100ms);
    EXPECT_LT(test::loop_now() - start, 101ms);
    EXPECT_EQ(every.missed_ticks(), 0u);
    r = co_await with_timeout(every.next(), 1s);
    EXPECT_TRUE(r.has_value());
    EXPECT_GE(test::loop_now() - start, 200ms);
    EXPECT_LT(test::loop_now() - start, 201ms);
  }(), test::paused());
}

TEST(interval, non_positive_period_is_rejected) {
  run([]() -> task<> {
    EXPECT_THROW(interval(0ms), std::invalid_argument);
    EXPECT_THROW(interval(-1ms), std::invalid_argument);
    co_return;
  }());
}

// 10,000 NOPs in flight at once through a ring of 4 SQ and 8 CQ entries: get_sqe submits to make
// room, the kernel keeps the CQEs the CQ has no room for, and every one is dispatched.
TEST(loop, tiny_ring_completes_every_operation) {
  SKIP_UNLESS_IO_URING();
  const std::size_t n = test::scaled(10'000, 1'000);
  runtime_options o;
  o.sq_entries = 4;
  o.cq_entries = 8;
  const auto [completed, stats] = run([](std::size_t n) -> task<std::pair<std::size_t, core_metrics>> {
    std::size_t ok = 0;
    for (std::size_t i = 0; i < n; ++i) spawn([](std::size_t& ok) -> task<> {
      if (co_await nop_operation() == 0) ++ok;
    }(ok));
    while (ok < n) co_await sleep_for(1ms);
    co_return std::pair{ok, this_core_metrics()};
  }(n), o);
  EXPECT_EQ(completed, n);
  EXPECT_GE(stats.completions, n);
  EXPECT_GT(stats.sq_full_flushes, 0u);
  EXPECT_GT(stats.cq_overflows, 0u);
  RecordProperty("sq_full_flushes", std::to_string(stats.sq_full_flushes));
  RecordProperty("cq_overflows", std::to_string(stats.cq_overflows));
}

// --- Frames destroyed with their completion taken from the ring but not dispatched ----------

// One NOP awaited in a task started without an awaiter (the test destroys its frame while it is
// suspended): `completions` counts the NOP's completions, `resumed` says whether the task went
// on after it.
task<> awaiting_a_nop(int& completions, bool& resumed) {
  (void)co_await nop_operation(completions);
  resumed = true;
}

struct nop_task {
  int completions = 0;
  bool resumed = false;
  task<> frame;
  void start() {
    frame = awaiting_a_nop(completions, resumed);
    frame.start(detail::continuation(), nullptr).resume();
  }
};

// Resumes after a full iteration: the SQ is empty (the loop's wake-up read, queued at start-up,
// is submitted) and the CQ drained. run() starts its task before the first iteration, so one
// yield() resumes it before that iteration's submission.
task<> settle() {
  co_await yield();
  co_await yield();
}

runtime_options tiny_ring() {
  runtime_options o;
  o.sq_entries = 2;
  o.cq_entries = 2;
  return o;
}

// The SQ holds 2 entries, so starting a third NOP submits the first two, whose completions wait
// in the CQ; a frame is then destroyed while its NOP's completion sits in the set-aside batch.
// `during_cancel`: the kernel refuses (EBUSY) the submission that makes room for the cancel SQE
// itself, so the frame's completion is set aside inside cancel_and_wait; otherwise an ordinary
// submission is refused before the frame goes. Either way the frame's NOP gets its completion
// exactly once, before its destructor returns, nothing resumes the frame, the other NOPs
// complete once each, and the loop counts exactly one dispatch per NOP.
void frame_destroyed_after_a_refused_submission(bool during_cancel) {
  fault::refused = 0;
  run([](bool during_cancel) -> task<> {
    co_await settle();
    const core_metrics before = this_core_metrics();
    nop_task victim, b1, b2, c, d;
    victim.start();  // SQ: victim
    b1.start();      // SQ: victim b1 (full)
    b2.start();      // submits victim and b1 (both complete into the CQ); SQ: b2
    c.start();       // SQ: b2 c (full)
    if (!during_cancel) {
      fault::refuse_submits = 1;
      d.start();  // SQ full: refused, the CQ (victim, b1) set aside; then b2 and c submitted
      EXPECT_EQ(fault::refused, 1);
      EXPECT_EQ(victim.completions, 0);  // set aside, not dispatched
    } else {
      fault::refuse_submits = 1;
    }
    victim.frame = {};  // cancel_and_wait: the completion is found among those set aside
    EXPECT_EQ(fault::refused, 1) << "the EBUSY set-aside path was not reached";
    EXPECT_EQ(fault::refuse_submits, 0);
    EXPECT_EQ(victim.completions, 1);
    EXPECT_FALSE(victim.resumed);
    co_await yield();  // the set-aside b1 and the rest are dispatched at the next reap
    co_await yield();
    for (nop_task* t : {&b1, &b2, &c}) {
      EXPECT_EQ(t->completions, 1);
      EXPECT_TRUE(t->resumed);
    }
    EXPECT_EQ(d.completions, during_cancel ? 0 : 1);
    const core_metrics after = this_core_metrics();
    EXPECT_EQ(after.completions - before.completions, during_cancel ? 4u : 5u);
    EXPECT_EQ(after.sq_full_flushes - before.sq_full_flushes, 3u);  // b2's, then refused and retried
  }(during_cancel), tiny_ring());
  EXPECT_EQ(fault::refused, 1);
}

TEST(loop, a_frame_destroyed_after_its_completion_was_set_aside_by_a_refused_submission_gets_it_once) {
  SKIP_UNLESS_IO_URING();
  frame_destroyed_after_a_refused_submission(false);
}

TEST(loop, a_frame_destroyed_when_the_kernel_refuses_the_cancel_submission_finds_its_completion_set_aside) {
  SKIP_UNLESS_IO_URING();
  frame_destroyed_after_a_refused_submission(true);
}

// Pairs of frames whose NOPs complete in the same reaped batch, through a ring of 2 SQ and 2
// CQ entries (the batch is mostly overflow), some submissions refused with EBUSY: the first of
// each pair, resumed by its completion, destroys the second, whose completion is further down
// the same batch, not yet dispatched. The second's NOP gets it once, inside its destructor;
// the loop skips it afterwards; every completion is counted exactly once.
TEST(loop, a_frame_destroyed_by_a_completion_of_the_same_batch_gets_its_own_completion_once) {
  SKIP_UNLESS_IO_URING();
  fault::refused = 0;
  run([]() -> task<> {
    co_await settle();
    const core_metrics before = this_core_metrics();
    constexpr int pairs = 32;
    struct pair_state {
      nop_task victim;
      int completions = 0;
      bool destroyed_victim = false;
      task<> killer;
    };
    std::vector<pair_state> p(pairs);
    for (int i = 0; i < pairs; ++i) {
      if (i % 4 == 3) fault::refuse_submits = 1;  // now and then the kernel refuses
      p[i].killer = [](pair_state& s) -> task<> {
        (void)co_await nop_operation(s.completions);
        s.victim.frame = {};
        s.destroyed_victim = true;
      }(p[i]);
      p[i].killer.start(detail::continuation(), nullptr).resume();
      p[i].victim.start();
    }
    co_await yield();
    co_await yield();
    for (const pair_state& s : p) {
      EXPECT_EQ(s.completions, 1);
      EXPECT_TRUE(s.destroyed_victim);
      EXPECT_EQ(s.victim.completions, 1);
      EXPECT_FALSE(s.victim.resumed);
    }
    const core_metrics after = this_core_metrics();
    EXPECT_EQ(after.completions - before.completions, 2u * pairs);
    EXPECT_GT(after.sq_full_flushes - before.sq_full_flushes, 0u);
    EXPECT_GT(after.cq_overflows - before.cq_overflows, 0u);
  }(), tiny_ring());
  EXPECT_GT(fault::refused, 0);
}

TEST(loop, io_operation_under_a_timeout_completes) {
  run([]() -> task<> {
    result<int> r = co_await with_timeout(nop_operation(), 1s);
    CO_ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, 0);
  }());
}

// In a child process: makes io_uring_setup fail with `err` through a seccomp filter, then
// creates a loop both ways, asking for io_uring (automatic would run on epoll instead, see
// backend_fallback_test). Exit status: 0 when both threw std::system_error with `err` and a
// message containing every one of `words`, 1 otherwise, 77 when seccomp is unavailable.
int child_with_io_uring_setup_failing(int err, const std::vector<std::string>& words) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 77;
  if (::syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return 77;

  auto check = [&](const char* how, auto&& create) {
    try {
      create();
      std::fprintf(stderr, "%s: no exception\n", how);
      return false;
    } catch (const std::system_error& e) {
      const std::string what = e.what();
      bool ok = e.code().value() == err;
      for (const std::string& w : words) ok = ok && what.find(w) != std::string::npos;
      if (!ok) std::fprintf(stderr, "%s: unexpected error %d: %s\n", how, e.code().value(), e.what());
      return ok;
    }
  };
  ::unsetenv("COGWHEEL_BACKEND");  // io_uring asked for: no fallback to epoll
  const bool single = check("run()", [] {
    run([]() -> task<> { co_return; }(), runtime_options{.backend = backend_kind::io_uring});
  });
  const bool multi = check("runtime::run()", [] {
    runtime rt(runtime_options{.cores = 2, .backend = backend_kind::io_uring});
    rt.run([](unsigned) -> task<> { co_return; });
  });
  return single && multi ? 0 : 1;
}

void expect_setup_failure_message(int err, const std::vector<std::string>& words) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(child_with_io_uring_setup_failing(err, words));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with status " << status;
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "seccomp filters are not available here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(loop, ring_setup_forbidden_by_seccomp_fails_with_a_clear_message) {
  expect_setup_failure_message(EPERM, {"kernel.io_uring_disabled", "seccomp", "io_uring_setup"});
}

TEST(loop, ring_setup_without_io_uring_fails_with_a_clear_message) {
  expect_setup_failure_message(ENOSYS, {"io_uring", "CONFIG_IO_URING"});
}

}  // namespace
}  // namespace cogwheel
