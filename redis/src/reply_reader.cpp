#include "reply_reader.hpp"

#include <hiredis/read.h>

#include <charconv>
#include <cstring>
#include <new>

#include <cogwheel/redis/error.hpp>

namespace cogwheel::redis::detail {

namespace {

// The reply object a task fills: an element of its parent's array (sized when the array was
// created, so the address is stable), or a new root that next() takes over.
reply* slot_for(const redisReadTask* t) {
  if (t->parent != nullptr) {
    auto* parent = static_cast<reply*>(t->parent->obj);
    return &parent->elements()[static_cast<std::size_t>(t->idx)];
  }
  return new (std::nothrow) reply;
}

reply::kind kind_of(int type) noexcept {
  switch (type) {
    case REDIS_REPLY_STATUS: return reply::kind::status;
    case REDIS_REPLY_ERROR: return reply::kind::error;
    default: return reply::kind::string;
  }
}

void* create_string(const redisReadTask* t, char* s, std::size_t n) {
  reply* r = slot_for(t);
  if (r != nullptr) *r = reply::make_string(kind_of(t->type), std::string_view(s, n));
  return r;
}

// The reader inside redisReaderGetReply on this thread (the object functions get no pointer
// to it: hiredis 0.14 does not hand its privdata to the root task).
thread_local reply_reader* parsing = nullptr;

void* create_array(const redisReadTask* t, int n) {
  reply_reader* owner = parsing;
  // hiredis 0.14 passes a long count through an int: negative or absurd counts are refused
  // here, before anything is allocated for them.
  if (n < 0 || static_cast<std::size_t>(n) > owner->max_elements()) {
    owner->refuse();
    return nullptr;
  }
  reply* r = slot_for(t);
  if (r != nullptr) *r = reply::make_array(static_cast<std::size_t>(n));
  return r;
}

void* create_integer(const redisReadTask* t, long long v) {
  reply* r = slot_for(t);
  if (r != nullptr) *r = reply::make_integer(v);
  return r;
}

void* create_nil(const redisReadTask* t) {
  reply* r = slot_for(t);
  if (r != nullptr) *r = reply();
  return r;
}

// hiredis frees only roots (a finished reply it still holds, or a partial one at reader free).
void free_object(void* obj) { delete static_cast<reply*>(obj); }

redisReplyObjectFunctions functions = {create_string, create_array, create_integer, create_nil, free_object};

}  // namespace

reply_reader::reply_reader(std::size_t max_bytes, std::size_t max_elements)
    : max_bytes_(max_bytes), max_elements_(max_elements) {
  reset();
}

reply_reader::~reply_reader() {
  if (r_ != nullptr) redisReaderFree(r_);
}

void reply_reader::reset() {
  if (r_ != nullptr) redisReaderFree(r_);
  r_ = redisReaderCreateWithFunctions(&functions);
  if (r_ == nullptr) throw std::bad_alloc();
  refused_ = false;
}

std::size_t reply_reader::buffered() const noexcept { return r_->len - r_->pos; }

std::error_code reply_reader::feed(std::span<const char> bytes) {
  if (buffered() + bytes.size() > max_bytes_) return error::reply_too_large;
  if (redisReaderFeed(r_, bytes.data(), bytes.size()) != REDIS_OK) return error::protocol_error;
  return {};
}

// An incomplete bulk string stays unconsumed from just after its '$' (hiredis consumes the
// type byte and array headers as it goes, a bulk only once complete): if its header announces
// more than the bound, waiting for its bytes would only grow the buffer.
bool reply_reader::announces_too_much() const noexcept {
  if (r_->ridx < 0 || r_->rstack[r_->ridx].type != REDIS_REPLY_STRING) return false;  // -1: between replies
  const char* p = r_->buf + r_->pos;
  const char* end = r_->buf + r_->len;
  const void* cr = std::memchr(p, '\r', static_cast<std::size_t>(end - p));
  if (cr == nullptr) return static_cast<std::size_t>(end - p) > 32;  // no length is that long
  long long n = 0;
  auto [last, ec] = std::from_chars(p, static_cast<const char*>(cr), n);
  if (ec != std::errc()) return ec == std::errc::result_out_of_range;
  return n > 0 && static_cast<unsigned long long>(n) > max_bytes_;
}

result<std::optional<reply>> reply_reader::next() {
  void* obj = nullptr;
  parsing = this;
  const int status = redisReaderGetReply(r_, &obj);
  parsing = nullptr;
  if (status != REDIS_OK) {
    return make_error_code(refused_ ? error::reply_too_large : error::protocol_error);
  }
  if (obj == nullptr) {
    if (announces_too_much()) return make_error_code(error::reply_too_large);
    return std::optional<reply>();
  }
  auto* root = static_cast<reply*>(obj);
  std::optional<reply> out(std::move(*root));
  delete root;
  return out;
}

}  // namespace cogwheel::redis::detail
