// Helpers shared by delay_queue.cpp and delay_queue_worker.cpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

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

// An entry of {name}:pending (delay_queue_scripts.hpp): the id as a MessagePack string (a fixstr,
// str 8, 16 or 32 header, then its bytes) followed by the payload's bytes. -> id, payload; an
// entry that is not one (another writer's) is all id, with an empty payload.
inline std::pair<std::string_view, std::string_view> split_entry(std::string_view e) noexcept {
  if (e.empty()) return {e, {}};
  const auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(e[i])); };
  const std::size_t b = byte(0);
  std::size_t from = 1, len = 0;
  if (b >= 0xa0 && b <= 0xbf) {
    len = b - 0xa0;
  } else if (b == 0xd9 && e.size() >= 2) {
    from = 2, len = byte(1);
  } else if (b == 0xda && e.size() >= 3) {
    from = 3, len = byte(1) << 8 | byte(2);
  } else if (b == 0xdb && e.size() >= 5) {
    from = 5, len = byte(1) << 24 | byte(2) << 16 | byte(3) << 8 | byte(4);
  } else {
    return {e, {}};
  }
  if (len > e.size() - from) return {e, {}};
  return {e.substr(from, len), e.substr(from + len)};
}

// How long before its lease a handler's deadline ends.
inline std::chrono::milliseconds margin_of(const worker_options& o) noexcept {
  if (o.lease_margin.count() >= 0) return o.lease_margin;
  return std::min<std::chrono::milliseconds>(o.visibility / 10, std::chrono::milliseconds(1000));
}

}  // namespace cogwheel::redis::detail
