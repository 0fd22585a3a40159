// The HTTP server against clients nobody here wrote, over real sockets and the real clock: curl
// (a GET, an echo of a chunked upload, /metrics checked by promtool), a one-second wrk run and ApacheBench with keep-alive
// (HTTP/1.0, which waits for the answer to say "Connection: keep-alive"). Skipped, reported as skipped,
// when the tool is not installed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace http_test;

bool installed(const char* tool) { return std::system((std::string("command -v ") + tool + " >/dev/null").c_str()) == 0; }

std::string output_of(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

// A server on a free loopback port, on a runtime thread of its own, until destroyed.
class live_server {
 public:
  live_server() : rt_(runtime_options{.cores = 1, .pin_threads = false}) {
    thread_ = std::thread([this] {
      rt_.run([this](unsigned) -> task<void> {
        auto listener = tcp_listener::bind(socket_address::ipv4_loopback(0));
        if (!listener) {
          port_ = -1;
          co_return;
        }
        port_ = listener->local_address().port();
        for (;;) {
          auto conn = co_await listener->accept();
          if (!conn) co_return;  // stopped
          spawn(serve_connection(std::move(*conn), cfg_, stats_));
        }
      });
    });
    while (port_ == 0) std::this_thread::yield();
  }
  ~live_server() {
    rt_.stop();
    thread_.join();
  }
  std::string url(const char* path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  // Only after the destructor's join, or for a glance while the server runs.
  const server_stats& stats() const { return stats_; }

 private:
  server_config cfg_;
  server_stats stats_;
  runtime rt_;
  std::atomic<int> port_{0};
  std::thread thread_;
};

TEST(http_smoke, curl_gets_the_body_and_its_chunked_upload_back) {
  if (!installed("curl")) GTEST_SKIP() << "curl is not installed";
  live_server server;
  EXPECT_EQ(output_of("curl -s --max-time 5 " + server.url("/")), "Hello, World!");
  EXPECT_EQ(output_of("printf 'uploaded in chunks' | curl -s --max-time 5 -H 'Transfer-Encoding: chunked' "
                      "--data-binary @- " + server.url("/echo")),
            "uploaded in chunks");
  EXPECT_EQ(output_of("curl -s -o /dev/null -w '%{http_code}' --max-time 5 " + server.url("/nothing")), "404");
}

TEST(http_smoke, curl_gets_the_runtimes_metrics_that_promtool_accepts) {
  if (!installed("curl")) GTEST_SKIP() << "curl is not installed";
  live_server server;
  const std::string text = output_of("curl -s --max-time 5 " + server.url("/metrics"));
  EXPECT_NE(text.find("# TYPE cogwheel_timer_lateness_seconds histogram\n"), std::string::npos) << text.substr(0, 2000);
  EXPECT_NE(text.find("cogwheel_loop_iterations_total{core=\"0\"} "), std::string::npos);
  if (!installed("promtool")) GTEST_SKIP() << "promtool is not installed (Debian package prometheus)";
  EXPECT_EQ(output_of("curl -s --max-time 5 " + server.url("/metrics") + " | promtool check metrics 2>&1; echo rc=$?"), "rc=0\n");
}

TEST(http_smoke, wrk_gets_only_successful_answers_for_a_second) {
  if (!installed("wrk")) GTEST_SKIP() << "wrk is not installed";
  live_server server;
  const std::string out = output_of("wrk -t1 -c20 -d1s " + server.url("/") + " 2>&1");
  EXPECT_NE(out.find("requests in"), std::string::npos) << out;
  EXPECT_EQ(out.find("Non-2xx"), std::string::npos) << out;
  EXPECT_EQ(out.find("Socket errors"), std::string::npos) << out;
}

TEST(http_smoke, apachebench_with_keep_alive_completes_every_request) {
  if (!installed("ab")) GTEST_SKIP() << "ab (apache2-utils) is not installed";
  live_server server;
  // ab -k waits for a keep-alive answer it never recognises until its own timeout (-s 5); the
  // outer timeout stops it if it hangs anyway.
  const std::string out = output_of("timeout 20 ab -k -s 5 -n 200 -c 4 " + server.url("/") + " 2>&1");
  EXPECT_NE(out.find("Complete requests:      200"), std::string::npos) << out;
  EXPECT_NE(out.find("Failed requests:        0"), std::string::npos) << out;
  EXPECT_NE(out.find("Keep-Alive requests:    200"), std::string::npos) << out;
}

}  // namespace
}  // namespace cogwheel
