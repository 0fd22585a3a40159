// A timer node for the timer tests: counts its firings and runs an optional action from its
// callback.
#pragma once

#include <cogwheel/timer/node.hpp>

#include <functional>

namespace cogwheel::timer_test {

// A node that counts its firings and runs an optional action from its callback.
struct probe : timer::timer_node {
  probe() : timer_node(&on_expire) {}
  int fired = 0;
  std::function<void(probe&)> action;

 private:
  static void on_expire(timer::timer_node& n) noexcept {
    probe& p = static_cast<probe&>(n);
    ++p.fired;
    if (p.action) p.action(p);
  }
};

}  // namespace cogwheel::timer_test
