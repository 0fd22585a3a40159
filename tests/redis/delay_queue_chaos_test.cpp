// delay_queue under chaos (short form; bench/redis/chaos.sh runs the long form with
// COGWHEEL_TEST_SCALE): redis-server with AOF and appendfsync always, three worker processes of
// two cores each, this process orchestrating. During the run: kill -9 one worker process, SIGSTOP
// another for twice the visibility then SIGCONT it, SIGSTOP redis-server for 1 s, then kill and
// restart it (AOF). Checked: every job completes at least once; effects are fenced (a side-effect
// store, a script in the same Redis, accepts a job's effect only from a token at least as new as
// the last it accepted, so stale runs are refused, never applied after a newer one); none starts
// early by the server's clock; the stopped process learns it lost leases.
#include <cogwheel/redis/delay_queue.hpp>

#include <cogwheel/cogwheel.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../io/support.hpp"
#include "redis_server.hpp"

namespace cogwheel::redis_test {
namespace {

using namespace std::chrono_literals;
using io_test::scaled;
using redis::delay_queue;
using redis::job;
using redis::wall_clock;

// Run first by every handler: counts a start before the due time ARGV[1] by the server's clock.
constexpr const char* early_lua = R"(
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) < tonumber(ARGV[1]) then
  redis.call('INCR', '{t}:early')
end
return 0
)";

// The side-effect store: applies job ARGV[1]'s effect with token ARGV[2] unless a newer token's
// was applied. -> 1 applied, 0 refused (stale).
constexpr const char* store_lua = R"(
local last = tonumber(redis.call('HGET', '{t}:fence', ARGV[1]) or '0')
if tonumber(ARGV[2]) < last then
  redis.call('INCR', '{t}:refused')
  return 0
end
redis.call('HSET', '{t}:fence', ARGV[1], ARGV[2])
redis.call('HINCRBY', '{t}:done', ARGV[1], 1)
return 1
)";

constexpr auto visibility = 500ms;

class redis_delay_queue_chaos : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed";
    server_ = std::make_unique<redis_server>(/*append_only=*/true);
    ASSERT_TRUE(server_->running());
  }
  redis::client_options options() const {
    redis::client_options o;
    o.address = socket_address::ipv4_loopback(server_->port());
    o.reconnect_initial = 5ms;
    o.reconnect_max = 100ms;
    return o;
  }
  // Two cores of workers until {t}:stop exists; each adds its stats to {t}:stats.
  void run_workers() {
    runtime rt(runtime_options{.cores = 2});
    rt.run([&](unsigned) -> task<void> {
      auto c = co_await redis::client::connect(options());
      if (!c) co_return;
      delay_queue q(*c, "jobs");
      redis::script store(store_lua);
      redis::script early(early_lua);
      redis::worker_options w;
      w.address = socket_address::ipv4_loopback(server_->port());
      w.visibility = visibility;
      w.max_wait = 100ms;
      w.lookahead = 100ms;
      w.ack_delay = 0ms;  // each acknowledgement sent as its job ends
      w.retry_initial = 20ms;
      w.max_attempts = 1000;
      w.stop_grace = 100ms;
      auto handler = [&](const job& j) -> task<result<void>> {
        const redis::command_arg due[] = {j.attempt_due_ms};
        (void)co_await early.run(*c, {}, due);
        co_await sleep_for(20ms);  // the work, during which leases may be lost
        const redis::command_arg args[] = {j.id, j.token, j.attempt_due_ms};
        auto r = co_await store.run(*c, {}, args);
        if (!r) co_return r.error();
        co_return result<void>();
      };
      auto until_told = [&]() -> task<void> {
        for (;;) {
          auto told = co_await c->command("EXISTS", "{t}:stop");
          if (told && told->integer() == 1) break;
          co_await sleep_for(50ms);
        }
        q.stop();
      };
      co_await when_all(q.run(handler, w), until_told());
      const auto& s = q.stats();
      (void)co_await c->command("HINCRBY", "{t}:stats", "lost_leases", s.lost_leases);
      (void)co_await c->command("HINCRBY", "{t}:stats", "fired", s.fired);
      (void)co_await c->command("HINCRBY", "{t}:stats", "pid" + std::to_string(::getpid()) + ":lost", s.lost_leases);
    });
  }
  pid_t fork_workers() {
    const pid_t pid = ::fork();
    if (pid == 0) {
      run_workers();
      ::_exit(0);
    }
    return pid;
  }
  template <class F>
  void with_client(F fn) {
    run([&]() -> task<void> {
      auto c = co_await redis::client::connect(options());
      CO_ASSERT_OK(c);
      co_await fn(*c);
    }());
  }
  std::unique_ptr<redis_server> server_;
};

TEST_F(redis_delay_queue_chaos, every_job_completes_fenced_and_never_early_through_kills_stops_and_a_restart) {
  const int n = scaled(2000, 200);
  const auto spread = std::max<std::chrono::milliseconds>(2s, std::chrono::milliseconds(n / 5));
  with_client([&](redis::client& c) -> task<void> {
    delay_queue q(c, "jobs");
    const auto start = wall_clock::now() + 500ms;
    auto produce = [&](int from) -> task<void> {
      for (int i = from; i < n; i += 32) EXPECT_TRUE(*co_await q.schedule("j" + std::to_string(i), "", start + spread * i / n));
    };
    std::vector<task<void>> all;
    for (int p = 0; p < 32; ++p) all.push_back(produce(p));
    co_await when_all(std::move(all));
  });
  // Three worker processes of two cores; this process only orchestrates (a redis-server it
  // restarts is its child, which PR_SET_PDEATHSIG ties to the forking thread).
  const pid_t killed = fork_workers();
  const pid_t stopped = fork_workers();
  const pid_t steady = fork_workers();
  ASSERT_GT(killed, 0);
  ASSERT_GT(stopped, 0);
  ASSERT_GT(steady, 0);
  std::this_thread::sleep_for(800ms);
  ::kill(killed, SIGKILL);
  ::kill(stopped, SIGSTOP);
  std::this_thread::sleep_for(2 * visibility);
  ::kill(stopped, SIGCONT);
  std::this_thread::sleep_for(200ms);
  server_->signal(SIGSTOP);
  std::this_thread::sleep_for(1s);
  server_->signal(SIGCONT);
  std::this_thread::sleep_for(200ms);
  server_->kill();  // SIGKILL: what the AOF holds survives
  ASSERT_TRUE(server_->start()) << "redis-server did not come back";
  with_client([&](redis::client& c) -> task<void> {
    for (int i = 0; i < 1200; ++i) {
      auto done = co_await c.command("HLEN", "{t}:done");
      if (done && done->integer() >= n) break;
      co_await sleep_for(50ms);
    }
    co_await sleep_for(300ms);
    (void)co_await c.command("SET", "{t}:stop", 1);
  });
  ::waitpid(killed, nullptr, 0);
  for (pid_t p : {stopped, steady}) {
    int status = 0;
    ::waitpid(p, &status, 0);
    EXPECT_TRUE(WIFEXITED(status)) << p;
  }

  with_client([&](redis::client& c) -> task<void> {
    auto done = co_await c.command("HLEN", "{t}:done");
    CO_ASSERT_OK(done);
    EXPECT_EQ(done->integer(), n) << "jobs never completed";
    auto early = co_await c.command("GET", "{t}:early");
    CO_ASSERT_OK(early);
    EXPECT_TRUE(early->is_nil()) << early->str() << " runs started early";
    auto stats = co_await c.command("HGETALL", "{t}:stats");
    CO_ASSERT_OK(stats);
    std::int64_t stopped_lost = -1;
    for (std::size_t i = 0; i + 1 < stats->size(); i += 2) {
      std::printf("%.*s = %.*s\n", static_cast<int>((*stats)[i].str().size()), (*stats)[i].str().data(),
                  static_cast<int>((*stats)[i + 1].str().size()), (*stats)[i + 1].str().data());
      if ((*stats)[i].str() == "pid" + std::to_string(stopped) + ":lost") stopped_lost = *(*stats)[i + 1].to_integer();
    }
    EXPECT_GT(stopped_lost, 0) << "the process stopped for twice the visibility did not learn it lost leases";
    auto refused = co_await c.command("GET", "{t}:refused");
    CO_ASSERT_OK(refused);
    std::printf("stale effects refused by the store: %s\n", refused->is_nil() ? "0" : std::string(refused->str()).c_str());
    auto d = co_await delay_queue(c, "jobs").depth();
    CO_ASSERT_OK(d);
    EXPECT_EQ(d->dead, 0);
  });
}

}  // namespace
}  // namespace cogwheel::redis_test
