/// @file
/// The errors of cogwheel::redis, as std::error_codes of their own category ("cogwheel.redis").
/// Transport failures keep their errno (ECONNRESET, ECONNREFUSED...) and timeouts stay
/// errc::timed_out; these codes are what only a Redis client can say.
#pragma once

#include <system_error>

namespace cogwheel::redis {

/// What only a Redis client can say (see the file comment), in error_category().
enum class error {
  /// The server answered with a RESP error ("-ERR ...", "-WRONGTYPE ...", ...).
  server_error = 1,
  wrong_type,       ///< "-WRONGTYPE": the key holds another type
  no_script,        ///< "-NOSCRIPT": EVALSHA of a script the server does not have
  busy,             ///< "-BUSY": a script is running on the server
  loading,          ///< "-LOADING": the server is loading its data set
  /// The bytes from the server are not RESP (the parser refused them); the connection is
  /// dropped, and every command in flight on it fails with this.
  protocol_error,
  /// A reply larger than client_options::max_reply_bytes (or an array longer than
  /// max_reply_elements): refused before it is buffered; the connection is dropped.
  reply_too_large,
  /// A reply nobody asked for (more replies than commands): the connection is dropped.
  unexpected_reply,
  /// Issued while the client is not connected (it is reconnecting): fails at once.
  not_connected,
  /// The connection was lost while the command was in flight: it may or may not have run.
  connection_lost,
  /// The client was closed.
  closed,
  /// A reply of another type than the caller needed (e.g. an integer where an array was due).
  unexpected_type,
  /// A reply nested deeper than client_options::max_reply_depth: read to its end and skipped;
  /// only the command it answers fails, the connection is kept.
  reply_too_deep,
};

/// The category of redis::error ("cogwheel.redis"); one object for the process.
const std::error_category& error_category() noexcept;

/// Makes redis::error usable as a std::error_code (found by ADL).
inline std::error_code make_error_code(error e) noexcept {
  return {static_cast<int>(e), error_category()};
}

}  // namespace cogwheel::redis

template <>
struct std::is_error_code_enum<cogwheel::redis::error> : std::true_type {};
