// parked: publishes a sleep that another coroutine may cut short (sleep_operation::cancel ends
// it at the next loop iteration) through a pointer slot, for as long as the sleep's scope
// lasts. The slot is cleared when the scope ends, also when the sleeping frame is destroyed
// mid-sleep (runtime teardown), so a late wake never touches a dead frame.
#pragma once

#include <cogwheel/runtime/sleep.hpp>

namespace cogwheel::redis::detail {

class parked {
 public:
  parked(sleep_operation*& slot, sleep_operation& s) noexcept : slot_(slot) { slot_ = &s; }
  parked(const parked&) = delete;
  parked& operator=(const parked&) = delete;
  ~parked() { slot_ = nullptr; }

 private:
  sleep_operation*& slot_;
};

// Wakes the sleep parked in `slot`, if any.
inline void wake(sleep_operation* slot) noexcept {
  if (slot != nullptr) slot->cancel();
}

}  // namespace cogwheel::redis::detail
