// A read that returned fewer bytes than it asked for does not mean the socket is empty, nor
// that the next arrival will be announced: Linux's recv stops at an urgent mark with the rest
// of the stream still queued behind it, and with SO_RCVLOWAT above 1 an arrival below it raises
// no readiness event. The next read must still return what is there at once, on both
// backends, for every kind of read (read, read_pooled from a pool, read_pooled from the core's
// shared pool), with and without a timeout. And the peer's half-close after its data is read as
// the data, then the end, at once.
#include <cogwheel/cogwheel.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

enum class read_kind { plain, pooled, shared_pool };

struct read_case {
  backend_kind backend;
  read_kind kind;
  bool timed;  // with_timeout(read, 2s), or a read with no timeout
};

std::string name_of(const read_case& c) {
  std::string name = c.backend == backend_kind::epoll ? "epoll" : "io_uring";
  name += c.kind == read_kind::plain ? "_read" : c.kind == read_kind::pooled ? "_pooled" : "_shared_pool";
  name += c.timed ? "_timed" : "_untimed";
  return name;
}

std::string case_name(const testing::TestParamInfo<read_case>& info) { return name_of(info.param); }

// gtest prints a parameter it cannot print as its bytes, padding included.
[[maybe_unused]] void PrintTo(const read_case& c, std::ostream* os) { *os << name_of(c); }

// Sets COGWHEEL_BACKEND for one scope (it wins over runtime_options::backend, and CI sets it).
class backend_variable {
 public:
  explicit backend_variable(backend_kind b) {
    if (const char* old = std::getenv("COGWHEEL_BACKEND")) old_ = old;
    ::setenv("COGWHEEL_BACKEND", b == backend_kind::epoll ? "epoll" : "io_uring", 1);
  }
  ~backend_variable() {
    if (old_)
      ::setenv("COGWHEEL_BACKEND", old_->c_str(), 1);
    else
      ::unsetenv("COGWHEEL_BACKEND");
  }

 private:
  std::optional<std::string> old_;
};

// How long a read may take to return bytes that are already in its socket: far under the 2 s
// timeout, which is what a read that waited for an event that never comes would take.
constexpr auto prompt = 200ms;
constexpr auto timeout = 2s;

// One read that waits (so the server's socket is watched: in the epoll set) and ends short.
task<void> watch(stream_pair& p) {
  std::array<std::byte, 8> first;
  std::optional<result<std::size_t>> got;
  auto reader = [&]() -> task<void> { got = co_await with_timeout(p.server.read(first), timeout); };
  auto writer = [&]() -> task<void> {
    co_await yield();
    (void)co_await p.client.write_all(bytes_of("w"));
  };
  co_await together(reader(), writer());
  EXPECT_TRUE(got.has_value() && got->has_value() && **got == 1u);
}

class short_read : public testing::TestWithParam<read_case> {
 protected:
  // One read of the kind under test: its bytes as text ("" for the peer's end), or its error.
  task<result<std::string>> read_one(tcp_stream& s, buffer_pool& pool) {
    const read_case c = GetParam();
    // No co_await inside a conditional expression: g++ 12 destroys the temporaries of both of
    // its branches (a pooled read's destructor then gives back its use of the pool twice).
    if (c.kind == read_kind::plain) {
      std::array<std::byte, 64> buf;
      result<std::size_t> n = errc::invalid_argument;
      if (c.timed) {
        n = co_await with_timeout(s.read(buf), timeout);
      } else {
        n = co_await s.read(buf);
      }
      if (!n) co_return n.error();
      co_return std::string(text_of(std::span(buf).first(*n)));
    }
    result<pooled_buffer> b = errc::invalid_argument;
    if (c.kind == read_kind::pooled && c.timed) {
      b = co_await with_timeout(s.read_pooled(pool), timeout);
    } else if (c.kind == read_kind::pooled) {
      b = co_await s.read_pooled(pool);
    } else if (c.timed) {
      b = co_await with_timeout(s.read_pooled(), timeout);
    } else {
      b = co_await s.read_pooled();
    }
    if (!b) co_return b.error();
    co_return std::string(text_of(b->bytes()));
  }

  // read_one, with how long it took. A read with no timeout that waits for an event that never
  // comes is ended after the timeout by the peer sending `unblock` (then the text is wrong), or
  // with no `unblock`, by closing s (then the read fails).
  task<result<std::string>> timed_read(tcp_stream& s, tcp_stream& peer, buffer_pool& pool, std::chrono::nanoseconds& took,
                                       std::string_view unblock) {
    std::optional<result<std::string>> got;
    bool done = false;
    const auto start = std::chrono::steady_clock::now();
    auto reader = [&]() -> task<void> {
      got = co_await read_one(s, pool);
      took = std::chrono::steady_clock::now() - start;
      done = true;
    };
    auto watchdog = [&]() -> task<void> {
      for (auto waited = 0ms; waited < timeout + 100ms && !done; waited += 10ms) co_await sleep_for(10ms);
      if (done) co_return;
      if (unblock.empty()) {
        s.close();  // the peer can send no more: end the read (it fails, cancelled)
      } else {
        EXPECT_EQ(::send(peer.native_handle(), unblock.data(), unblock.size(), MSG_NOSIGNAL), std::ssize(unblock));
      }
    };
    co_await together(reader(), watchdog());
    co_return *got;
  }

  // Runs body(stream pair, pool) on the backend under test; skips where io_uring has no
  // provided buffers and the case reads from a pool.
  template <class Body>
  void run_case(Body body) {
    const read_case c = GetParam();
    backend_variable chosen(c.backend);
    bool unsupported = false;
    run([&]() -> task<void> {
      auto pool = buffer_pool::create({.buffers = 8, .buffer_size = 64});
      if (!pool && pool.error() == errc::not_supported && c.kind != read_kind::plain) {
        unsupported = true;
        co_return;
      }
      CO_ASSERT_OK(pool);
      auto p = co_await connect_pair();
      CO_ASSERT_OK(p);
      co_await watch(*p);
      co_await body(*p, *pool);
    }(), runtime_options{.backend = c.backend});
    if (unsupported) GTEST_SKIP() << "this kernel has no io_uring provided buffer rings (Linux 5.19+)";
  }
};

TEST_P(short_read, the_stream_after_urgent_data_is_read_at_once) {
  run_case([this](stream_pair& p, buffer_pool& pool) -> task<void> {
    const int c = p.client.native_handle();
    // "AAAA", an urgent byte, "CCCC": the receiver's recv stops at the urgent mark after
    // "AAAA" (the urgent byte is out of band: not in the stream), "CCCC" stays queued.
    EXPECT_EQ(::send(c, "AAAA", 4, MSG_NOSIGNAL), 4);
    EXPECT_EQ(::send(c, "B", 1, MSG_OOB | MSG_NOSIGNAL), 1);
    EXPECT_EQ(::send(c, "CCCC", 4, MSG_NOSIGNAL), 4);
    co_await sleep_for(20ms);  // all of it arrived, and its events were reaped
    std::chrono::nanoseconds took{};
    auto a = co_await timed_read(p.server, p.client, pool, took, "ZZZZ");
    CO_ASSERT_OK(a);
    EXPECT_EQ(*a, "AAAA");
    EXPECT_LT(took, prompt);
    auto rest = co_await timed_read(p.server, p.client, pool, took, "ZZZZ");
    CO_ASSERT_OK(rest);
    EXPECT_EQ(*rest, "CCCC");
    EXPECT_LT(took, prompt);
  });
}

TEST_P(short_read, bytes_below_the_users_receive_low_watermark_are_read_at_once) {
  run_case([this](stream_pair& p, buffer_pool& pool) -> task<void> {
    // Set through the native handle, behind the runtime's back. Arrivals below it raise no
    // readiness event; a read that starts with them there returns them (recv does not wait for
    // the watermark on a non-blocking socket), as io_uring's first, non-blocking try does.
    const int lowat = 16;
    CO_ASSERT_TRUE(::setsockopt(p.server.native_handle(), SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat) == 0);
    CO_ASSERT_OK(co_await p.client.write_all(bytes_of("AB")));
    co_await sleep_for(20ms);
    std::chrono::nanoseconds took{};
    auto got = co_await timed_read(p.server, p.client, pool, took, "0123456789abcdef");
    CO_ASSERT_OK(got);
    EXPECT_EQ(*got, "AB");
    EXPECT_LT(took, prompt);
    // Again after that short read, with the bytes arriving once the read has started to wait:
    // no event until the watermark is reached, on either backend (the option's meaning).
    CO_ASSERT_OK(co_await p.client.write_all(bytes_of("CD")));
    co_await sleep_for(20ms);
    got = co_await timed_read(p.server, p.client, pool, took, "0123456789abcdef");
    CO_ASSERT_OK(got);
    EXPECT_EQ(*got, "CD");
    EXPECT_LT(took, prompt);
  });
}

TEST_P(short_read, the_peers_half_close_after_its_data_is_read_as_the_data_then_the_end) {
  run_case([this](stream_pair& p, buffer_pool& pool) -> task<void> {
    for (const bool together_with_data : {false, true}) {
      auto q = co_await connect_pair();  // a fresh pair per round: the first one is half-closed
      CO_ASSERT_OK(q);
      if (together_with_data) co_await watch(*q);
      stream_pair& s = together_with_data ? *q : p;
      const int c = s.client.native_handle();
      EXPECT_EQ(::send(c, "data", 4, MSG_NOSIGNAL), 4);
      // The FIN in the same step (one event for both), or after the data was read.
      if (together_with_data) {
        EXPECT_EQ(::shutdown(c, SHUT_WR), 0);
      }
      co_await sleep_for(20ms);
      std::chrono::nanoseconds took{};
      auto got = co_await timed_read(s.server, s.client, pool, took, "");
      CO_ASSERT_OK(got);
      EXPECT_EQ(*got, "data");
      EXPECT_LT(took, prompt);
      if (!together_with_data) {
        EXPECT_EQ(::shutdown(c, SHUT_WR), 0);
        co_await sleep_for(20ms);
      }
      got = co_await timed_read(s.server, s.client, pool, took, "");
      CO_ASSERT_OK(got);
      EXPECT_EQ(*got, "");
      EXPECT_LT(took, prompt);
      // The server can still write to the half-closed peer, and the end stays the end.
      CO_ASSERT_OK(co_await s.server.write_all(bytes_of("reply")));
      got = co_await timed_read(s.server, s.client, pool, took, "");
      CO_ASSERT_OK(got);
      EXPECT_EQ(*got, "");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    backends, short_read,
    testing::Values(read_case{backend_kind::io_uring, read_kind::plain, true}, read_case{backend_kind::io_uring, read_kind::plain, false},
                    read_case{backend_kind::io_uring, read_kind::pooled, true}, read_case{backend_kind::io_uring, read_kind::pooled, false},
                    read_case{backend_kind::io_uring, read_kind::shared_pool, true},
                    read_case{backend_kind::io_uring, read_kind::shared_pool, false}, read_case{backend_kind::epoll, read_kind::plain, true},
                    read_case{backend_kind::epoll, read_kind::plain, false}, read_case{backend_kind::epoll, read_kind::pooled, true},
                    read_case{backend_kind::epoll, read_kind::pooled, false}, read_case{backend_kind::epoll, read_kind::shared_pool, true},
                    read_case{backend_kind::epoll, read_kind::shared_pool, false}),
    case_name);

}  // namespace
}  // namespace cogwheel
