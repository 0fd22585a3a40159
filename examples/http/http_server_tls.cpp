#include "http_server_tls.hpp"

#include <fstream>
#include <sstream>

#include <cogwheel/tls/stream.hpp>

namespace http_example {

using namespace cogwheel;

namespace {

result<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return errc::no_such_file_or_directory;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

result<tls::context> tls_context_from_files(const std::string& cert_path, const std::string& key_path,
                                            bool resumption) {
  auto cert = read_file(cert_path);
  if (!cert) return cert.error();
  auto key = read_file(key_path);
  if (!key) return key.error();
  auto ctx = tls::context::server(*cert, *key);
  if (!ctx) return ctx.error();
  if (auto alpn = ctx->set_alpn({"http/1.1"}); !alpn) return alpn.error();
  ctx->set_resumption(resumption);
  return ctx;
}

task<void> serve_tls_connection(tcp_stream s, tls::context ctx, const server_config& cfg, server_stats& stats) {
  const clock::time_point head_by = now() + cfg.header_timeout;
  auto t = co_await with_deadline(tls::stream::accept(std::move(s), std::move(ctx)), head_by);
  if (!t) {
    if (t.error() == errc::timed_out) ++stats.header_timeouts;
    co_return;
  }
  // Spawned rather than awaited: this frame (and the handshake's) is freed while the
  // connection lives on.
  spawn(serve_stream(std::move(*t), cfg, stats, head_by));
}

}  // namespace http_example
