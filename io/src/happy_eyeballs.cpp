// tcp_stream::connect(host, port, options): Happy Eyeballs v2 (RFC 8305).
//
//   - AAAA and A are asked at once (the core's resolver: hosts file, cache, c-ares).
//   - Addresses are tried in turn, alternating families, the preferred one first. If A comes
//     first, IPv4 waits up to resolution_delay for AAAA (§3). Addresses arriving late join the
//     queue.
//   - Each attempt has attempt_delay alone; then the next starts beside it (§5). An attempt that
//     fails starts the next at once.
//   - The first connection wins; every other attempt is stopped and its socket closed before
//     connect() returns. When all fail, the last connection error (or, with no address at all,
//     the resolver's) is returned.
//
// Shape: a chain of two-way races. race_from() takes the next address and runs
// when_any(attempt(address), after_delay()), where after_delay() waits attempt_delay (or for
// the attempt's failure) and then runs race_from() again for the rest. A branch that fails
// waits (parked) until its sibling settles, so a level ends at the first success, or once both
// of its branches failed. The whole chain runs under the caller's stop source: a timeout around
// connect() stops every attempt and lookup, and their sockets are closed before it returns.
#include <cogwheel/io/tcp.hpp>

#include <sys/socket.h>

#include <coroutine>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <cogwheel/io/resolve.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/time.hpp>
#include <cogwheel/runtime/timeout.hpp>
#include <cogwheel/runtime/when_any.hpp>

#include "resolver.hpp"

namespace cogwheel {

namespace {

// A wake-up for one waiter: notify() completes the waiting wait() at the next iteration, or,
// when none waits, makes the next wait() complete at once.
class signal_event {
 public:
  class wait_operation : public operation<wait_operation> {
   public:
    explicit wait_operation(signal_event& e) noexcept : event_(&e) {}
    wait_operation(wait_operation&& o) noexcept : operation(std::move(o)), event_(o.event_) {}
    ~wait_operation() {
      if (event_->waiter_ == this) event_->waiter_ = nullptr;
    }
    std::coroutine_handle<> start(continuation c) {
      if (event_->pending_) {
        event_->pending_ = false;
        return c.complete();
      }
      continuation_ = c;
      event_->waiter_ = this;
      return std::noop_coroutine();
    }
    void cancel() noexcept {
      if (event_->waiter_ != this) return;
      event_->waiter_ = nullptr;
      later_.post(continuation_);
    }
    void result() noexcept {}

   private:
    friend class signal_event;
    signal_event* event_;
    continuation continuation_;
    resume_later later_;
  };

  signal_event() noexcept = default;
  signal_event(const signal_event&) = delete;
  signal_event& operator=(const signal_event&) = delete;

  void notify() noexcept {
    if (wait_operation* w = std::exchange(waiter_, nullptr))
      w->later_.post(w->continuation_);
    else
      pending_ = true;
  }
  // Precondition: the event outlives the operation.
  wait_operation wait() noexcept { return wait_operation(*this); }

 private:
  wait_operation* waiter_ = nullptr;
  bool pending_ = false;
};

// One connection attempt, optionally from a local address: socket(), bind(), then the connect
// request on the loop. Owns the socket until it is handed over in the result.
class attempt_operation : public detail::kernel_operation<attempt_operation, cogwheel::result<tcp_stream>> {
 public:
  attempt_operation(const socket_address& to, const std::optional<socket_address>& local) noexcept
      : to_(to), local_(local) {}
  attempt_operation(attempt_operation&& o) noexcept
      : kernel_operation(std::move(o)), to_(o.to_), local_(o.local_), fd_(std::exchange(o.fd_, -1)), socket_(o.socket_) {}
  ~attempt_operation() {
    cancel_and_wait();
    if (fd_ >= 0) detail::close_descriptor(fd_);
  }

  std::coroutine_handle<> start(continuation c) {
    fd_ = ::socket(to_.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    socket_ = detail::new_socket_identity();
    if (fd_ < 0 || (local_ && ::bind(fd_, local_->data(), local_->size()) < 0)) {
      error_ = errno;
      return c.complete();
    }
    return kernel_operation::start(c);
  }
  void prepare(detail::io_request& req) noexcept {
    req.set(detail::io_opcode::connect, fd_, to_.data(), to_.size());
    req.socket = socket_;
  }
  cogwheel::result<tcp_stream> make_result(int res) {
    if (error_ == 0 && res >= 0) return detail::connected_stream(std::exchange(fd_, -1), socket_);
    if (fd_ >= 0) detail::close_descriptor(std::exchange(fd_, -1));
    return errno_code(error_ != 0 ? error_ : res);
  }

 private:
  socket_address to_;
  std::optional<socket_address> local_;
  int fd_ = -1;
  int error_ = 0;
  std::uint64_t socket_ = 0;  // fd_'s identity (io_request::socket), kept by the stream
};

int family_of(ip_family f) noexcept { return f == ip_family::ipv6 ? AF_INET6 : AF_INET; }

class eyeballs {
 public:
  eyeballs(std::string host, std::uint16_t port, const connect_options& o) noexcept
      : host_(std::move(host)), port_(port), options_(o), preferred_(family_of(o.prefer_family)) {}
  eyeballs(const eyeballs&) = delete;
  eyeballs& operator=(const eyeballs&) = delete;

  task<result<tcp_stream>> run() {
    const int only = options_.local_address ? options_.local_address->family() : 0;
    for (family& f : families_) {
      if (only != 0 && f.id != only) {
        f.done = true;  // not asked: it counts as having no address
      } else if (f.lookup.start(host_, f.id, continuation(&eyeballs::on_answer, &f))) {
        take(f);
      }
    }
    co_return co_await race_from();
  }

 private:
  struct family {
    eyeballs* race;
    int id;
    detail::lookup_waiter lookup;
    std::vector<socket_address> queue;
    std::size_t next = 0;
    bool done = false;
    std::error_code error;
    clock::time_point answered{};
  };
  // Both branches of one level of the race.
  struct level {
    int failed = 0;
    signal_event attempt_failed;
  };

  family& of(int id) noexcept { return families_[id == AF_INET6 ? 0 : 1]; }

  static std::coroutine_handle<> on_answer(void* p) noexcept {
    auto& f = *static_cast<family*>(p);
    f.race->take(f);
    return std::noop_coroutine();
  }
  void take(family& f) {
    f.done = true;
    f.answered = now();
    f.error = f.lookup.answer().error;
    for (socket_address a : f.lookup.answer().addresses) {
      a.set_port(port_);
      f.queue.push_back(a);
    }
    changed_.notify();
  }

  // RFC 8305 §3: while AAAA is pending and nothing has started, IPv4 waits resolution_delay.
  bool holding_ipv4() const noexcept {
    return !started_ && preferred_ == AF_INET6 && !families_[0].done && !resolution_delay_over_;
  }
  std::optional<socket_address> next_address() {
    const int first = last_family_ == 0 ? preferred_ : (last_family_ == AF_INET6 ? AF_INET : AF_INET6);
    for (int id : {first, first == AF_INET6 ? AF_INET : AF_INET6}) {
      family& f = of(id);
      if (f.next == f.queue.size() || (id == AF_INET && holding_ipv4())) continue;
      started_ = true;
      last_family_ = id;
      return f.queue[f.next++];
    }
    return std::nullopt;
  }
  std::error_code final_error() const {
    if (last_connect_error_) return last_connect_error_;
    return detail::combined_error(families_[0].error, families_[1].error);
  }

  // The race over every address not yet tried: a stream, or the error once all have failed.
  task<result<tcp_stream>> race_from() {
    for (;;) {
      if (std::optional<socket_address> a = next_address()) {
        level l;
        auto r = co_await when_any(attempt(*a, l), after_delay(l));
        co_return std::visit([](result<tcp_stream>& v) { return std::move(v); }, r.value);
      }
      if (families_[0].done && families_[1].done) co_return final_error();
      if (holding_ipv4() && !of(AF_INET).queue.empty()) {
        auto w = co_await with_deadline(changed_.wait(), of(AF_INET).answered + options_.resolution_delay);
        if (!w && w.error() == errc::timed_out) resolution_delay_over_ = true;
      } else {
        co_await changed_.wait();
      }
      if (co_await stop_requested()) co_return errc::operation_canceled;
    }
  }

  task<result<tcp_stream>> attempt(socket_address to, level& l) {
    auto r = co_await attempt_operation(to, options_.local_address);
    if (r) co_return r;
    if (r.error() != errc::operation_canceled) last_connect_error_ = r.error();
    co_return co_await settle(std::move(r), l);
  }

  task<result<tcp_stream>> after_delay(level& l) {
    (void)co_await with_timeout(l.attempt_failed.wait(), options_.attempt_delay);
    if (co_await stop_requested()) co_return errc::operation_canceled;
    auto r = co_await race_from();
    if (r) co_return r;
    co_return co_await settle(std::move(r), l);
  }

  // A branch that failed: the second failure of a level ends it; the first waits, parked,
  // until its sibling settles (a success stops it; a failure ends the level).
  task<result<tcp_stream>> settle(result<tcp_stream> failure, level& l) {
    if (++l.failed == 2) co_return failure;
    l.attempt_failed.notify();  // for after_delay: no need to wait out the delay
    signal_event never;
    co_await never.wait();  // until stopped: by the sibling's success, or from above
    co_return errc::operation_canceled;  // not `failure`: a timeout above must read as one
  }

  std::string host_;
  std::uint16_t port_;
  connect_options options_;
  int preferred_;
  family families_[2] = {{this, AF_INET6, {}, {}, 0, false, {}, {}}, {this, AF_INET, {}, {}, 0, false, {}, {}}};
  signal_event changed_;  // an answer arrived
  bool started_ = false;
  bool resolution_delay_over_ = false;
  int last_family_ = 0;
  std::error_code last_connect_error_;
};

}  // namespace

task<result<tcp_stream>> tcp_stream::connect(std::string host, std::uint16_t port, connect_options options) {
  std::string_view numeric = host;
  if (numeric.size() > 2 && numeric.front() == '[' && numeric.back() == ']') numeric = numeric.substr(1, numeric.size() - 2);
  if (auto a = socket_address::from_ip(numeric, port)) {
    if (options.local_address && options.local_address->family() != a->family())
      co_return errc::address_family_not_supported;
    co_return co_await attempt_operation(*a, options.local_address);
  }
  eyeballs race(std::move(host), port, options);
  co_return co_await race.run();
}

}  // namespace cogwheel
