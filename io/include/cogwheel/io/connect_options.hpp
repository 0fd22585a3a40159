/// @file
/// connect_options: how tcp_stream::connect(host, port, options) races a name's addresses
/// (Happy Eyeballs v2, RFC 8305).
#pragma once

#include <chrono>
#include <optional>

#include <cogwheel/io/address.hpp>

namespace cogwheel {

/// An IP version.
enum class ip_family { ipv6, ipv4 };

/// How tcp_stream::connect(host, port, options) resolves `host` and races its addresses.
struct connect_options {
  /// How long an attempt has alone before the next address is tried too (RFC 8305 §5
  /// "Connection Attempt Delay"; a failed attempt starts the next one at once).
  std::chrono::steady_clock::duration attempt_delay = std::chrono::milliseconds(250);
  /// When the A answer comes first, how long to wait for AAAA before connecting over IPv4
  /// (RFC 8305 §3 "Resolution Delay"). Only when IPv6 is preferred.
  std::chrono::steady_clock::duration resolution_delay = std::chrono::milliseconds(50);
  /// The family tried first; attempts then alternate between families.
  ip_family prefer_family = ip_family::ipv6;
  /// Bind every attempt's socket to this address first (port 0: any port). Only addresses of
  /// its family are asked for and tried (resolve_errc::no_data when the host has none; a
  /// numeric host of the other family: errc::address_family_not_supported).
  std::optional<socket_address> local_address = {};
};

}  // namespace cogwheel
