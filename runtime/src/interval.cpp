#include <cogwheel/runtime/interval.hpp>

#include <stdexcept>

namespace cogwheel {

interval::interval(clock::duration period)
    : period_(period), next_(detail::saturating_add(detail::current_time(), period)) {
  if (period <= clock::duration::zero()) throw std::invalid_argument("cogwheel::interval: period must be positive");
}

void interval::advance_grid() noexcept {
  const clock::time_point now = detail::current_time();
  next_ = detail::saturating_add(next_, period_);
  if (next_ <= now) {
    // Busy loop: skip the grid points already behind us, keeping the phase.
    const auto behind = (now - next_) / period_ + 1;
    missed_ += static_cast<std::uint64_t>(behind);
    next_ += behind * period_;
  }
}

}  // namespace cogwheel
