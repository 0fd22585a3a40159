/// @file
/// reply: one RESP reply, owned. Built directly by the client's RESP parser, so a reply costs its
/// strings and element arrays (a top-level reply is returned by value).
/// RESP error replies never become a reply: the client returns them as error codes
/// (<cogwheel/redis/error.hpp>), except inside arrays (EXEC, scripts), where they are elements
/// of kind error.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cogwheel::redis {

/// One RESP2 reply, parsed: a value type (an array owns its elements). Strings are kept as
/// bytes (binary-safe).
class reply {
 public:
  /// The RESP2 types: nil (a null bulk string or array), integer (":"), string (bulk, "$"),
  /// status ("+OK"), error ("-ERR ..."), array ("*").
  enum class kind : std::uint8_t { nil, integer, string, status, error, array };

  /// A nil reply.
  reply() noexcept = default;
  /// An integer reply holding v.
  static reply make_integer(long long v) {
    reply r;
    r.kind_ = kind::integer;
    r.integer_ = v;
    return r;
  }
  /// A reply of kind k (string, status or error) holding a copy of s.
  static reply make_string(kind k, std::string_view s) {
    reply r;
    r.kind_ = k;
    r.str_ = s;
    return r;
  }
  /// An array of n nil replies (to be filled through elements()).
  static reply make_array(std::size_t n) {
    reply r;
    r.kind_ = kind::array;
    r.elements_.resize(n);
    return r;
  }
  /// An array holding `elements`.
  static reply make_array(std::vector<reply> elements) noexcept {
    reply r;
    r.kind_ = kind::array;
    r.elements_ = std::move(elements);
    return r;
  }

  /// Its RESP2 type.
  kind type() const noexcept { return kind_; }
  ///@{
  /// Whether type() is that kind.
  bool is_nil() const noexcept { return kind_ == kind::nil; }
  bool is_integer() const noexcept { return kind_ == kind::integer; }
  bool is_string() const noexcept { return kind_ == kind::string; }
  bool is_status() const noexcept { return kind_ == kind::status; }
  bool is_error() const noexcept { return kind_ == kind::error; }
  bool is_array() const noexcept { return kind_ == kind::array; }
  ///@}

  /// The value of an integer reply; 0 unless is_integer().
  long long integer() const noexcept { return integer_; }
  /// The bytes of a string, status or error reply, else empty. Valid while the reply lives.
  std::string_view str() const noexcept { return str_; }
  /// An array's elements (empty for any other kind).
  std::span<const reply> elements() const noexcept { return elements_; }
  /// An array's elements, mutable (empty for any other kind).
  std::span<reply> elements() noexcept { return elements_; }
  /// An array's element count (0 for any other kind).
  std::size_t size() const noexcept { return elements_.size(); }
  /// Element i of an array; throws std::out_of_range when i >= size().
  const reply& operator[](std::size_t i) const { return elements_.at(i); }

  /// The integer of an integer reply, or of a string holding a decimal integer; else nothing.
  std::optional<long long> to_integer() const noexcept;
  /// The number in a string or integer reply (ZSCORE, WITHSCORES); else nothing.
  std::optional<double> to_double() const noexcept;

 private:
  kind kind_ = kind::nil;
  long long integer_ = 0;
  std::string str_;
  std::vector<reply> elements_;
};

}  // namespace cogwheel::redis
