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

#include "../support/co_assert.hpp"

namespace cogwheel::test {

using test_support::scaled;

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
