#include "connection.hpp"
#include "parked.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <charconv>

#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/timeout.hpp>
#include <cogwheel/runtime/when_all.hpp>

namespace cogwheel::redis::detail {

namespace {

constexpr clock::time_point never = clock::time_point::max();

std::error_code code_of_error_reply(std::string_view text) noexcept {
  auto starts = [&](std::string_view p) { return text.substr(0, p.size()) == p; };
  if (starts("WRONGTYPE")) return error::wrong_type;
  if (starts("NOSCRIPT")) return error::no_script;
  if (starts("BUSY")) return error::busy;
  if (starts("LOADING")) return error::loading;
  return error::server_error;
}

bool equals_nocase(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const char c = a[i] >= 'a' && a[i] <= 'z' ? static_cast<char>(a[i] - 'a' + 'A') : a[i];
    if (c != b[i]) return false;
  }
  return true;
}

// A command the FIFO of replies cannot follow: none at all (Redis answers nothing), or one
// after which the server sends more (or other) replies than commands.
bool shifts_replies(std::span<const command_arg> args) noexcept {
  if (args.empty()) return true;
  const std::string_view name = args[0].view();
  for (std::string_view c : {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE",
                             "SUNSUBSCRIBE", "MONITOR"}) {
    if (equals_nocase(name, c)) return true;
  }
  // HELLO 3 switches the connection to RESP3, which this client does not parse.
  return equals_nocase(name, "HELLO") && args.size() > 1 && args[1].view() != "2";
}

void append_header(std::string& out, char kind, std::size_t n) {
  char buf[24];
  out.push_back(kind);
  out.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, n).ptr - buf));
  out.append("\r\n", 2);
}

}  // namespace

connection::connection(client_options options)
    : options_(std::move(options)),
      reader_(options_.max_reply_bytes, options_.max_reply_elements, options_.max_reply_depth) {}

connection::~connection() {
  // Only at loop teardown can waiters remain (their frames are being destroyed too): unlink
  // them without resuming anyone.
  while (!waiters_.empty()) {
    waiter& w = waiters_.front();
    unlink(w);
    w.st = waiter::state::done;
  }
}

void connection::encode(std::span<const command_arg> args) {
  append_header(out_, '*', args.size());
  for (const command_arg& a : args) {
    const std::string_view v = a.view();
    append_header(out_, '$', v.size());
    out_.append(v);
    out_.append("\r\n", 2);
  }
}

std::coroutine_handle<> connection::submit(waiter& w, std::span<const command_arg> args,
                                           cogwheel::continuation c) {
  if (shifts_replies(args)) {
    w.st = waiter::state::done;
    w.outcome = std::make_error_code(errc::invalid_argument);
    return c.complete();
  }
  if (!connected_) {
    w.st = waiter::state::done;
    w.outcome = make_error_code(closing_ ? error::closed : error::not_connected);
    return c.complete();
  }
  encode(args);
  w.done = c;
  push(w);
  wake_writer();
  return std::noop_coroutine();
}

void connection::push(waiter& w) noexcept {
  w.st = waiter::state::queued;
  w.discards_before = std::exchange(trailing_discards_, 0);
  waiters_.push_back(w);
}

// w's reply, and the ones it was to skip, become discards of its successor.
void connection::unlink(waiter& w) noexcept {
  const std::uint32_t skip = w.discards_before + 1;
  if (waiter* next = waiters_.after(w); next != nullptr)
    next->discards_before += skip;
  else
    trailing_discards_ += skip;
  w.unlink();
}

void connection::finish_later(waiter& w, std::error_code outcome) noexcept {
  w.st = waiter::state::done;
  w.outcome = outcome;
  w.later.start(w.done);
}

void connection::cancel(waiter& w) noexcept {
  unlink(w);
  finish_later(w, make_error_code(errc::operation_canceled));
}

void connection::abandon(waiter& w) noexcept {
  unlink(w);
  w.st = waiter::state::done;
}

void connection::wake_writer() noexcept {
  wake(writer_idle_);
}

void connection::lose(std::error_code why) noexcept {
  if (!connected_) return;
  connected_ = false;
  if (const int fd = link_.socket(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  while (!waiters_.empty()) {
    waiter& w = waiters_.front();
    unlink(w);
    finish_later(w, why);
  }
  trailing_discards_ = 0;
  out_.clear();
  wake_writer();
}

void connection::close() noexcept {
  closing_ = true;
  lose(error::closed);
  wake(backoff_);
}

// Only a connection with subscriptions receives messages, and it sends no command whose reply
// could look like one (Redis allows it PING, whose reply is ["pong", x]). Elsewhere an array
// "message", channel, text is data (LRANGE of such a list) and goes to its command. A message
// without on_message is dropped: it is no reply, and taking it for one would drop the
// connection at each message.
bool connection::route_message(const reply& r) {
  if (options_.subscriptions.empty() || !r.is_array() || r.size() < 3) return false;
  const std::string_view kind = r[0].str();
  if (kind == "message" && r.size() == 3) {
    if (options_.on_message) options_.on_message(r[1].str(), r[2].str());
    return true;
  }
  if (kind == "pmessage" && r.size() == 4) {
    if (options_.on_message) options_.on_message(r[2].str(), r[3].str());
    return true;
  }
  return false;
}

void connection::dispatch(parsed_reply p) {
  reply& r = p.value;
  // An error reply alone is no proof of a working connection ("-ERR max number of clients").
  if (!r.is_error() && !p.skipped) got_reply_ = true;
  if (route_message(r)) return;
  if (waiters_.empty()) {
    if (trailing_discards_ == 0) return lose(error::unexpected_reply);
    --trailing_discards_;
    ++stats_.discarded_replies;
    return;
  }
  if (waiters_.front().discards_before > 0) {
    --waiters_.front().discards_before;
    ++stats_.discarded_replies;
    return;
  }
  waiter& w = waiters_.pop_front();
  w.st = waiter::state::done;
  if (p.skipped) {
    w.outcome = p.skipped;
  } else if (r.is_error()) {
    w.outcome = code_of_error_reply(r.str());
  } else {
    w.outcome = std::move(r);
  }
  // Inline: the waiter runs until its next suspension, then the reader goes on. The session
  // frame holds a reference to *this, so whatever the waiter does, *this outlives this call.
  w.done.complete().resume();
}

task<void> connection::read_loop() {
  std::array<char, 16384> buf;
  while (connected_) {
    const std::span<std::byte> into = std::as_writable_bytes(std::span(buf));
    // Two awaits, not a helper task: a plain read allocates no coroutine frame.
    result<std::size_t> n = std::size_t{0};
#if COGWHEEL_REDIS_TLS
    if (link_.secure.is_open())
      n = co_await link_.secure.read(into);
    else
#endif
      n = co_await link_.plain.read(into);
    if (!n || *n == 0) {
      lose(n ? std::error_code(error::connection_lost) : n.error());
      break;
    }
    if (std::error_code ec = reader_.feed(std::span<const char>(buf.data(), *n))) {
      lose(ec);
      break;
    }
    while (connected_) {
      auto r = reader_.next();
      if (!r) {
        lose(r.error());
        break;
      }
      if (!r->has_value()) break;
      dispatch(std::move(**r));
    }
  }
}

task<void> connection::write_loop() {
  while (connected_) {
    if (out_.empty()) {
      sleep_operation idle(never);
      parked p(writer_idle_, idle);
      co_await idle;
      continue;
    }
    writing_.swap(out_);
    const std::span<const std::byte> bytes = std::as_bytes(std::span(writing_.data(), writing_.size()));
    result<void> r;
#if COGWHEEL_REDIS_TLS
    if (link_.secure.is_open())
      r = co_await link_.secure.write_all(bytes);
    else
#endif
      r = co_await link_.plain.write_all(bytes);
    writing_.clear();
    if (!r) lose(r.error());
  }
}

task<result<void>> connection::open() {
  auto s = co_await with_timeout(establish(options_), options_.connect_timeout);
  if (!s) {
    ++stats_.connect_failures;
    co_return s.error();
  }
  link_ = std::move(*s);
  link_.set_nodelay();
  reader_.reset();
  connected_ = true;
  got_reply_ = false;
  ++stats_.connects;
  for (const std::string& ch : options_.subscriptions) {
    const std::array<command_arg, 2> args{command_arg("SUBSCRIBE"), command_arg(ch)};
    encode(args);
    ++trailing_discards_;  // the confirmation
  }
  co_return result<void>();
}

task<result<void>> connection::start() {
  auto r = co_await open();
  if (r) spawn(session(shared_from_this()));
  co_return r;
}

task<void> connection::session(std::shared_ptr<connection> self) {
  (void)self;  // held only to keep *this alive while the session runs
  auto backoff = options_.reconnect_initial;
  for (;;) {
    co_await when_all(read_loop(), write_loop());
    link_.close();
    if (got_reply_) backoff = options_.reconnect_initial;
    for (;;) {
      if (closing_) co_return;
      {
        sleep_operation pause = sleep_for(backoff);
        parked p(backoff_, pause);
        co_await pause;
      }
      if (closing_) co_return;
      backoff = std::min(backoff * 2, options_.reconnect_max);
      if (co_await open()) break;
    }
  }
}

std::coroutine_handle<> submit(connection* conn, waiter& w, std::span<const command_arg> args,
                               cogwheel::continuation c) {
  if (conn == nullptr) {
    w.st = waiter::state::done;
    w.outcome = make_error_code(error::closed);
    return c.complete();
  }
  return conn->submit(w, args, c);
}
void cancel_waiter(connection* conn, waiter& w) noexcept { conn->cancel(w); }
void abandon(connection* conn, waiter& w) noexcept { conn->abandon(w); }

}  // namespace cogwheel::redis::detail
