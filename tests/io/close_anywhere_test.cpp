// Close anywhere: for every operation kind, the socket is ended at each moment of the
// operation's life (started but not yet handed to the kernel, in the kernel, completed but not
// yet dispatched), in each way a program can end it (close(), the destructor, release(),
// move-assignment onto it), from each place a program can do it from (the task next to the
// operation, another task, a timer, a message from another core). Right after, witnesses take
// the lowest free descriptor numbers (the ended socket's number, when it is free). Asserted for
// every case: nothing reaches or leaves a witness, the operation ends with
// operation_canceled or with what it really transferred (checked byte for byte at the old
// peer), and no descriptor or pooled buffer is left behind.
//
// Connect and accept have no socket to close while they run; they are ended by destroying the
// awaiting frame or by a timeout, and accept also by closing its listener.
#include "close_anywhere_cases.hpp"

namespace cogwheel::io_test {
namespace {

TEST(close_anywhere, no_operation_ever_touches_the_connection_that_takes_its_number) {
  std::vector<std::string> failures;
  std::size_t cases = 0;
  runtime rt(runtime_options{.cores = 2, .pin_threads = false});
  std::atomic<bool> done{false};
  rt.run([&](unsigned core) -> task<void> {
    if (core == 1) {
      // Serves the other_core source: waits for a request, then posts the end to core 0.
      co_await serve_other_core(done);
      co_return;
    }
    case_env env;
    auto idle = co_await connect_pair();
    auto pool = buffer_pool::create({.buffers = 8, .buffer_size = 256});
    if (!idle || !pool) {
      ADD_FAILURE() << "set-up failed";
      done.store(true);
      co_return;
    }
    env.idle = std::move(*idle);
    env.pool = std::move(*pool);
    for (op_kind op : all_ops)
      for (moment when : all_moments)
        for (way how : ways_for(op))
          for (source from : all_sources) {
            const scenario sc{op, when, how, from};
            if (!applicable(sc)) continue;
            ++cases;
            if (std::getenv("CLOSE_ANYWHERE_TRACE") != nullptr) std::fprintf(stderr, "%s\n", describe(sc).c_str());
            const std::string failure = co_await run_case(sc, env);
            if (!failure.empty()) failures.push_back(describe(sc) + ": " + failure);
          }
    done.store(true, std::memory_order_release);
  });
  EXPECT_GT(cases, 100u);
  for (const std::string& f : failures) ADD_FAILURE() << f;
  std::printf("close_anywhere: %zu cases, %zu failed\n", cases, failures.size());
}

}  // namespace
}  // namespace cogwheel::io_test
