// The per-core resolver (see resolver.hpp): its c-ares channel, its timer, the queries in
// flight and how their answers reach the waiters and the cache.
#include "resolver.hpp"

#include <ares.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <cogwheel/io/resolve.hpp>

#include <cogwheel/runtime/detail/loop_services.hpp>
#include "resolver_cache.hpp"
#include "resolver_sockets.hpp"

namespace cogwheel::detail {

// A c-ares query of one name and family, shared by every waiter that asked for it on this
// core. Owned by the resolver's map until c-ares answers (or the channel is destroyed).
struct pending_query {
  resolver* owner = nullptr;
  std::string key;
  intrusive_list<lookup_waiter> waiters;
};

class resolver : private shutdown_hook {
 public:
  static result<resolver*> of_this_core();
  // Lets go of the loop: the channel (its queries answered with operation_canceled), the polls
  // of its sockets and of the timer (waited for), the timer.
  ~resolver();

  bool start(lookup_waiter& w, std::string_view name, int family);

 private:
  explicit resolver(event_loop& loop);
  result<void> open();

  static void on_answer(void* arg, int status, int timeouts, ares_addrinfo* res) noexcept;
  static void on_socket_state(void* ctx, ares_socket_t fd, int readable, int writable) noexcept;
  static void on_socket_ready(void* ctx, ares_socket_t read_fd, ares_socket_t write_fd) noexcept;
  static void on_loop_shutdown(shutdown_hook& h) noexcept;
  // Sets the timer to c-ares' next timeout and watches it (neither when nothing is in flight).
  void rearm() noexcept;
  void deliver(pending_query& q, const lookup_answer& a) noexcept;

  event_loop* loop_;
  const resolver_options options_;
  hosts_table hosts_;
  answer_cache cache_;
  socket_watchers watchers_;
  ares_channel channel_ = nullptr;
  // c-ares' timeouts: a CLOCK_MONOTONIC timerfd, polled like its sockets. Not the loop's
  // timer queue: c-ares measures real time, and on a paused loop clock a loop timer fires at
  // once whenever the loop is idle; re-armed for the real time still wanted, it fired again
  // and the loop spun until c-ares gave up. A kernel timer in real time lets the loop sleep.
  // Made at the first query: a core that only answers from the hosts file or the cache holds
  // no descriptor for it.
  int timer_fd_ = -1;
  bool timer_set_ = false;  // timer_fd_ set to expire at timer_due_ (and not read since)
  std::chrono::steady_clock::time_point timer_due_{};
  std::unordered_map<std::string, std::unique_ptr<pending_query>> pending_;
};

namespace {

thread_local resolver* this_thread_resolver = nullptr;

std::error_code error_of(int status) noexcept {
  switch (status) {
    case ARES_ENOTFOUND: return resolve_errc::not_found;
    case ARES_ENODATA: return resolve_errc::no_data;
    // ECONNREFUSED: no server could be reached at all (its port is closed): nobody answered.
    case ARES_ETIMEOUT:
    case ARES_ECONNREFUSED: return resolve_errc::no_answer;
    case ARES_EREFUSED: return resolve_errc::refused;
    case ARES_ESERVFAIL: return resolve_errc::server_failure;
    case ARES_EBADNAME:
    case ARES_EBADSTR: return resolve_errc::bad_name;
    case ARES_ENOMEM: return std::make_error_code(errc::not_enough_memory);
    case ARES_EDESTRUCTION:
    case ARES_ECANCELLED: return std::make_error_code(errc::operation_canceled);
    default: return resolve_errc::bad_response;  // FORMERR, NOTIMP, BADRESP, EOF...
  }
}

// RFC 6761 §6.3: "localhost" and names under it are the loopback addresses, never asked of a
// server (when the hosts file does not say otherwise).
bool is_localhost(const std::string& name) noexcept {
  constexpr std::string_view suffix = ".localhost";
  return name == "localhost" ||
         (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
}

void answer_from(const std::vector<socket_address>& all, int family, lookup_answer& out) {
  out.addresses.clear();
  for (const socket_address& a : all)
    if (a.family() == family) out.addresses.push_back(a);
  out.error = out.addresses.empty() ? make_error_code(resolve_errc::no_data) : std::error_code();
}

}  // namespace

resolver::resolver(event_loop& loop)
    : loop_(&loop),
      options_(resolver_settings(loop)),
      hosts_(hosts_table::load(options_.hosts_file)),
      cache_(options_.cache_entries),
      watchers_(loop, &resolver::on_socket_ready, this) {
  on_shutdown = &resolver::on_loop_shutdown;
}

result<resolver*> resolver::of_this_core() {
  event_loop& loop = current_loop();
  if (this_thread_resolver != nullptr) return this_thread_resolver;
  static std::once_flag library;
  static int library_status = ARES_SUCCESS;
  std::call_once(library, [] { library_status = ares_library_init(ARES_LIB_INIT_ALL); });
  if (library_status != ARES_SUCCESS) return std::make_error_code(errc::not_enough_memory);
  std::unique_ptr<resolver> r(new resolver(loop));
  if (auto opened = r->open(); !opened) return opened.error();
  add_shutdown_hook(loop, *r);
  this_thread_resolver = r.release();
  return this_thread_resolver;
}

result<void> resolver::open() {
  ares_options o{};
  int mask = ARES_OPT_SOCK_STATE_CB | ARES_OPT_LOOKUPS | ARES_OPT_FLAGS;
  // A SERVFAIL or REFUSED answer is final, not asked again of the next server: c-ares 1.18
  // moving on reports every such failure as ECONNREFUSED, losing which it was.
  o.flags = ARES_FLAG_NOCHECKRESP;
  o.sock_state_cb = &resolver::on_socket_state;
  o.sock_state_cb_data = this;
  char lookups[] = "b";  // servers only: the hosts file is ours (read once, see hosts_table)
  o.lookups = lookups;
  if (options_.timeout) {
    mask |= ARES_OPT_TIMEOUTMS;
    o.timeout = static_cast<int>(std::clamp<long long>(options_.timeout->count(), 1, INT_MAX));
  }
  if (options_.attempts) {
    mask |= ARES_OPT_TRIES;
    o.tries = std::max(1, *options_.attempts);
  }
  if (options_.ndots) {
    mask |= ARES_OPT_NDOTS;
    o.ndots = std::max(0, *options_.ndots);
  }
  std::vector<char*> domains;
  if (options_.search) {
    for (const std::string& d : *options_.search) domains.push_back(const_cast<char*>(d.c_str()));
    mask |= ARES_OPT_DOMAINS;
    o.domains = domains.data();
    o.ndomains = static_cast<int>(domains.size());
  }
  if (const int s = ares_init_options(&channel_, &o, mask); s != ARES_SUCCESS) {
    channel_ = nullptr;
    return s == ARES_ENOMEM ? std::make_error_code(errc::not_enough_memory) : make_error_code(resolve_errc::bad_response);
  }
  ares_set_socket_functions(channel_, &socket_watchers::functions, &watchers_);
  if (!options_.servers.empty()) {
    std::string csv;
    for (const std::string& s : options_.servers) csv += (csv.empty() ? "" : ",") + s;
    if (ares_set_servers_ports_csv(channel_, csv.c_str()) != ARES_SUCCESS)
      return std::make_error_code(errc::invalid_argument);  // a server that is not an address
  }
  return {};
}

resolver::~resolver() {
  // Destroying the channel answers every query with ARES_EDESTRUCTION (its waiters are gone
  // with their frames, or get operation_canceled) and closes its sockets through forget().
  if (channel_ != nullptr) ares_destroy(channel_);
  watchers_.shutdown();  // the timer's poll too: then its descriptor may go
  if (timer_fd_ >= 0) close_descriptor(timer_fd_);
  if (this_thread_resolver == this) this_thread_resolver = nullptr;
}

void resolver::on_loop_shutdown(shutdown_hook& h) noexcept { delete static_cast<resolver*>(&h); }

bool resolver::start(lookup_waiter& w, std::string_view name, int family) {
  std::string normalized = normalized_name(name);
  lookup_answer& out = w.answer_;
  if (!is_valid_host_name(name)) {
    out.error = resolve_errc::bad_name;
    return true;
  }
  if (const auto* listed = hosts_.find(normalized)) {
    answer_from(*listed, family, out);
    return true;
  }
  if (is_localhost(normalized)) {
    answer_from({socket_address::ipv6_loopback(0), socket_address::ipv4_loopback(0)}, family, out);
    return true;
  }
  // A trailing dot makes the name absolute: c-ares must see it, or it would try the search list
  // first ("svc." would become svc.corp.example), and so must the cache key ("svc" and "svc."
  // are different lookups). The hosts file and localhost compare without it, as glibc does.
  const bool absolute = name.back() == '.';
  std::string key = lookup_key(normalized, absolute, family);
  if (const lookup_answer* cached = cache_.find(key, loop_now(*loop_))) {
    out = *cached;
    return true;
  }
  auto it = pending_.find(key);
  if (it != pending_.end()) {
    it->second->waiters.push_back(w);
    return false;
  }
  if (timer_fd_ < 0) {
    timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer_fd_ < 0) {
      out.error = errno_code(errno);  // EMFILE...: answered at once, nothing is in flight
      return true;
    }
  }
  auto q = std::make_unique<pending_query>();
  q->owner = this;
  q->key = key;
  q->waiters.push_back(w);
  pending_query* raw = q.get();
  pending_.emplace(std::move(key), std::move(q));
  ares_addrinfo_hints hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;  // one entry per address (not one per socket type)
  hints.ai_flags = ARES_AI_NOSORT;  // RFC 6724 sorting would open sockets of its own
  if (absolute) normalized.push_back('.');  // only here: a cached lookup copies nothing more
  ares_getaddrinfo(channel_, normalized.c_str(), nullptr, &hints, &resolver::on_answer, raw);
  rearm();
  return false;
}

void resolver::on_answer(void* arg, int status, int /*timeouts*/, ares_addrinfo* res) noexcept {
  auto& q = *static_cast<pending_query*>(arg);
  resolver& self = *q.owner;
  lookup_answer a;
  int ttl = INT_MAX;
  if (status == ARES_SUCCESS && res != nullptr) {
    // At most max_addresses_per_family, the first ones: what a server can make this core keep
    // (here, in every waiter's copy and in the cache) is bounded, and so is the duplicate check.
    for (ares_addrinfo_node* n = res->nodes; n != nullptr && a.addresses.size() < max_addresses_per_family;
         n = n->ai_next) {
      auto addr = socket_address::from_sockaddr(n->ai_addr, n->ai_addrlen);
      if (!addr) continue;
      addr->set_port(0);
      if (std::find(a.addresses.begin(), a.addresses.end(), *addr) == a.addresses.end()) a.addresses.push_back(*addr);
      ttl = std::min(ttl, n->ai_ttl);
    }
    for (ares_addrinfo_cname* c = res->cnames; c != nullptr; c = c->next) ttl = std::min(ttl, c->ttl);
    if (a.addresses.empty()) a.error = resolve_errc::no_data;
  } else {
    a.error = error_of(status);
  }
  if (res != nullptr) ares_freeaddrinfo(res);
  if (status != ARES_EDESTRUCTION) {
    const clock::time_point now = loop_now(*self.loop_);
    if (!a.error && ttl > 0)
      self.cache_.store(q.key, a, now + std::chrono::seconds(std::min(ttl, 86400)), now);
    else if (a.error == resolve_errc::not_found || a.error == resolve_errc::no_data)
      self.cache_.store(q.key, a, now + self.options_.negative_ttl, now);
  }
  self.deliver(q, a);
}

void resolver::deliver(pending_query& q, const lookup_answer& a) noexcept {
  q.waiters.drain([&](lookup_waiter& w) {
    w.answer_ = a;
    post(*loop_, w.posted_, w.done_);
  });
  const std::string key = q.key;  // erasing destroys q, key and all
  pending_.erase(key);
}

void resolver::on_socket_state(void* ctx, ares_socket_t fd, int readable, int writable) noexcept {
  static_cast<resolver*>(ctx)->watchers_.want(fd, readable != 0, writable != 0);
}

void resolver::on_socket_ready(void* ctx, ares_socket_t read_fd, ares_socket_t write_fd) noexcept {
  auto& self = *static_cast<resolver*>(ctx);
  if (read_fd == self.timer_fd_) {
    std::uint64_t expirations = 0;  // read, or the poll would find it readable again at once
    [[maybe_unused]] const ssize_t n = ::read(self.timer_fd_, &expirations, sizeof expirations);
    self.timer_set_ = false;
    read_fd = ARES_SOCKET_BAD;  // c-ares handles what timed out
  }
  ares_process_fd(self.channel_, read_fd, write_fd);
  self.rearm();
}

void resolver::rearm() noexcept {
  if (timer_fd_ < 0) return;  // no query was ever made
  timeval tv{};
  const bool waiting = ares_timeout(channel_, nullptr, &tv) != nullptr;
  // Nothing to wait for: no poll. An expiry still set then wakes nobody, or, polled again
  // later, c-ares once for nothing.
  watchers_.want(timer_fd_, waiting, false);
  if (!waiting) return;
  const auto due = std::chrono::steady_clock::now() + std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
  // Set only when c-ares wants waking sooner than the timer is set for (or it is not set): an
  // earlier expiry only wakes c-ares early, for nothing, and the timer is set again then. Most
  // events leave c-ares' earliest timeout where it was: no syscall for them.
  if (timer_set_ && timer_due_ <= due) return;
  const auto since_epoch = std::chrono::duration_cast<std::chrono::nanoseconds>(due.time_since_epoch()).count();
  itimerspec next{};
  next.it_value.tv_sec = static_cast<time_t>(since_epoch / 1'000'000'000);
  next.it_value.tv_nsec = static_cast<long>(since_epoch % 1'000'000'000);
  if (next.it_value.tv_sec == 0 && next.it_value.tv_nsec == 0) next.it_value.tv_nsec = 1;  // 0 would disarm
  ::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &next, nullptr);  // steady_clock: CLOCK_MONOTONIC
  timer_set_ = true;
  timer_due_ = due;
}

// --- lookup_waiter ---

bool lookup_waiter::start(std::string_view name, int family, continuation done) {
  done_ = done;
  answer_ = {};
  auto r = resolver::of_this_core();
  if (!r) {
    answer_.error = r.error();
    return true;
  }
  return (*r)->start(*this, name, family);
}

void lookup_waiter::detach() noexcept {
  list_link::unlink();
  posted_.unlink();
}

std::error_code combined_error(std::error_code v6, std::error_code v4) noexcept {
  if (v6 == resolve_errc::not_found || v4 == resolve_errc::not_found) return resolve_errc::not_found;
  if (v6 && v6 != resolve_errc::no_data) return v6;
  if (v4 && v4 != resolve_errc::no_data) return v4;
  return resolve_errc::no_data;
}

}  // namespace cogwheel::detail
