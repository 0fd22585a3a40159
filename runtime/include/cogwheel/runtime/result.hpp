// result<T>: a value or a std::error_code, as std::expected would give (C++20 has none).
// Expected failures (timeouts, cancellation, errno of a syscall or CQE) travel in it; exceptions
// are kept for programming errors and a coroutine body's own throws.
#pragma once

#include <cassert>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace cogwheel {

using std::errc;  // errc::timed_out, errc::operation_canceled, ...

// Thrown by result::value() on an error: reading a value that is not there is a programming error.
class bad_result_access : public std::system_error {
 public:
  explicit bad_result_access(std::error_code ec) : std::system_error(ec, "cogwheel::result has no value") {}
};

template <class T>
class [[nodiscard]] result {
  static_assert(!std::is_reference_v<T>, "result<T&> is not supported");

 public:
  using value_type = T;

  result() requires std::is_default_constructible_v<T> : v_(std::in_place_index<0>) {}
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  // Precondition, checked in every build: ec is an error. A result<T> with neither a value nor an
  // error would read as failed while error() says success.
  result(std::error_code ec) : v_(std::in_place_index<1>, ec) {  // NOLINT: implicit by design
    if (!ec) throw std::invalid_argument("cogwheel::result<T> built from an empty error_code");
  }
  result(errc e) : result(std::make_error_code(e)) {}                          // NOLINT

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T& operator*() & noexcept { assert(has_value()); return *std::get_if<0>(&v_); }
  const T& operator*() const& noexcept { assert(has_value()); return *std::get_if<0>(&v_); }
  T&& operator*() && noexcept { assert(has_value()); return std::move(*std::get_if<0>(&v_)); }
  T* operator->() noexcept { assert(has_value()); return std::get_if<0>(&v_); }
  const T* operator->() const noexcept { assert(has_value()); return std::get_if<0>(&v_); }
  template <class U>
  T value_or(U&& fallback) const& { return has_value() ? **this : static_cast<T>(std::forward<U>(fallback)); }

  // The error; a default (false) error_code when there is a value.
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

template <>
class [[nodiscard]] result<void> {
 public:
  using value_type = void;

  result() noexcept = default;
  result(std::error_code ec) noexcept : ec_(ec) {}  // NOLINT; an empty error_code is success
  result(errc e) noexcept : ec_(std::make_error_code(e)) {}  // NOLINT

  bool has_value() const noexcept { return !ec_; }
  explicit operator bool() const noexcept { return has_value(); }
  void value() const {
    if (ec_) throw bad_result_access(ec_);
  }
  std::error_code error() const noexcept { return ec_; }

 private:
  std::error_code ec_;
};

// A failed syscall's or CQE's negative errno as a result error.
inline std::error_code errno_code(int err) noexcept {
  return std::error_code(err < 0 ? -err : err, std::system_category());
}

template <class T>
inline constexpr bool is_result_v = false;
template <class T>
inline constexpr bool is_result_v<result<T>> = true;

}  // namespace cogwheel
