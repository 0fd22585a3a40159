/// @file
/// result<T>: a value or a std::error_code, as std::expected would give (C++20 has none).
/// Expected failures (timeouts, cancellation, errno of a syscall or CQE) travel in it; exceptions
/// are kept for programming errors and a coroutine body's own throws.
#pragma once

#include <cassert>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace cogwheel {

using std::errc;  ///< errc::timed_out, errc::operation_canceled, ...

/// Thrown by result::value() on an error: reading a value that is not there is a programming error.
class bad_result_access : public std::system_error {
 public:
  /// The exception for the error `ec` the result held.
  explicit bad_result_access(std::error_code ec) : std::system_error(ec, "cogwheel::result has no value") {}
};

/// A value of type T or the std::error_code of a failure, as std::expected would give.
/// Operations of cogwheel answer result<T>; `if (r)` tests for a value, `*r` reads it, and
/// `r.error()` says what failed (errc::timed_out, errc::operation_canceled, a syscall's errno).
template <class T>
class [[nodiscard]] result {
  static_assert(!std::is_reference_v<T>, "result<T&> is not supported");

 public:
  using value_type = T;  ///< T

  /// A default-constructed value.
  result() requires std::is_default_constructible_v<T> : v_(std::in_place_index<0>) {}
  /// A value (implicit, so that `co_return value;` works).
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  /// Precondition, checked in every build: ec is an error. A result<T> with neither a value nor an
  /// error would read as failed while error() says success.
  result(std::error_code ec) : v_(std::in_place_index<1>, ec) {  // NOLINT: implicit by design
    if (!ec) throw std::invalid_argument("cogwheel::result<T> built from an empty error_code");
  }
  /// The error `e` (implicit, so that `co_return errc::timed_out;` works).
  result(errc e) : result(std::make_error_code(e)) {}                          // NOLINT

  /// Whether it holds a value.
  bool has_value() const noexcept { return v_.index() == 0; }
  /// Whether it holds a value.
  explicit operator bool() const noexcept { return has_value(); }

  ///@{
  /// The value. Throws bad_result_access (holding the error) when there is none.
  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  ///@}
  ///@{
  /// The value, unchecked. Precondition: has_value() (asserted in debug builds).
  T& operator*() & noexcept { assert(has_value()); return *std::get_if<0>(&v_); }
  const T& operator*() const& noexcept { assert(has_value()); return *std::get_if<0>(&v_); }
  T&& operator*() && noexcept { assert(has_value()); return std::move(*std::get_if<0>(&v_)); }
  T* operator->() noexcept { assert(has_value()); return std::get_if<0>(&v_); }
  const T* operator->() const noexcept { assert(has_value()); return std::get_if<0>(&v_); }
  ///@}
  /// The value, or `fallback` converted to T when there is none.
  template <class U>
  T value_or(U&& fallback) const& { return has_value() ? **this : static_cast<T>(std::forward<U>(fallback)); }

  /// The error; a default (false) error_code when there is a value.
  std::error_code error() const noexcept {
    const auto* ec = std::get_if<1>(&v_);
    return ec != nullptr ? *ec : std::error_code{};
  }

 private:
  void check() const {
    if (!has_value()) throw bad_result_access(std::get<1>(v_));
  }
  std::variant<T, std::error_code> v_;
};

/// Success, or the std::error_code of a failure: what an operation with no value answers.
template <>
class [[nodiscard]] result<void> {
 public:
  using value_type = void;  ///< void

  /// Success.
  result() noexcept = default;
  /// The error `ec`; an empty error_code is success.
  result(std::error_code ec) noexcept : ec_(ec) {}  // NOLINT
  /// The error `e`.
  result(errc e) noexcept : ec_(std::make_error_code(e)) {}  // NOLINT

  /// Whether it is a success.
  bool has_value() const noexcept { return !ec_; }
  /// Whether it is a success.
  explicit operator bool() const noexcept { return has_value(); }
  /// Throws bad_result_access (holding the error) unless it is a success.
  void value() const {
    if (ec_) throw bad_result_access(ec_);
  }
  /// The error; a default (false) error_code on success.
  std::error_code error() const noexcept { return ec_; }

 private:
  std::error_code ec_;
};

/// A failed syscall's or CQE's negative errno as a result error.
inline std::error_code errno_code(int err) noexcept {
  return std::error_code(err < 0 ? -err : err, std::system_category());
}

/// Whether T is some `result<U>`.
template <class T>
inline constexpr bool is_result_v = false;
/// Whether T is some `result<U>`. it is.
template <class T>
inline constexpr bool is_result_v<result<T>> = true;

}  // namespace cogwheel
