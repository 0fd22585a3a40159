// Helpers shared by delay_queue.cpp and delay_queue_worker.cpp.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <string_view>

#include <cogwheel/redis/delay_queue.hpp>

namespace cogwheel::redis::detail {

// Rounded up: a job is never due before the time it was given.
inline std::int64_t to_ms(wall_clock::time_point t) noexcept {
  return std::chrono::ceil<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

inline result<bool> as_flag(const result<reply>& r) {
  if (!r) return r.error();
  if (!r->is_integer()) return make_error_code(error::unexpected_type);
  return r->integer() != 0;
}

inline std::int64_t int_of(const reply& r) noexcept {
  if (auto i = r.to_integer()) return *i;
  if (auto d = r.to_double()) return static_cast<std::int64_t>(*d);
  return 0;
}

// A job's entry in {name}:job as a claim returns it: its due time (ms since the epoch, by the
// server's clock) as 16 decimal digits and ':', then the payload (delay_queue_scripts.hpp,
// COGWHEEL_REDIS_LUA_JOBS). An entry without a well-formed stamp (nothing this version writes:
// another program wrote the key) keeps its bytes whole as the payload, and its due time is
// `latest_due_ms`, the latest the claim could have taken it at (its now + lookahead): never
// early, whatever its score was.
struct job_entry {
  std::int64_t due_ms = 0;
  std::string_view payload;
};
inline constexpr std::size_t stamp_bytes = 17;

inline job_entry parse_job_entry(std::string_view entry, std::int64_t latest_due_ms) noexcept {
  std::int64_t due = 0;
  if (entry.size() < stamp_bytes || entry[stamp_bytes - 1] != ':' || entry[0] == '-' || entry[0] == '+') return {latest_due_ms, entry};
  const char* end = entry.data() + stamp_bytes - 1;
  if (const auto [ptr, ec] = std::from_chars(entry.data(), end, due); ec != std::errc() || ptr != end) return {latest_due_ms, entry};
  return {due, entry.substr(stamp_bytes)};
}

// t + d, saturating at time_point::max(): a lease of milliseconds::max() would overflow the
// clock's nanoseconds into the past (the handler cut at once) instead of lasting.
inline clock::time_point later_by(clock::time_point t, std::chrono::milliseconds d) noexcept {
  if (d <= std::chrono::milliseconds::zero()) return t + d;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(clock::time_point::max() - t);
  return d >= room ? clock::time_point::max() : t + d;
}

// How long before its lease a handler's deadline ends.
inline std::chrono::milliseconds margin_of(const worker_options& o) noexcept {
  if (o.lease_margin.count() >= 0) return o.lease_margin;
  return std::min<std::chrono::milliseconds>(o.visibility / 10, std::chrono::milliseconds(1000));
}

}  // namespace cogwheel::redis::detail
