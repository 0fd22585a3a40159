#include <cogwheel/redis/client.hpp>

#include "connection.hpp"

namespace cogwheel::redis {

bool tls_supported() noexcept {
#if COGWHEEL_REDIS_TLS
  return true;
#else
  return false;
#endif
}

client::client(client&&) noexcept = default;

client& client::operator=(client&& o) noexcept {
  if (this != &o) {
    close();
    conn_ = std::move(o.conn_);
  }
  return *this;
}

client::~client() { close(); }

task<cogwheel::result<client>> client::connect(client_options options) {
  auto conn = std::make_shared<detail::connection>(std::move(options));
  auto r = co_await conn->start();
  if (!r) co_return r.error();
  co_return client(std::move(conn));
}

bool client::connected() const noexcept { return conn_ != nullptr && conn_->connected(); }

client_stats client::stats() const noexcept { return conn_ != nullptr ? conn_->stats() : client_stats{}; }

void client::close() noexcept {
  if (conn_ != nullptr) conn_->close();
  conn_.reset();
}

}  // namespace cogwheel::redis
