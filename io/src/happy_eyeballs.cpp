// tcp_stream::connect(host, port, options): Happy Eyeballs v2 (RFC 8305).
//
//   - AAAA and A are asked at once (the core's resolver: hosts file, cache, c-ares).
//   - Addresses are tried in turn, alternating families, the preferred one first. If A comes
//     first, IPv4 waits up to resolution_delay for AAAA (§3). Addresses arriving late join the
//     queue.
//   - Each attempt has attempt_delay alone; then the next starts beside it (§5). When the newest
//     attempt fails, the next starts at once (an older one failing changes nothing).
//   - The first connection wins; every other attempt is stopped and its socket closed before
//     connect() returns. When all fail, the last connection error (or, with no address at all,
//     the resolver's) is returned.
//
// Shape: one loop, run(), owns every attempt in flight (a slot each, from the frame pool) and
// waits on one wake-up: an attempt ended, an answer arrived, or the attempt (or resolution)
// delay ran out. An attempt's completion records itself in its slot and resumes the loop by
// symmetric transfer, so the coroutine depth and the C++ stack of a completion are the same for
// one address as for thousands, whether attempts are refused, fail inside start(), hang, or are
// cut. A stop (a timeout or deadline scope around connect(), or the caller's caller stopped)
// ends the loop's wait; the loop then cancels every attempt and waits, uncancellably, until
// each has completed and its socket is closed. A success that raced the stop is returned.
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
#include <cogwheel/runtime/detail/frame_pool.hpp>

#include "resolver.hpp"

namespace cogwheel {

namespace {

// The race loop's wake-up: notify() returns the coroutine to run next (the waiting loop, or
// none), for a completion callback to transfer to. When nothing waits, the next wait completes
// at once: a notification is never lost, and a spurious one costs one pass of the loop.
class wakeup {
 public:
  // A cancellable wait (with_deadline, and the caller's stop, reach it).
  class wait_operation : public operation<wait_operation> {
   public:
    explicit wait_operation(wakeup& w) noexcept : wakeup_(&w) {}
    wait_operation(wait_operation&& o) noexcept : operation(std::move(o)), wakeup_(o.wakeup_) {}
    ~wait_operation() {
      if (wakeup_->waiter_ == this) wakeup_->waiter_ = nullptr;
    }
    std::coroutine_handle<> start(continuation c) {
      if (std::exchange(wakeup_->pending_, false)) return c.complete();
      continuation_ = c;
      wakeup_->waiter_ = this;
      return std::noop_coroutine();
    }
    void cancel() noexcept {
      if (wakeup_->waiter_ != this) return;
      wakeup_->waiter_ = nullptr;
      later_.post(continuation_);
    }
    void result() noexcept {}

   private:
    friend class wakeup;
    wakeup* wakeup_;
    continuation continuation_;
    resume_later later_;
  };

  // An uncancellable wait, for the end of the race (everything is already cancelled).
  struct drain_awaiter {
    wakeup& w;
    bool await_ready() const noexcept { return std::exchange(w.pending_, false); }
    void await_suspend(std::coroutine_handle<> h) noexcept { w.drainer_ = h; }
    void await_resume() const noexcept {}
  };

  wakeup() noexcept = default;
  wakeup(const wakeup&) = delete;
  wakeup& operator=(const wakeup&) = delete;

  [[nodiscard]] std::coroutine_handle<> notify() noexcept {
    if (wait_operation* w = std::exchange(waiter_, nullptr)) return w->continuation_.complete();
    if (drainer_) return std::exchange(drainer_, nullptr);
    pending_ = true;
    return std::noop_coroutine();
  }
  // Precondition: the wakeup outlives the operation.
  wait_operation wait() noexcept { return wait_operation(*this); }
  drain_awaiter drain() noexcept { return drain_awaiter{*this}; }

 private:
  wait_operation* waiter_ = nullptr;
  std::coroutine_handle<> drainer_;
  bool pending_ = false;
};

// The stop source of the awaiting task's chain (null: none), read once; never suspends.
struct own_stop_source {
  detail::stop_source* stop = nullptr;
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) noexcept {
    stop = detail::stop_source_of(h);
    return false;
  }
  detail::stop_source* await_resume() const noexcept { return stop; }
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
  // Only when the frame is destroyed mid-race: each attempt's destructor cancels and waits.
  ~eyeballs() {
    for (slot* s : slots_) delete s;
  }

  task<result<tcp_stream>> run() {
    detail::stop_source* const stop = co_await own_stop_source{};
    const int only = options_.local_address ? options_.local_address->family() : 0;
    for (family& f : families_) {
      if (only != 0 && f.id != only) {
        f.done = true;  // not asked: it counts as having no address
      } else if (f.lookup.start(host_, f.id, continuation(&eyeballs::on_answer, &f))) {
        (void)take(f);  // nothing waits yet: the wake-up stays pending
      }
    }
    // Invariant at the top of each pass: every attempt that completed is in finished_, and the
    // loop is the only one to take from it.
    result<tcp_stream> outcome = errc::operation_canceled;
    for (;;) {
      bool won = false;
      while (slot* s = take_finished()) {
        result<tcp_stream> r = s->op.result();
        const bool was_latest = s == latest_;
        release(s);
        if (r) {
          outcome = std::move(r);
          won = true;
          break;
        }
        if (r.error() != errc::operation_canceled) last_connect_error_ = r.error();
        if (was_latest) latest_ = nullptr;  // the newest attempt failed: the next starts at once
      }
      if (won || (stop != nullptr && detail::must_not_start(*stop))) break;
      if (latest_ == nullptr || attempt_delay_over_ || now() >= latest_started_ + options_.attempt_delay) {
        if (std::optional<socket_address> a = next_address()) {
          start_attempt(*a);
          continue;  // it may have failed inside start(): harvest first
        }
      }
      if (slots_.empty() && families_[0].done && families_[1].done && !has_address()) {
        outcome = final_error();
        break;
      }
      // What may end the wait early besides the wake-up: the newest attempt's time alone, or,
      // before any attempt, IPv4's wait for AAAA.
      result<void> w;
      if (latest_ != nullptr && !attempt_delay_over_) {
        w = co_await with_deadline(wake_.wait(), latest_started_ + options_.attempt_delay);
        if (!w && w.error() == errc::timed_out) attempt_delay_over_ = true;
      } else if (holding_ipv4() && !of(AF_INET).queue.empty()) {
        w = co_await with_deadline(wake_.wait(), of(AF_INET).answered + options_.resolution_delay);
        if (!w && w.error() == errc::timed_out) resolution_delay_over_ = true;
      } else {
        co_await wake_.wait();
      }
      if (!w && w.error() == errc::operation_canceled) break;  // cut from above
    }
    // Losers (all of them, when cut): cancelled, then awaited until each has completed and
    // closed its socket. A success that raced the cut is kept (with_timeout's rule: a value is
    // never lost); a later one is dropped, its stream closed.
    for (slot* s : slots_) s->op.cancel();
    for (;;) {
      while (slot* s = take_finished()) {
        result<tcp_stream> r = s->op.result();
        release(s);
        if (r && !outcome) outcome = std::move(r);
      }
      if (slots_.empty()) break;
      co_await wake_.drain();
    }
    co_return outcome;
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
  // One attempt in flight, or completed and not yet taken by the loop.
  struct slot {
    slot(eyeballs& e, const socket_address& to, const std::optional<socket_address>& local) noexcept
        : race(&e), op(to, local) {}
    static void* operator new(std::size_t n) { return detail::allocate_frame(n); }
    static void operator delete(void* p, std::size_t n) noexcept { detail::free_frame(p, n); }

    eyeballs* race;
    attempt_operation op;
    std::size_t index = 0;        // in race->slots_
    slot* next_finished = nullptr;  // in race->finished_
  };

  family& of(int id) noexcept { return families_[id == AF_INET6 ? 0 : 1]; }

  static std::coroutine_handle<> on_answer(void* p) noexcept {
    auto& f = *static_cast<family*>(p);
    return f.race->take(f);
  }
  [[nodiscard]] std::coroutine_handle<> take(family& f) {
    f.done = true;
    f.answered = now();
    f.error = f.lookup.answer().error;
    for (socket_address a : f.lookup.answer().addresses) {
      a.set_port(port_);
      f.queue.push_back(a);
    }
    return wake_.notify();
  }

  // An attempt's completion (from the backend, or inside start()): queued for the loop, which
  // runs next if it is waiting. Nothing else runs here, so the stack is one completion deep.
  static std::coroutine_handle<> on_attempt_done(void* p) noexcept {
    auto& s = *static_cast<slot*>(p);
    eyeballs& e = *s.race;
    if (e.finished_tail_ != nullptr)
      e.finished_tail_->next_finished = &s;
    else
      e.finished_head_ = &s;
    e.finished_tail_ = &s;
    return e.wake_.notify();
  }
  slot* take_finished() noexcept {
    slot* s = finished_head_;
    if (s == nullptr) return nullptr;
    finished_head_ = s->next_finished;
    if (finished_head_ == nullptr) finished_tail_ = nullptr;
    return s;
  }

  void start_attempt(const socket_address& to) {
    slots_.reserve(slots_.size() + 1);  // may throw here, not after the attempt began
    auto* s = new slot(*this, to, options_.local_address);
    s->index = slots_.size();
    slots_.push_back(s);
    latest_ = s;
    latest_started_ = now();
    attempt_delay_over_ = false;
    // The loop is running, so a completion inside start() finds no waiter: it returns no
    // coroutine to run (the wake-up stays pending), and the loop harvests it next.
    (void)s->op.start(continuation(&eyeballs::on_attempt_done, s));
  }
  void release(slot* s) noexcept {
    slot* last = slots_.back();
    slots_[s->index] = last;
    last->index = s->index;
    slots_.pop_back();
    delete s;
  }

  // RFC 8305 §3: while AAAA is pending and nothing has started, IPv4 waits resolution_delay.
  bool holding_ipv4() const noexcept {
    return !started_ && preferred_ == AF_INET6 && !families_[0].done && !resolution_delay_over_;
  }
  bool has_address() const noexcept {
    return families_[0].next != families_[0].queue.size() || families_[1].next != families_[1].queue.size();
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

  std::string host_;
  std::uint16_t port_;
  connect_options options_;
  int preferred_;
  family families_[2] = {{this, AF_INET6, {}, {}, 0, false, {}, {}}, {this, AF_INET, {}, {}, 0, false, {}, {}}};
  wakeup wake_;  // an attempt ended, or an answer arrived
  std::vector<slot*> slots_;  // every attempt not yet taken by the loop (owned)
  slot* finished_head_ = nullptr;  // completed attempts, oldest first
  slot* finished_tail_ = nullptr;
  slot* latest_ = nullptr;  // the newest attempt while it is in flight (the delay runs from it)
  clock::time_point latest_started_{};
  bool attempt_delay_over_ = false;
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
