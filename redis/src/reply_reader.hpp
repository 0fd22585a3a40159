// reply_reader: hiredis's RESP reader (its reader only: no hiredis I/O), building
// cogwheel::redis::reply trees directly through the reader's object functions, with bounds:
//   - the bytes buffered and not yet parsed never exceed max_bytes (feed refuses more);
//   - a bulk string announcing more than max_bytes, or an array more than max_elements
//     (or a negative count other than -1), is refused as soon as its header is read.
// After an error the reader is unusable until reset() (a new connection).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <system_error>

#include <cogwheel/redis/reply.hpp>
#include <cogwheel/runtime/result.hpp>

struct redisReader;

namespace cogwheel::redis::detail {

class reply_reader {
 public:
  reply_reader(std::size_t max_bytes, std::size_t max_elements);
  reply_reader(const reply_reader&) = delete;
  reply_reader& operator=(const reply_reader&) = delete;
  ~reply_reader();

  // Appends bytes from the socket. error::reply_too_large when the unparsed bytes would exceed
  // max_bytes.
  std::error_code feed(std::span<const char> bytes);
  // The next complete reply; nothing while it is incomplete; error::protocol_error or
  // error::reply_too_large when the input is unacceptable.
  result<std::optional<reply>> next();
  // Forgets every byte and error: ready for a new connection.
  void reset();

  std::size_t buffered() const noexcept;
  std::size_t max_elements() const noexcept { return max_elements_; }
  void refuse() noexcept { refused_ = true; }

 private:
  bool announces_too_much() const noexcept;

  redisReader* r_ = nullptr;
  std::size_t max_bytes_;
  std::size_t max_elements_;
  bool refused_ = false;  // an object function refused an item (too large)
};

}  // namespace cogwheel::redis::detail
