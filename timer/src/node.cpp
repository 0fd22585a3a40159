#include <cogwheel/timer/node.hpp>

#include <cstdio>
#include <cstdlib>

namespace cogwheel::timer {

void timer_node::destroyed_while_scheduled() noexcept {
  std::fputs(
      "cogwheel: a timer_node was destroyed while scheduled; cancel it first "
      "(the queue would keep a dangling pointer)\n",
      stderr);
  std::abort();
}

}  // namespace cogwheel::timer
