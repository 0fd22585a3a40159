// The per-core resolver behind resolve() and tcp_stream::connect(host, port): one c-ares
// channel per core, created at the first lookup on that core from the loop's
// runtime_options::resolver, and destroyed when the loop shuts down.
//
// A lookup is one name and one family (AF_INET6 or AF_INET). It is answered, in this order:
// from the hosts file (read once, at creation), RFC 6761's localhost, the core's cache, a query
// of the same name and family already in flight on this core (shared), or a new c-ares query.
// c-ares' sockets are watched with the loop's poll operations (resolver_sockets.cpp), and so is
// a timerfd for its timeouts (real time, as c-ares measures them: not the loop's clock, which
// may be paused): the loop never blocks for a lookup.
//
// Threading: a resolver and its waiters belong to one loop thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <cogwheel/io/address.hpp>
#include <cogwheel/runtime/continuation.hpp>
#include <cogwheel/runtime/detail/intrusive_list.hpp>
#include <cogwheel/runtime/detail/ready_queue.hpp>

namespace cogwheel::detail {

class resolver;
struct pending_query;

// What a lookup of one family found: addresses (port 0) in the source's order, or why none.
struct lookup_answer {
  std::error_code error;
  std::vector<socket_address> addresses;
};

// One party waiting for one lookup. Lives in its owner (an operation in a coroutine frame, the
// Happy Eyeballs race); destroying it detaches it.
class lookup_waiter : public list_link {
 public:
  lookup_waiter() noexcept = default;
  ~lookup_waiter() { detach(); }

  // Starts looking up `name` for `family` (AF_INET6 or AF_INET) on this core.
  // Returns true when answered at once: answer() holds the outcome and `done` is never run.
  // Otherwise `done` is completed later, from this loop's ready queue (never from inside
  // start()), with answer() filled in, unless detach() comes first.
  // Precondition: on a loop thread; not started before (or detached since).
  bool start(std::string_view name, int family, continuation done);
  // No completion after this; the query itself goes on (its answer still fills the cache).
  void detach() noexcept;

  lookup_answer& answer() noexcept { return answer_; }

 private:
  friend class resolver;
  lookup_answer answer_;
  continuation done_;
  ready_node posted_;  // queued between the answer and done_
};

// The error of a name's lookup over both families when neither found an address: not_found if
// either says the name does not exist, else the first error other than no_data, else no_data.
std::error_code combined_error(std::error_code v6, std::error_code v4) noexcept;

}  // namespace cogwheel::detail
