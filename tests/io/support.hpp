// Shared by the io tests: scaled iteration counts, assertions usable inside coroutines, a
// connected loopback pair, and a byte pattern in which every position can be checked.
// All traffic stays on loopback (127.0.0.1 / ::1).
#pragma once

#include <cogwheel/cogwheel.hpp>

#include <dirent.h>

#include <algorithm>
#include <coroutine>
#include <exception>
#include <ostream>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "../support/co_assert.hpp"

namespace cogwheel::io_test {

using namespace std::chrono_literals;

using test_support::scaled;

// Byte i of a stream: changes with the position at every granularity, so a lost, duplicated or
// reordered chunk of any size shows up at its first byte.
inline std::byte pattern_at(std::uint64_t i) noexcept {
  return static_cast<std::byte>((i * 131 + (i >> 10) * 7 + (i >> 20) * 3) & 0xff);
}

// The pattern's first n bytes.
inline std::vector<std::byte> pattern_bytes(std::size_t n) {
  std::vector<std::byte> data(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = pattern_at(i);
  return data;
}

// Everything the peer sends until it shuts down its side (each read bounded by 5 s).
inline task<result<std::vector<std::byte>>> read_to_eof(tcp_stream& s) {
  std::vector<std::byte> got;
  std::vector<std::byte> buf(64 * 1024);
  for (;;) {
    auto n = co_await with_timeout(s.read(buf), std::chrono::seconds(5));
    if (!n) co_return n.error();
    if (*n == 0) co_return got;
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
  }
}

struct stream_pair {
  tcp_stream client;
  tcp_stream server;
};

// A client connected over loopback (`where`, port 0: any free port) and the server's end of
// the same connection. The listener is closed again before this returns.
inline task<result<stream_pair>> connect_pair(socket_address where = socket_address::ipv4_loopback(0)) {
  auto listener = tcp_listener::bind(where);
  if (!listener) co_return listener.error();
  auto client = co_await with_timeout(tcp_stream::connect(listener->local_address()), 5s);
  if (!client) co_return client.error();
  auto server = co_await with_timeout(listener->accept(), 5s);
  if (!server) co_return server.error();
  co_return stream_pair{std::move(*client), std::move(*server)};
}

// Reads until `buf` is full or the peer closes; the number of bytes read.
inline task<result<std::size_t>> read_exactly(tcp_stream& s, std::span<std::byte> buf) {
  std::size_t got = 0;
  while (got < buf.size()) {
    auto n = co_await s.read(buf.subspan(got));
    if (!n) co_return n.error();
    if (*n == 0) break;
    got += *n;
  }
  co_return got;
}

// Runs a and b concurrently on this core until both finish (when_all as a task, so that
// with_timeout can bound it).
inline task<void> together(task<void> a, task<void> b) { co_await when_all(std::move(a), std::move(b)); }

inline std::span<const std::byte> bytes_of(std::string_view s) noexcept {
  return std::as_bytes(std::span(s.data(), s.size()));
}

inline std::string_view text_of(std::span<const std::byte> b) noexcept {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Shared by the timeout tests.
// The loop's time: the virtual time under a paused clock.
inline clock::time_point loop_now() { return now(); }

inline int open_descriptors() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

// A coroutine type that is not cogwheel's: it starts at once and holds whatever it awaits, so
// the test can destroy its frame (and the task<void> object in it) while that is suspended.
struct frame_holder {
  struct promise_type {
    frame_holder get_return_object() { return {std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> frame;
};

inline frame_holder hold(task<void> t) { co_await std::move(t); }

// Whether this kernel has provided buffer rings; tests skip when not.
inline bool pools_supported() {
  static const bool supported = run([]() -> task<bool> {
    auto p = buffer_pool::create({.buffers = 1, .buffer_size = 64});
    if (!p && p.error() != errc::not_supported) ADD_FAILURE() << "create: " << p.error().message();
    co_return p.has_value();
  }());
  return supported;
}

#define SKIP_WITHOUT_POOLS() \
  if (!pools_supported()) GTEST_SKIP() << "this kernel has no io_uring provided buffer rings (Linux 5.19+)"

inline runtime_options paused() { return runtime_options{.paused_clock = true}; }

}  // namespace cogwheel::io_test

namespace cogwheel {
// gtest prints a socket_address as "127.0.0.1:8080", not as 128 bytes (found by ADL).
inline void PrintTo(const socket_address& a, std::ostream* os) { *os << a.to_string(); }
}  // namespace cogwheel
