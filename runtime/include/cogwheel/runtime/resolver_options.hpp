/// @file
/// resolver_options: where and how resolve() and tcp_stream::connect(host, port) ask for names
/// (a field of runtime_options, read by each core's resolver when it first resolves a name).
/// Every field left unset takes its value from /etc/resolv.conf, as the C library would.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cogwheel {

/// Where and how a core's resolver asks for names (see the file comment); a field of
/// runtime_options.
struct resolver_options {
  /// Name servers as "address" or "address:port" ("127.0.0.1:5353", "[::1]:53"); empty: the
  /// nameserver lines of /etc/resolv.conf.
  std::vector<std::string> servers = {};
  /// Domains tried after (or before, see ndots) a name; unset: resolv.conf's search/domain.
  std::optional<std::vector<std::string>> search = {};
  /// A name with at least this many dots is first asked as it is; unset: resolv.conf (else 1).
  std::optional<int> ndots = {};
  /// How long the first try of a query waits for a server (c-ares doubles it on each round over
  /// the servers); unset: resolv.conf's "options timeout:" (else c-ares' default).
  std::optional<std::chrono::milliseconds> timeout = {};
  /// Tries per server before a query gives up with resolve_errc::no_answer; unset: resolv.conf.
  std::optional<int> attempts = {};
  /// The hosts file consulted (read once per core, at the resolver's first use) before any server.
  std::string hosts_file = "/etc/hosts";
  /// How long "no such name" (and "no address of that family") is remembered per core. Positive
  /// answers are remembered for their TTL. Zero disables the negative cache.
  std::chrono::milliseconds negative_ttl = std::chrono::seconds(5);
  /// Names (per family) each core's cache holds at most; 0 disables the cache.
  std::size_t cache_entries = 1024;
};

}  // namespace cogwheel
