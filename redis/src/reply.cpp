#include <cogwheel/redis/reply.hpp>

#include <charconv>
#include <cstdlib>
#include <string>

namespace cogwheel::redis {

std::optional<long long> reply::to_integer() const noexcept {
  if (kind_ == kind::integer) return integer_;
  if (kind_ != kind::string) return std::nullopt;
  long long v = 0;
  auto [p, ec] = std::from_chars(str_.data(), str_.data() + str_.size(), v);
  if (ec != std::errc() || p != str_.data() + str_.size()) return std::nullopt;
  return v;
}

std::optional<double> reply::to_double() const noexcept {
  if (kind_ == kind::integer) return static_cast<double>(integer_);
  if (kind_ != kind::string || str_.empty()) return std::nullopt;
  // Redis writes scores as "inf", "-inf" or %.17g: strtod reads all of them.
  char* end = nullptr;
  const double v = std::strtod(str_.c_str(), &end);
  if (end != str_.c_str() + str_.size()) return std::nullopt;
  return v;
}

}  // namespace cogwheel::redis
