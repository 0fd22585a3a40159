#include "http_server_exchange.hpp"

#include <algorithm>
#include <cstring>

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

exchange::then exchange::process() {
  while (begin_ < end_) {
    const auto step = parser_.feed({reinterpret_cast<const char*>(buf_.get()) + begin_, end_ - begin_});
    begin_ += step.consumed;
    switch (step.what) {
      case request_parser::event::need_more:
        break;
      case request_parser::event::head_done: {
        const http_method m = parser_.method();
        const bool root = parser_.path() == "/";
        route_ = root && m == HTTP_GET                    ? route::fixed
                 : root && m == HTTP_HEAD                 ? route::fixed_head
                 : parser_.path() == "/echo" && m == HTTP_POST ? route::echo
                 : parser_.path() == "/metrics" && m == HTTP_GET ? route::metrics
                                                                 : route::not_found;
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
        if (output().size() >= max_pending_output && begin_ < end_) return then::more;
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
  begin_ = end_ = 0;
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
