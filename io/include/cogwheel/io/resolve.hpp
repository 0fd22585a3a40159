/// @file
/// resolve(host, port): a name's addresses, found on the loop without blocking it.
///
///   - A numeric host ("127.0.0.1", "::1", "[::1]") answers at once, without any lookup.
///   - A name in the hosts file (resolver_options::hosts_file, /etc/hosts by default, read once
///     per core) answers at once from there, and only from there. "localhost" and names under
///     ".localhost" that the file does not list answer 127.0.0.1 and ::1 (RFC 6761).
///   - Anything else is asked of the name servers of runtime_options::resolver (by default those
///     of /etc/resolv.conf, with its search list, ndots, timeout and attempts) by c-ares, over
///     sockets the core's loop watches and with c-ares' timeouts kept on the loop's timer queue:
///     no thread, no blocking call. AAAA and A are asked at once.
///   - Answers are kept per core for their TTL; "no such name" and "no address" for
///     resolver_options::negative_ttl. Concurrent lookups of one name on one core share a query.
///   - Not consulted: the other sources of /etc/nsswitch.conf (mDNS, LDAP, systemd-resolved's
///     own protocol, myhostname...). A name only they know is not found here.
///
/// Cancellation: resolve() is a task, so with_timeout, with_deadline and deadlines that flow
/// bound it; cut short, it completes at once (errc::timed_out under a timeout) and its query is
/// detached, not cancelled: it goes on inside c-ares (until c-ares' own timeout) and its answer
/// still fills the cache. Destroying the awaiting frame leaves nothing behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <cogwheel/io/address.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {

/// Why a name has no address: the error codes resolve() and connect(host, port) return, in
/// resolve_category(). resolve_errc::no_answer compares equal to std::errc::timed_out.
enum class resolve_errc {
  not_found = 1,   ///< the name does not exist (NXDOMAIN, after every search domain)
  no_data,         ///< the name exists but has no address (of the families asked)
  no_answer,       ///< no server answered within the timeout and attempts (or none could be reached)
  refused,         ///< the servers refused to answer (REFUSED)
  server_failure,  ///< the servers could not answer (SERVFAIL)
  bad_response,    ///< an answer that could not be parsed, or a query the server did not implement
  bad_name,        ///< not a name that can be looked up (empty, malformed)
};

/// The most addresses of one family a lookup keeps from a name server's answer: the first ones,
/// in the server's order (glibc's resolver keeps 48). A hostile or broken server can send
/// thousands in one TCP answer (64 KiB); kept, they would sit in the cache of every core that
/// asked and Happy Eyeballs would try them all. The hosts file is not cut.
inline constexpr std::size_t max_addresses_per_family = 64;

/// The category of resolve_errc ("cogwheel.resolve"); one object for the process.
const std::error_category& resolve_category() noexcept;

/// Makes resolve_errc usable as a std::error_code (found by ADL).
inline std::error_code make_error_code(resolve_errc e) noexcept {
  return {static_cast<int>(e), resolve_category()};
}

/// Whether `name` is a host name every boundary that takes one accepts: an IP literal
/// ("127.0.0.1", "::1", "[::1]", "fe80::1%2") or a DNS name of at most 253 characters (one
/// trailing dot aside) whose dot-separated labels are 1 to 63 letters, digits, '-' or '_'.
/// Anything else (a NUL, a space, an empty label, ...) is refused before it is used:
/// resolve_errc::bad_name from resolve() and connect(host, port), errc::invalid_argument where
/// TLS takes a server name. A NUL in particular: C APIs would use the name cut at it.
bool is_valid_host_name(std::string_view name);

/// The addresses of `host`, each with `port`: IPv6 ones first, then IPv4, each family in the
/// order the source gave them (see the file comment for the sources and the cache). Errors:
/// resolve_errc (see above), errc::operation_canceled when stopped. Parameters are owned: the
/// task may be stored before it is awaited. Must be awaited on a cogwheel loop thread.
task<result<std::vector<socket_address>>> resolve(std::string host, std::uint16_t port);

}  // namespace cogwheel

template <>
struct std::is_error_code_enum<cogwheel::resolve_errc> : std::true_type {};
