// Helpers shared by the runtime tests: scaling of big counts for slow (sanitized) builds, an
// RAII probe that records its destruction, and the loop's virtual time.
#pragma once

#include <cstddef>
#include <cstdlib>

#include <cogwheel/runtime/options.hpp>
#include <cogwheel/runtime/run.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/stats.hpp>
#include <cogwheel/runtime/time.hpp>

// ASSERT_* returns from the function, which a coroutine cannot do: in a task<void> body use
// this, which records the failure and co_returns.
#define CO_ASSERT_TRUE(cond)                         \
  do {                                               \
    if (!(cond)) {                                   \
      ADD_FAILURE() << "Expected true: " #cond;      \
      co_return;                                     \
    }                                                \
  } while (0)

namespace cogwheel::test {

// COGWHEEL_TEST_SCALE (CI sets 0.1 for sanitizer builds) scales the big counts of stress tests;
// never below `floor` so a scaled test still tests something.
inline std::size_t scaled(std::size_t n, std::size_t floor = 1000) {
  double scale = 1.0;
  if (const char* s = std::getenv("COGWHEEL_TEST_SCALE")) scale = std::atof(s);
  if (scale <= 0) scale = 1.0;
  const auto v = static_cast<std::size_t>(static_cast<double>(n) * scale);
  return v < floor ? (n < floor ? n : floor) : v;
}

// Sets *flag when destroyed: proves a coroutine frame holding it was destroyed.
class destroy_probe {
 public:
  explicit destroy_probe(bool& flag) noexcept : flag_(&flag) {}
  destroy_probe(destroy_probe&& o) noexcept : flag_(o.flag_) { o.flag_ = nullptr; }
  destroy_probe(const destroy_probe&) = delete;
  destroy_probe& operator=(const destroy_probe&) = delete;
  ~destroy_probe() {
    if (flag_ != nullptr) *flag_ = true;
  }

 private:
  bool* flag_;
};

// The loop's time: with a paused clock, the virtual time (the timing tests all run paused).
inline clock::time_point loop_now() { return now(); }

// Options for deterministic timing tests.
inline runtime_options paused(runtime_options o = {}) {
  o.paused_clock = true;
  return o;
}

}  // namespace cogwheel::test
