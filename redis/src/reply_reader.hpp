// reply_reader: an incremental RESP2 parser building cogwheel::redis::reply trees, with bounds
// that hold whatever the headers announce:
//   - the bytes buffered and not yet parsed never exceed max_bytes (feed refuses more);
//   - a bulk string announcing more than max_bytes, or an array more than max_elements (or a
//     negative count other than -1), is refused as soon as its header is read;
//   - what one reply allocates is charged as it is built (sizeof(reply) per element, plus its
//     bytes) and refused past max_bytes: an array's storage grows with the elements that
//     actually arrived (a header `*16777216\r\n` allocates nothing for its announced count);
//   - a reply nested deeper than max_depth is read to its end and skipped: that one reply
//     fails with error::reply_too_deep, the stream stays in step (a tree that deep is not
//     built, so destroying a reply never recurses deeper than max_depth).
// Any other refusal (protocol_error, reply_too_large) leaves the reader unusable until reset()
// (a new connection).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include <cogwheel/redis/reply.hpp>
#include <cogwheel/runtime/result.hpp>

namespace cogwheel::redis::detail {

// One complete reply off the stream; `skipped` is set (and value empty) for a reply that was
// read to its end but refused alone (error::reply_too_deep).
struct parsed_reply {
  reply value;
  std::error_code skipped;
};

class reply_reader {
 public:
  reply_reader(std::size_t max_bytes, std::size_t max_elements, std::size_t max_depth);
  reply_reader(const reply_reader&) = delete;
  reply_reader& operator=(const reply_reader&) = delete;

  // Appends bytes from the socket. error::reply_too_large when the unparsed bytes would exceed
  // max_bytes.
  std::error_code feed(std::span<const char> bytes);
  // The next complete reply; nothing while it is incomplete; error::protocol_error or
  // error::reply_too_large when the input is unacceptable.
  result<std::optional<parsed_reply>> next();
  // Forgets every byte and error: ready for a new connection.
  void reset();

  std::size_t buffered() const noexcept { return buf_.size() - pos_; }

 private:
  // An array being filled: its elements so far and how many are still to come.
  struct frame {
    std::vector<reply> elements;
    std::size_t remaining;
  };
  // Charges `bytes` to the reply being built; false past max_bytes.
  bool charge(std::size_t bytes) noexcept;
  // Adds a finished item to the innermost open array (closing the arrays it completes); true
  // when it completed the top-level reply, which is then in `item`.
  bool attach(reply& item);

  std::size_t max_bytes_;
  std::size_t max_elements_;
  std::size_t max_depth_;
  std::string buf_;
  std::size_t pos_ = 0;          // first unparsed byte of buf_
  std::vector<frame> stack_;     // the open arrays of the reply being read, outermost first
  std::size_t charged_ = 0;      // bytes charged to the reply being read
  std::size_t skip_from_ = 0;    // stack depth where skipping began (0: not skipping)
  bool failed_ = false;
};

}  // namespace cogwheel::redis::detail
