/// @file
/// command_arg (one argument of a command, encoded as a RESP bulk string) and command_operation
/// (what client::command returns: an awaitable that yields result<reply>).
///
/// A command_operation is a cancellable operation in the sense of
/// <cogwheel/runtime/operation.hpp>: co_await it, or give it to with_timeout / with_deadline.
/// Its waiter node lives inside the operation, i.e. inside the awaiting coroutine's frame; the
/// connection links it into its FIFO of commands in flight. Nothing is allocated per command
/// beyond the encoded bytes appended to the connection's output buffer.
///
/// Cancelled (a timeout) or destroyed while in flight, a command's reply is still read when it
/// comes, and discarded: no other command receives it and the connection stays in step.
#pragma once

#include <array>
#include <charconv>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <cogwheel/redis/reply.hpp>
#include <cogwheel/runtime/detail/intrusive_list.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/sleep.hpp>

namespace cogwheel::redis {

/// One argument of a command. A string argument is a view: the bytes must stay valid until the
/// command has started, which `co_await client.command(...)` (one full expression) guarantees.
/// Numbers are formatted into the argument itself. Implicit conversions, so that
/// `command("SET", key, 42)` reads as Redis does.
class command_arg {
 public:
  /// Views `s` (binary-safe: any bytes).
  command_arg(std::string_view s) noexcept : data_(s.data()), size_(s.size()) {}  // NOLINT
  /// Views the NUL-terminated `s`.
  command_arg(const char* s) noexcept : command_arg(std::string_view(s)) {}       // NOLINT
  /// Views `s`'s bytes (s must outlive the command's start).
  command_arg(const std::string& s) noexcept : command_arg(std::string_view(s)) {}  // NOLINT
  /// An integer in decimal (bool and char are not integers here: pass them as strings).
  template <std::integral I>
    requires(!std::same_as<I, bool> && !std::same_as<I, char>)
  command_arg(I v) noexcept {  // NOLINT
    size_ = static_cast<std::size_t>(std::to_chars(buf_, buf_ + sizeof buf_, v).ptr - buf_);
  }
  /// A double as the shortest text that reads back as v.
  command_arg(double v) noexcept {  // NOLINT: shortest text that reads back as v
    size_ = static_cast<std::size_t>(std::to_chars(buf_, buf_ + sizeof buf_, v).ptr - buf_);
  }
  /// The same view, or a copy of the formatted number.
  command_arg(const command_arg& o) noexcept { *this = o; }
  /// The same view, or a copy of the formatted number.
  command_arg& operator=(const command_arg& o) noexcept {
    data_ = o.data_;
    size_ = o.size_;
    if (o.data_ == nullptr) std::char_traits<char>::copy(buf_, o.buf_, o.size_);
    return *this;
  }

  /// The argument's bytes as sent.
  std::string_view view() const noexcept { return {data_ != nullptr ? data_ : buf_, size_}; }

 private:
  const char* data_ = nullptr;  // null: the bytes are in buf_
  std::size_t size_ = 0;
  char buf_[32];
};

namespace detail {

class connection;

// One command in flight: a node of its connection's FIFO. Owned by the command_operation;
// linked (state queued) from the moment its bytes are encoded until its reply arrives, it is
// cancelled, or the connection fails it.
struct waiter : cogwheel::detail::list_link {
  enum class state : std::uint8_t { idle, queued, done };

  // Replies of cancelled commands that arrive before this one's; discarded on arrival.
  std::uint32_t discards_before = 0;
  state st = state::idle;
  cogwheel::continuation done;
  cogwheel::result<reply> outcome;
  // Completes the command at the next loop iteration when it is finished from outside its
  // reply (cancelled, connection lost): an operation never completes from inside cancel().
  sleep_operation later{clock::time_point::min()};
};

// The connection's side of command_operation (src/connection.cpp). conn may be null (a client
// that was closed or moved from): submit then fails at once with error::closed.
std::coroutine_handle<> submit(connection* conn, waiter& w, std::span<const command_arg> args,
                               cogwheel::continuation c);
void cancel_waiter(connection* conn, waiter& w) noexcept;
void abandon(connection* conn, waiter& w) noexcept;

}  // namespace detail

/// What client::command() returns: awaitable<result<reply>>, a cancellable operation (see
/// <cogwheel/runtime/operation.hpp>) holding its N arguments by value (std::dynamic_extent: a
/// span of arguments, which must outlive the start of the operation). Errors: see client.hpp.
template <std::size_t N>
class command_operation : public cogwheel::operation<command_operation<N>> {
  using storage = std::conditional_t<N == std::dynamic_extent, std::span<const command_arg>,
                                     std::array<command_arg, N == std::dynamic_extent ? 0 : N>>;

 public:
  /// A command for the connection `c` (null: a client not connected; it fails when started).
  command_operation(detail::connection* c, storage args) noexcept : conn_(c), args_(args) {}
  /// Moves happen before start (with_timeout takes the operation by value).
  command_operation(command_operation&& o) noexcept
      : cogwheel::operation<command_operation>(std::move(o)), conn_(o.conn_), args_(o.args_) {}
  ~command_operation() {
    if (w_.st == detail::waiter::state::queued) detail::abandon(conn_, w_);
  }

  /// Encodes the command into the connection's output buffer and waits for its reply in FIFO
  /// order (completes at once when it is refused or the client is not connected).
  std::coroutine_handle<> start(cogwheel::continuation c) {
    return detail::submit(conn_, w_, std::span<const command_arg>(args_), c);
  }
  /// Gives up waiting: the command completes with errc::operation_canceled at the next
  /// iteration, and its reply, when it comes, is read and discarded (the connection is kept).
  void cancel() noexcept {
    if (w_.st == detail::waiter::state::queued) detail::cancel_waiter(conn_, w_);
  }
  /// The reply, or the command's error (moved out: call once).
  cogwheel::result<reply> result() { return std::move(w_.outcome); }

 private:
  detail::connection* conn_;
  storage args_;
  detail::waiter w_;
};

}  // namespace cogwheel::redis
