#include "http_server_exchange.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include <cogwheel/runtime/prometheus.hpp>

namespace http_example {

namespace {

// The buffer of a connection in the middle of a body (or with more waiting than the idle
// buffer holds): large enough that a body costs few reads, small enough for many connections.
constexpr std::size_t busy_buffer_bytes = 16 * 1024;
// Pipelined requests are answered until this much output waits; the rest are parsed after it
// is written, so a client that pipelines many requests and reads slowly (slow read) holds at
// most one such batch of the server's memory, not a response per request it sent.
constexpr std::size_t max_pending_output = 64 * 1024;

connection_header header_for(const request_parser& p) noexcept {
  if (!p.keep_alive()) return connection_header::close;
  return p.keep_alive_needs_saying() ? connection_header::keep_alive : connection_header::none;
}

}  // namespace

exchange::exchange(const server_config& cfg, server_stats& stats)
    : cfg_(cfg),
      stats_(stats),
      parser_(parser_limits{.max_header_bytes = cfg.max_header_bytes, .max_body_bytes = cfg.max_body_bytes}) {}

namespace {

// Memory of exchanges not in use, per core (a connection touches only its own core's): a
// connection between requests gives its exchange back, the next request on any connection of
// the core takes it. Bounded, so that a wave of busy connections does not pin its peak.
constexpr std::size_t max_cached_exchanges = 1024;
thread_local std::vector<void*> cached_exchanges;

struct exchange_cache_owner {
  ~exchange_cache_owner() {
    for (void* p : cached_exchanges) ::operator delete(p);
  }
};
thread_local exchange_cache_owner cache_owner;

}  // namespace

void exchange::recycle::operator()(exchange* e) const noexcept {
  e->~exchange();
  (void)&cache_owner;  // odr-use: the thread's cache is freed at its exit
  if (cached_exchanges.size() < max_cached_exchanges) {
    try {
      cached_exchanges.push_back(e);
      return;
    } catch (...) {  // no room to remember it: free it
    }
  }
  ::operator delete(e);
}

std::unique_ptr<exchange, exchange::recycle> exchange::acquire(const server_config& cfg, server_stats& stats) {
  void* p;
  if (!cached_exchanges.empty()) {
    p = cached_exchanges.back();
    cached_exchanges.pop_back();
  } else {
    p = ::operator new(sizeof(exchange));
  }
  return std::unique_ptr<exchange, recycle>(new (p) exchange(cfg, stats));
}

exchange::route exchange::route_for(http_method m, std::string_view path) noexcept {
  const bool root = path == "/";
  return root && m == HTTP_GET                    ? route::fixed
         : root && m == HTTP_HEAD                 ? route::fixed_head
         : path == "/echo" && m == HTTP_POST      ? route::echo
         : path == "/metrics" && m == HTTP_GET    ? route::metrics
                                                  : route::not_found;
}

exchange::then exchange::process(std::span<const std::byte> fresh) {
  if (begin_ < end_) {  // bytes left from before (a pipeline cut short for its output): after them
    const std::size_t held = end_ - begin_;
    if (cap_ - end_ < fresh.size()) {
      auto bigger = std::make_unique<std::byte[]>(held + fresh.size());
      std::memcpy(bigger.get(), buf_.get() + begin_, held);
      buf_ = std::move(bigger);
      cap_ = held + fresh.size();
      begin_ = 0;
      end_ = held;
    }
    std::memcpy(buf_.get() + end_, fresh.data(), fresh.size());
    end_ += fresh.size();
    return process();
  }
  std::size_t begin = 0;
  const then next = parse(fresh.data(), begin, fresh.size());
  if (begin < fresh.size()) {  // kept for after this output is written
    const std::size_t rest = fresh.size() - begin;
    if (cap_ < rest) {
      buf_ = std::make_unique<std::byte[]>(rest);
      cap_ = rest;
    }
    std::memcpy(buf_.get(), fresh.data() + begin, rest);
    begin_ = 0;
    end_ = rest;
  }
  return next;
}

exchange::then exchange::process() {
  const then next = parse(buf_.get(), begin_, end_);
  if (next == then::read) begin_ = end_ = 0;
  return next;
}

exchange::then exchange::parse(const std::byte* data, std::size_t& begin, std::size_t end) {
  while (begin < end) {
    const std::string_view rest(reinterpret_cast<const char*>(data) + begin, end - begin);
    // Most requests: a simple head (no body) in one step, the same route and answer as through
    // the events below (a GET or HEAD: no body to keep, no 100-continue, always keep-alive).
    if (const std::size_t taken = parser_.take_simple_request(rest); taken != 0) {
      begin += taken;
      route_ = route_for(parser_.method(), parser_.path());
      ++stats_.requests;
      ++answered_;
      // A lone GET /: the pre-built answer, referenced (respond() does the same, less directly;
      // a simple request is HTTP/1.1 keep-alive, which says nothing in its answer).
      if (route_ == route::fixed && !solo_ && out_.empty()) solo_ = fixed_response(cfg_, connection_header::none);
      else respond();
      if (output().size() >= max_pending_output && begin < end) return then::more;
      continue;
    }
    const auto step = parser_.feed(rest);
    begin += step.consumed;
    switch (step.what) {
      case request_parser::event::need_more:
        break;
      case request_parser::event::head_done: {
        route_ = route_for(parser_.method(), parser_.path());
        parser_.keep_body(route_ == route::echo);
        if (parser_.expects_continue() && parser_.has_body()) {
          unshare();
          append_continue(out_);
        }
        break;
      }
      case request_parser::event::message_done:
        ++stats_.requests;
        ++answered_;
        respond();
        if (!parser_.keep_alive()) return then::close;
        if (output().size() >= max_pending_output && begin < end) return then::more;
        break;
      case request_parser::event::failed: {
        const int status = parser_.status();
        switch (status) {
          case 413: ++stats_.status_413; break;
          case 431: ++stats_.status_431; break;
          case 501: ++stats_.status_501; break;
          default: ++stats_.status_400; break;
        }
        append(status, {}, connection_header::close);
        return then::linger;
      }
    }
  }
  return then::read;
}

void exchange::respond() {
  const connection_header how = header_for(parser_);
  switch (route_) {
    case route::fixed:
      if (!solo_ && out_.empty()) {
        solo_ = fixed_response(cfg_, how);
        return;
      }
      append_raw(fixed_response(cfg_, how).bytes());  // a pipelined response joins the others
      return;
    case route::fixed_head: {
      const shared_response r = fixed_response(cfg_, how);
      const std::string_view whole = r.bytes();
      append_raw(whole.substr(0, whole.find("\r\n\r\n") + 4));
      return;
    }
    case route::echo:
      append(200, parser_.body(), how);
      return;
    case route::metrics:  // every core of the runtime, in Prometheus's text format
      append(200, cogwheel::to_prometheus(cogwheel::snapshot_metrics()), how);
      return;
    case route::not_found:
      ++stats_.status_404;
      append(404, {}, how);
      return;
  }
}

void exchange::append(int status, std::string_view body, connection_header how) {
  unshare();
  append_response(out_, status, body, how);
}

void exchange::append_raw(std::string_view bytes) {
  unshare();
  out_ += bytes;
}

void exchange::unshare() {
  if (solo_) {
    out_.assign(solo_.bytes());
    solo_.release();
  }
}

std::span<std::byte> exchange::read_space() {
  std::size_t want = cap_;
  // A body starts in the small buffer too: a slow-body client (one that trickles its body) then
  // holds 1 KiB, not 16; a fast one fills it at once and gets the large buffer from its next read.
  if (filled_) want = std::max(cap_, busy_buffer_bytes);
  else if (!parser_.in_message() && begin_ == end_) want = cfg_.idle_buffer_bytes;
  if (want != cap_ || !buf_) {
    auto bigger = std::make_unique<std::byte[]>(want);
    if (end_ > begin_) std::memcpy(bigger.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    buf_ = std::move(bigger);
    cap_ = want;
  } else if (begin_ > 0) {
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  return {buf_.get() + end_, cap_ - end_};
}

std::span<const std::byte> exchange::output() const noexcept {
  if (solo_) return std::as_bytes(std::span(solo_.bytes()));
  return std::as_bytes(std::span(out_));
}

void exchange::output_sent() noexcept {
  solo_.release();
  out_.clear();
}

}  // namespace http_example
