#include <cogwheel/redis/error.hpp>

#include <string>

namespace cogwheel::redis {

namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cogwheel.redis"; }
  std::string message(int ev) const override {
    switch (static_cast<error>(ev)) {
      case error::server_error: return "the Redis server replied with an error";
      case error::wrong_type: return "WRONGTYPE: the key holds a value of another type";
      case error::no_script: return "NOSCRIPT: the server does not have this script";
      case error::busy: return "BUSY: a script is running on the Redis server";
      case error::loading: return "LOADING: the Redis server is loading its data set";
      case error::protocol_error: return "the server sent bytes that are not RESP";
      case error::reply_too_large: return "the server announced a reply larger than max_reply_bytes";
      case error::unexpected_reply: return "the server sent a reply no command was waiting for";
      case error::not_connected: return "the Redis client is not connected (reconnecting)";
      case error::connection_lost: return "the connection to Redis was lost with the command in flight";
      case error::closed: return "the Redis client was closed";
      case error::unexpected_type: return "the Redis reply has another type than expected";
      case error::reply_too_deep: return "the reply is nested deeper than max_reply_depth (skipped)";
    }
    return "unknown cogwheel.redis error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const category c;
  return c;
}

}  // namespace cogwheel::redis
