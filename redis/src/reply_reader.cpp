#include "reply_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include <cogwheel/redis/error.hpp>

namespace cogwheel::redis::detail {

namespace {

// No length or integer header is longer than this ("-9223372036854775808" is 20 characters):
// a header line still without its CR past it is refused instead of buffered on.
constexpr std::size_t max_number_line = 32;
// Smallest encoding of an element ("+\r\n"): an array can hold no more elements than this
// divides what has arrived, whatever its header says.
constexpr std::size_t min_element_bytes = 3;
// Consumed bytes are dropped from the front of the buffer once they are this many.
constexpr std::size_t compact_after = 64 * 1024;

bool parse_number(std::string_view s, long long& out) noexcept {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

reply_reader::reply_reader(std::size_t max_bytes, std::size_t max_elements, std::size_t max_depth)
    : max_bytes_(max_bytes), max_elements_(max_elements), max_depth_(std::max<std::size_t>(max_depth, 1)) {}

void reply_reader::reset() {
  buf_.clear();
  buf_.shrink_to_fit();
  pos_ = 0;
  stack_.clear();
  charged_ = 0;
  skip_from_ = 0;
  failed_ = false;
}

std::error_code reply_reader::feed(std::span<const char> bytes) {
  if (buffered() + bytes.size() > max_bytes_) return error::reply_too_large;
  if (pos_ == buf_.size() || pos_ >= compact_after) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes.data(), bytes.size());
  return {};
}

bool reply_reader::charge(std::size_t bytes) noexcept {
  charged_ += bytes;
  return charged_ <= max_bytes_;
}

bool reply_reader::attach(reply& item) {
  while (!stack_.empty()) {
    frame& top = stack_.back();
    if (skip_from_ == 0) top.elements.push_back(std::move(item));
    if (--top.remaining > 0) return false;
    item = skip_from_ == 0 ? reply::make_array(std::move(top.elements)) : reply();
    stack_.pop_back();
  }
  return true;
}

result<std::optional<parsed_reply>> reply_reader::next() {
  auto fail = [this](error e) -> result<std::optional<parsed_reply>> {
    failed_ = true;
    return make_error_code(e);
  };
  if (failed_) return make_error_code(error::protocol_error);
  for (;;) {
    if (pos_ >= buf_.size()) return std::optional<parsed_reply>();
    const char type = buf_[pos_];
    const char* line = buf_.data() + pos_ + 1;
    const char* end = buf_.data() + buf_.size();
    const auto* cr = static_cast<const char*>(std::memchr(line, '\r', static_cast<std::size_t>(end - line)));
    const bool numeric = type == '$' || type == '*' || type == ':';
    // A numeric line longer than any number is refused by its length alone, before its end is
    // looked at, so the outcome does not depend on how the bytes were cut into reads (a line of
    // 40 zero-padded digits, or of 40 bytes then a CR without LF, is refused the same way
    // whether its CR has arrived or not).
    if (numeric && static_cast<std::size_t>((cr != nullptr ? cr : end) - line) > max_number_line)
      return fail(error::reply_too_large);
    if (cr == nullptr) return std::optional<parsed_reply>();
    if (cr + 1 == end) return std::optional<parsed_reply>();  // the '\n' is still to come
    if (cr[1] != '\n') return fail(error::protocol_error);
    const std::string_view text(line, static_cast<std::size_t>(cr - line));
    const std::size_t after_line = static_cast<std::size_t>(cr + 2 - buf_.data());
    long long n = 0;
    if (numeric && !parse_number(text, n)) return fail(error::protocol_error);
    reply item;
    switch (type) {
      case '+':
      case '-':
        if (!charge(sizeof(reply) + text.size())) return fail(error::reply_too_large);
        item = reply::make_string(type == '+' ? reply::kind::status : reply::kind::error, text);
        pos_ = after_line;
        break;
      case ':':
        if (!charge(sizeof(reply))) return fail(error::reply_too_large);
        item = reply::make_integer(n);
        pos_ = after_line;
        break;
      case '$': {
        if (n < -1) return fail(error::protocol_error);
        if (n == -1) {
          if (!charge(sizeof(reply))) return fail(error::reply_too_large);
          pos_ = after_line;
          break;
        }
        const auto len = static_cast<unsigned long long>(n);
        if (len > max_bytes_) return fail(error::reply_too_large);  // before any byte of it is kept
        if (buf_.size() - after_line < len + 2) return std::optional<parsed_reply>();
        if (buf_[after_line + len] != '\r' || buf_[after_line + len + 1] != '\n') return fail(error::protocol_error);
        if (!charge(sizeof(reply) + len)) return fail(error::reply_too_large);
        item = reply::make_string(reply::kind::string, std::string_view(buf_.data() + after_line, len));
        pos_ = after_line + len + 2;
        break;
      }
      case '*': {
        if (n < -1) return fail(error::protocol_error);
        pos_ = after_line;
        if (!charge(sizeof(reply))) return fail(error::reply_too_large);
        if (n == -1) break;
        const auto count = static_cast<unsigned long long>(n);
        if (count > max_elements_) return fail(error::reply_too_large);
        // An array one level deeper than the open ones, empty or not, starts the skip.
        if (skip_from_ == 0 && stack_.size() + 1 > max_depth_) skip_from_ = stack_.size() + 1;
        if (count == 0) {
          item = reply::make_array(std::vector<reply>());
          break;
        }
        if (!charge(sizeof(frame))) return fail(error::reply_too_large);
        frame f{{}, static_cast<std::size_t>(count)};
        // Room only for the elements that the bytes already here can hold; more as they come.
        if (skip_from_ == 0) f.elements.reserve(std::min<std::size_t>(f.remaining, buffered() / min_element_bytes));
        stack_.push_back(std::move(f));
        continue;
      }
      default:
        return fail(error::protocol_error);
    }
    if (!attach(item)) continue;
    parsed_reply out{std::move(item), {}};
    if (skip_from_ != 0) out.skipped = error::reply_too_deep;
    charged_ = 0;
    skip_from_ = 0;
    return std::optional<parsed_reply>(std::move(out));
  }
}

}  // namespace cogwheel::redis::detail
