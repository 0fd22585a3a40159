/// @file
/// client: a Redis connection on one cogwheel core, pipelined.
///
///   auto c = co_await redis::client::connect({.address = addr});
///   redis::client_options o;
///   o.host = "redis.internal";  // resolved again at every reconnection (a named variable: g++ 12
///                               // mishandles a braced one with a string inside co_await)
///   auto by_name = co_await redis::client::connect(o);
///   result<reply> r = co_await c->command("ZADD", key, score, member);
///   auto r2 = co_await with_timeout(c->command("GET", key), 50ms);   // errc::timed_out
///
/// Any number of commands may be in flight: each is encoded into the connection's output
/// buffer, a single writer coroutine sends whatever has accumulated in one write, and a single
/// reader coroutine parses replies (src/reply_reader.cpp) and hands them out in FIFO order.
///
/// Failures: a RESP error reply is an error code of redis::error_category() (server_error,
/// wrong_type, no_script...); a broken connection fails every command in flight with
/// error::connection_lost (or protocol_error / reply_too_large when the server sent something
/// unacceptable) and the client reconnects in the background with exponential back-off; while it
/// is disconnected, commands fail at once with error::not_connected. Timeouts are the caller's
/// (with_timeout): a timed-out command's reply is discarded when it comes, the connection is kept.
///
/// Names: with client_options::host set, every connection (the first and each reconnection)
/// resolves the name again (resolve(): its TTL cache, then DNS) and connects by Happy Eyeballs
/// (tcp_stream::connect(host, port, connect)), so a server that moves to a new address is found
/// once DNS says so. connect_timeout bounds the resolution, every attempt and the TLS handshake.
///
/// TLS: with client_options::tls set, the connection speaks TLS (cogwheel::tls) and checks the
/// server's certificate for tls->server_name. Only where the library was built with
/// cogwheel::tls (OpenSSL 3); elsewhere connecting fails with errc::not_supported.
///
/// Threading: a client and its commands belong to the core that connected it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <cogwheel/io/address.hpp>
#include <cogwheel/io/connect_options.hpp>
#include <cogwheel/redis/command.hpp>
#include <cogwheel/redis/error.hpp>
#include <cogwheel/redis/reply.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel::tls {
class context;  // <cogwheel/tls/context.hpp>, where cogwheel::tls is built
}  // namespace cogwheel::tls

namespace cogwheel::redis {

/// TLS for a client's connections.
struct client_tls {
  /// A client context (tls::context::client(), then trust() for a private CA). Shared: a
  /// context is a handle, every connection starts from this one.
  std::shared_ptr<const tls::context> context = {};
  /// Sent as SNI and checked against the server's certificate. Empty: the host, or the
  /// address's IP (an IP is checked against the certificate's IP names and sends no SNI).
  /// A name that is not a host name (is_valid_host_name(): a NUL, a space, ...) fails the
  /// connect with errc::invalid_argument before anything is connected.
  std::string server_name = {};
};

/// How client::connect() reaches the server and bounds what it reads.
struct client_options {
  /// The server by address; used when `host` is unset.
  socket_address address = {};
  /// The server by name, resolved again at every (re)connection; `port` goes with it. Unset:
  /// `address`. (An optional, not an empty string: g++ 12 copies an aggregate temporary written
  /// inside a co_await's operand bitwise, which an empty std::string does not survive, so that
  /// `co_await client::connect({.address = a})` stays safe there. Options with a host set are
  /// best built in a named variable.)
  std::optional<std::string> host = {};
  /// The port that goes with `host`.
  std::uint16_t port = 6379;
  /// How a name's addresses are raced (Happy Eyeballs); only with `host`.
  connect_options connect = {};
  /// TLS on every connection (see the file comment).
  std::optional<client_tls> tls = {};
  /// Bounds one connection: resolution, TCP connect and TLS handshake; the first and the
  /// reconnections.
  std::chrono::milliseconds connect_timeout{2000};
  /// Back-off between reconnection attempts: doubles from initial to max; back to initial once
  /// a connection has delivered a reply that is not an error (a server that accepts, answers
  /// "-ERR max number of clients reached" and closes keeps the back-off growing).
  std::chrono::milliseconds reconnect_initial{10};
  std::chrono::milliseconds reconnect_max{2000};  ///< the back-off's ceiling (see reconnect_initial)
  /// Bound of one reply: the unparsed bytes buffered, a bulk string's announced length, and what
  /// the reply takes once parsed (sizeof(reply) per element plus its bytes, charged as elements
  /// arrive, whatever an array header announces). Past it: error::reply_too_large, the
  /// connection dropped.
  std::size_t max_reply_bytes = 64u << 20;
  /// An array header announcing more elements is refused at once (error::reply_too_large).
  std::size_t max_reply_elements = 1u << 24;
  /// A reply nested deeper is read to its end and skipped: its command fails with
  /// error::reply_too_deep, the connection and the other commands carry on.
  std::size_t max_reply_depth = 512;
  /// Pub/Sub: channels subscribed on every (re)connection, and who receives their messages.
  /// A client with subscriptions should send no other commands (Redis allows few of them).
  std::vector<std::string> subscriptions = {};
  /// Called on the client's core for each message of `subscriptions`; the views are valid
  /// during the call only. Must not throw. Unset, messages are dropped; without
  /// subscriptions it is never called (a reply shaped like a message is its command's).
  std::function<void(std::string_view channel, std::string_view message)> on_message = {};
};

/// Whether this build of the library speaks TLS (it was built with cogwheel::tls); when not,
/// a client_options::tls makes connect() fail with errc::not_supported.
bool tls_supported() noexcept;

/// A client's counters since it connected first (client::stats()).
struct client_stats {
  std::uint64_t connects = 0;         ///< successful connections, the first included
  std::uint64_t connect_failures = 0;  ///< connection attempts that failed or timed out
  std::uint64_t discarded_replies = 0;  ///< replies of cancelled commands, read and dropped
};

/// A pipelined Redis connection on one core (see the file comment). Move-only; destroying it
/// closes it (see close()).
class client {
 public:
  /// Not connected: commands fail with error::not_connected.
  client() noexcept = default;
  /// Takes `o`'s connection; `o` is left not connected.
  client(client&& o) noexcept;
  /// Closes this client first (see close()), then takes `o`'s connection.
  client& operator=(client&& o) noexcept;
  /// Closes the client (see close()).
  ~client();

  /// Connects once (failing with the connect error or errc::timed_out), then keeps the
  /// connection up in the background until close() or destruction.
  static task<cogwheel::result<client>> connect(client_options options);

  /// awaitable<result<reply>>. Arguments: strings (viewed, see command_arg) and numbers.
  /// Refused unsent with errc::invalid_argument: no arguments (Redis would answer nothing, and
  /// every later reply would go to the command before it), and commands that change the
  /// connection's reply stream (SUBSCRIBE and its kin, MONITOR, HELLO 3): subscriptions
  /// belong to client_options::subscriptions.
  template <class... Args>
  command_operation<sizeof...(Args)> command(const Args&... args) noexcept {
    return {conn_.get(), {command_arg(args)...}};
  }
  /// command(args...) with the arguments in a span (built at run time), which must outlive
  /// the start of the operation (the co_await expression).
  command_operation<std::dynamic_extent> command(std::span<const command_arg> args) noexcept {
    return {conn_.get(), args};
  }

  /// Whether the connection is up now (false while it reconnects, or after close()).
  bool connected() const noexcept;
  /// The connection's counters (all zero for a client never connected or closed).
  client_stats stats() const noexcept;

  /// Fails every command in flight with error::closed and stops reconnecting. Idempotent.
  void close() noexcept;

 private:
  explicit client(std::shared_ptr<detail::connection> c) noexcept : conn_(std::move(c)) {}
  std::shared_ptr<detail::connection> conn_;
};

}  // namespace cogwheel::redis
