#include "http_server_response.hpp"

#include <ctime>

namespace http_example {

namespace {

std::string_view reason(int status) noexcept {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 408: return "Request Time-out";
    case 413: return "Request Entity Too Large";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    default: return "Unknown";
  }
}

// The Date header's value for the current second, reformatted only when the second changes.
struct date_cache {
  std::time_t second = -1;
  char text[40] = {};

  bool refresh() noexcept {
    const std::time_t now = std::time(nullptr);
    if (now == second) return false;
    second = now;
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return true;
  }
};

thread_local date_cache date;

void append_head(std::string& out, int status, std::size_t length, connection_header how) {
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += reason(status);
  out += "\r\nServer: cogwheel\r\nDate: ";
  out += date.text;
  out += "\r\nContent-Type: text/plain\r\nContent-Length: ";
  out += std::to_string(length);
  if (how == connection_header::close) out += "\r\nConnection: close";
  if (how == connection_header::keep_alive) out += "\r\nConnection: keep-alive";
  out += "\r\n\r\n";
}

}  // namespace

std::string fixed_body(std::size_t bytes) {
  static constexpr std::string_view text = "Hello, World!\n";
  std::string body;
  body.reserve(bytes);
  while (body.size() < bytes) body += text.substr(0, bytes - body.size());
  return body;
}

shared_response rebuild_fixed_response(fixed_response_cache& c, const server_config& cfg, connection_header how) {
  date.refresh();
  if (c.cfg != &cfg || c.body_bytes != cfg.body_bytes || c.second != date.second) {
    if (c.cfg != &cfg || c.body_bytes != cfg.body_bytes) c.body = fixed_body(cfg.body_bytes);
    c.cfg = &cfg;
    c.body_bytes = cfg.body_bytes;
    c.second = date.second;
    for (int h = 0; h < 3; ++h) {
      auto* b = new response_block;
      append_head(b->bytes, 200, c.body.size(), static_cast<connection_header>(h));
      b->bytes += c.body;
      c.response[h] = shared_response(b);
    }
  }
  return c.response[static_cast<int>(how)];
}

void append_response(std::string& out, int status, std::string_view body, connection_header how) {
  date.refresh();
  append_head(out, status, body.size(), how);
  out += body;
}

void append_continue(std::string& out) { out += "HTTP/1.1 100 Continue\r\n\r\n"; }

}  // namespace http_example
