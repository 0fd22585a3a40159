#include <cogwheel/runtime/time.hpp>

namespace cogwheel::detail {

clock::time_point saturating_add(clock::time_point now, clock::duration d) noexcept {
  if (d > clock::duration::zero() && now > clock::time_point::max() - d) return clock::time_point::max();
  if (d < clock::duration::zero() && now < clock::time_point::min() - d) return clock::time_point::min();
  return now + d;
}

}  // namespace cogwheel::detail
