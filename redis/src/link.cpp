#include "link.hpp"

#include <cogwheel/io/resolve.hpp>

#if COGWHEEL_REDIS_TLS
#include <cogwheel/tls/context.hpp>
#endif

namespace cogwheel::redis::detail {

#if COGWHEEL_REDIS_TLS
namespace {

// "127.0.0.1" or "::1": the address without its port and brackets.
std::string ip_of(const socket_address& a) {
  std::string s = a.to_string();
  s.erase(s.rfind(':'));
  if (!s.empty() && s.front() == '[') s = s.substr(1, s.size() - 2);
  return s;
}

}  // namespace
#endif

bool link::is_open() const noexcept {
#if COGWHEEL_REDIS_TLS
  if (secure.is_open()) return true;
#endif
  return plain.is_open();
}

int link::socket() noexcept {
#if COGWHEEL_REDIS_TLS
  if (secure.is_open()) return secure.lower().native_handle();
#endif
  return plain.is_open() ? plain.native_handle() : -1;
}

void link::set_nodelay() noexcept {
#if COGWHEEL_REDIS_TLS
  if (secure.is_open()) {
    (void)secure.lower().set_nodelay(true);
    return;
  }
#endif
  (void)plain.set_nodelay(true);
}

void link::close() noexcept {
#if COGWHEEL_REDIS_TLS
  secure.close();
#endif
  plain.close();
}

task<result<link>> establish(const client_options& options) {
#if !COGWHEEL_REDIS_TLS
  if (options.tls) co_return std::make_error_code(errc::not_supported);
#else
  if (options.tls && options.tls->context == nullptr) co_return std::make_error_code(errc::invalid_argument);
  // A server name that TLS would refuse is refused before anything is connected.
  if (options.tls && !options.tls->server_name.empty() && !is_valid_host_name(options.tls->server_name))
    co_return std::make_error_code(errc::invalid_argument);
#endif
  link l;
  result<tcp_stream> tcp = std::make_error_code(errc::invalid_argument);
  if (options.host)
    tcp = co_await tcp_stream::connect(*options.host, options.port, options.connect);
  else
    tcp = co_await tcp_stream::connect(options.address);
  if (!tcp) co_return tcp.error();
#if COGWHEEL_REDIS_TLS
  if (options.tls) {
    std::string name = options.tls->server_name;
    if (name.empty()) name = options.host ? *options.host : ip_of(options.address);
    auto s = co_await tls::stream::connect(std::move(*tcp), *options.tls->context, std::move(name));
    if (!s) co_return s.error();
    l.secure = std::move(*s);
    co_return l;
  }
#endif
  l.plain = std::move(*tcp);
  co_return l;
}

}  // namespace cogwheel::redis::detail
