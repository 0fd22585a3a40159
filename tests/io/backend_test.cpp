// Choosing the backend (runtime_options::backend, overridden by COGWHEEL_BACKEND) and what
// only the epoll backend has to get right: what it remembers of a descriptor (registered in its
// epoll set, made non-blocking) belongs to the socket, not the number. A number closed and
// handed to a new socket, on this core or after the old socket moved to another, is watched
// afresh (a loop that took the new socket for the old one would never hear of its data: the
// reads below would time out); a socket joins a loop's set once however often it waits, and
// leaves the old loop's set when it moves to another core. And a read after a read that emptied
// the socket misses neither data nor the peer's end (short_read_test.cpp: after urgent data,
// below SO_RCVLOWAT, and on both backends).
#include <cogwheel/cogwheel.hpp>  // first: the umbrella header compiles on its own

#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string_view>

#include <array>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "support.hpp"

namespace cogwheel {
namespace {

using namespace io_test;

// Sets COGWHEEL_BACKEND for one scope, restoring what was there (CI runs this binary with it).
class backend_variable {
 public:
  explicit backend_variable(const char* value) {
    if (const char* old = std::getenv("COGWHEEL_BACKEND")) old_ = old;
    if (value != nullptr)
      ::setenv("COGWHEEL_BACKEND", value, 1);
    else
      ::unsetenv("COGWHEEL_BACKEND");
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

backend_kind backend_of_a_run(runtime_options o) {
  backend_kind seen = backend_kind::automatic;
  run([](backend_kind& seen) -> task<> {
    seen = current_backend();
    co_return;
  }(seen), o);
  return seen;
}

TEST(backend, the_option_chooses_and_the_variable_wins) {
  {
    backend_variable unset(nullptr);
    EXPECT_EQ(backend_of_a_run({.backend = backend_kind::epoll}), backend_kind::epoll);
    EXPECT_EQ(backend_of_a_run({.backend = backend_kind::io_uring}), backend_kind::io_uring);
    EXPECT_EQ(backend_of_a_run({}), backend_kind::io_uring);  // automatic, where io_uring runs
  }
  {
    backend_variable epoll("epoll");
    EXPECT_EQ(backend_of_a_run({.backend = backend_kind::io_uring}), backend_kind::epoll);
  }
  {
    backend_variable uring("io_uring");
    EXPECT_EQ(backend_of_a_run({.backend = backend_kind::epoll}), backend_kind::io_uring);
  }
}

TEST(backend, a_variable_naming_no_backend_fails_at_start_and_says_what_is_valid) {
  backend_variable bad("kqueue");
  try {
    backend_of_a_run({});
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("kqueue"), std::string::npos) << what;
    EXPECT_NE(what.find("io_uring, epoll"), std::string::npos) << what;
  }
}

// Data written 20 ms after the read started: the read has to wait for readiness.
task<result<std::size_t>> read_after_a_late_write(tcp_stream& reader, tcp_stream& writer) {
  std::array<std::byte, 16> buf;
  std::optional<result<std::size_t>> got;
  auto read = [&]() -> task<void> { got = co_await with_timeout(reader.read(buf), 2s); };
  auto write = [&]() -> task<void> {
    co_await sleep_for(20ms);
    (void)co_await writer.write_all(bytes_of("late"));
  };
  co_await together(read(), write());
  co_return *got;
}

TEST(backend, a_descriptor_number_closed_and_reused_on_the_same_core_is_watched_afresh) {
  run([]() -> task<void> {
    auto first = co_await connect_pair();
    CO_ASSERT_OK(first);
    CO_ASSERT_OK(co_await read_after_a_late_write(first->client, first->server));  // watched
    const int number = first->client.native_handle();
    first->client.close();
    auto second = co_await connect_pair();  // its client's socket() takes the lowest free number
    CO_ASSERT_OK(second);
    CO_ASSERT_TRUE(second->client.native_handle() == number);
    auto n = co_await read_after_a_late_write(second->client, second->server);
    CO_ASSERT_OK(n);
    EXPECT_EQ(*n, 4u);
  }(), runtime_options{.backend = backend_kind::epoll});
}

TEST(backend, a_descriptor_number_closed_on_another_core_and_reused_here_is_watched_afresh) {
  runtime rt(runtime_options{.cores = 2, .backend = backend_kind::epoll, .pin_threads = false});
  bool checked = false;
  rt.run([&](unsigned core) -> task<void> {
    if (core != 0) co_return;
    auto first = co_await connect_pair();
    CO_ASSERT_OK(first);
    CO_ASSERT_OK(co_await read_after_a_late_write(first->client, first->server));  // watched here
    const int number = first->client.release();
    // Core 1 waits for data on it too (watching it there), then closes it.
    bool served = false;
    auto moved = [&]() -> task<void> {
      served = co_await submit_to(1, [number]() -> task<bool> {
        tcp_stream s(number);
        std::array<std::byte, 4> buf;
        co_return static_cast<bool>(co_await with_timeout(s.read(buf), 2s));
      });
    };
    auto late = [&]() -> task<void> {
      co_await sleep_for(20ms);
      (void)co_await first->server.write_all(bytes_of("move"));
    };
    co_await together(moved(), late());
    CO_ASSERT_TRUE(served);
    auto second = co_await connect_pair();
    CO_ASSERT_OK(second);
    CO_ASSERT_TRUE(second->client.native_handle() == number);
    auto n = co_await read_after_a_late_write(second->client, second->server);
    CO_ASSERT_OK(n);
    EXPECT_EQ(*n, 4u);
    checked = true;
  });
  EXPECT_TRUE(checked);
}

// How many epoll sets of this process watch descriptor fd (from /proc/self/fdinfo).
int epoll_sets_watching(int fd) {
  int sets = 0;
  for (int e = 0; e < 4096; ++e) {
    char link[64];
    char target[64] = {};
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", e);
    if (::readlink(link, target, sizeof target - 1) <= 0 || std::string_view(target) != "anon_inode:[eventpoll]")
      continue;
    std::snprintf(link, sizeof link, "/proc/self/fdinfo/%d", e);
    if (FILE* f = std::fopen(link, "r")) {
      char line[256];
      while (std::fgets(line, sizeof line, f) != nullptr) {
        int tfd = -1;
        if (std::sscanf(line, "tfd: %d", &tfd) == 1 && tfd == fd) ++sets;
      }
      std::fclose(f);
    }
  }
  return sets;
}

// One wait on s: the peer writes only after the read has gone to the backend.
task<result<std::size_t>> one_wait(tcp_stream& s, tcp_stream& peer) {
  std::array<std::byte, 8> buf;
  std::optional<result<std::size_t>> got;
  auto reader = [&]() -> task<void> { got = co_await with_timeout(s.read(buf), 2s); };
  auto writer = [&]() -> task<void> {
    co_await yield();
    (void)co_await peer.write_all(bytes_of("w"));
  };
  co_await together(reader(), writer());
  co_return *got;
}

TEST(backend, a_socket_joins_the_epoll_set_once_however_many_times_it_waits) {
  backend_variable epoll("epoll");  // whatever backend the rest of this binary runs on
  run([]() -> task<void> {
    auto p = co_await connect_pair();
    CO_ASSERT_OK(p);
    const std::uint64_t before = this_core_metrics().epoll_registrations;
    for (int i = 0; i < 1000; ++i) CO_ASSERT_OK(co_await one_wait(p->server, p->client));
    EXPECT_EQ(this_core_metrics().epoll_registrations - before, 1u);
    EXPECT_EQ(epoll_sets_watching(p->server.native_handle()), 1);
  }(), runtime_options{.backend = backend_kind::epoll});
}

// Reads once on the calling core; the stream lives in this frame.
task<result<std::size_t>> read_here(tcp_stream s) {
  std::array<std::byte, 8> buf;
  auto n = co_await with_timeout(s.read(buf), 2s);
  // Watched by this core's set now, and by the core it came from no more.
  EXPECT_EQ(epoll_sets_watching(s.native_handle()), 1);
  co_return n;
}

TEST(backend, a_socket_moved_to_another_core_leaves_the_old_loops_epoll_set) {
  backend_variable epoll("epoll");
  runtime rt(runtime_options{.cores = 2, .backend = backend_kind::epoll, .pin_threads = false});
  bool checked = false;
  rt.run([&](unsigned core) -> task<void> {
    if (core != 0) co_return;
    auto p = co_await connect_pair();
    CO_ASSERT_OK(p);
    CO_ASSERT_OK(co_await one_wait(p->server, p->client));  // watched by core 0's set
    const int fd = p->server.native_handle();
    CO_ASSERT_TRUE(epoll_sets_watching(fd) == 1);
    auto moved = [&]() -> task<void> {
      // Named, not a temporary in the co_await expression: g++ 12 copies such a temporary byte
      // for byte into the frame and destroys both (two owners of one socket; fd_operations
      // aborts with a message when it finds the copy).
      auto read_there = [s = std::move(p->server)]() mutable { return read_here(std::move(s)); };
      auto got = co_await submit_to(1, std::move(read_there));
      EXPECT_TRUE(got.has_value());
    };
    auto late = [&]() -> task<void> {
      co_await sleep_for(20ms);
      (void)co_await p->client.write_all(bytes_of("move"));
    };
    co_await together(moved(), late());
    checked = true;
  });
  EXPECT_TRUE(checked);
}

// The server's end waits once (so it is in the epoll set), then reads what the client sends
// with a buffer larger than that: a short read, which empties the socket's input.
task<result<std::size_t>> drain_after(tcp_stream& server, tcp_stream& client, std::string_view what) {
  if (auto w = co_await one_wait(server, client); !w) co_return w.error();
  if (auto w = co_await client.write_all(bytes_of(what)); !w) co_return w.error();
  std::array<std::byte, 64> buf;
  co_return co_await with_timeout(server.read(buf), 2s);
}

TEST(backend, data_sent_after_a_read_emptied_the_socket_and_before_the_next_read_is_read) {
  backend_variable epoll("epoll");
  for (const bool reaped : {false, true}) {
    run([reaped]() -> task<void> {
      auto p = co_await connect_pair();
      CO_ASSERT_OK(p);
      CO_ASSERT_OK(co_await drain_after(p->server, p->client, "abc"));
      // In the socket before the read starts, its edge not reaped yet or reaped already with
      // no read waiting (an edge that was reaped never comes again): the read returns it.
      CO_ASSERT_OK(co_await p->client.write_all(bytes_of("de")));
      if (reaped) co_await sleep_for(5ms);
      std::array<std::byte, 64> buf;
      const auto start = std::chrono::steady_clock::now();
      auto n = co_await with_timeout(p->server.read(buf), 2s);
      // At once, not when the timeout's cancel ends a read that waited for no edge.
      EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
      CO_ASSERT_OK(n);
      EXPECT_EQ(text_of(std::span(buf).first(*n)), "de");
    }(), runtime_options{.backend = backend_kind::epoll});
  }
}

TEST(backend, the_peers_end_arriving_with_its_last_data_is_read_after_the_data) {
  // Data and the FIN arrive together and raise one edge; the read that takes the data is short,
  // and no edge follows it: the next read must try its syscall (and find the end), not wait.
  backend_variable epoll("epoll");
  for (const bool waiting : {true, false}) {  // the edge reaped by a waiting read, or not yet
    run([waiting]() -> task<void> {
      auto p = co_await connect_pair();
      CO_ASSERT_OK(p);
      CO_ASSERT_OK(co_await one_wait(p->server, p->client));  // in the epoll set
      std::array<std::byte, 64> buf;
      std::optional<result<std::size_t>> first;
      auto reader = [&]() -> task<void> { first = co_await with_timeout(p->server.read(buf), 2s); };
      auto closer = [&]() -> task<void> {
        // The data and the FIN from one step of this coroutine: both are in the server's socket
        // before the loop next reaps it (a write through the loop would complete first, and
        // its edge be reaped alone).
        EXPECT_EQ(::send(p->client.native_handle(), "last", 4, MSG_NOSIGNAL), 4);
        p->client.close();
        co_return;
      };
      if (waiting) {
        co_await together(reader(), closer());
      } else {
        co_await closer();
        co_await sleep_for(5ms);  // the edge is reaped before the read starts: no waiter then
        co_await reader();
      }
      CO_ASSERT_TRUE(first.has_value());
      CO_ASSERT_OK(*first);
      EXPECT_EQ(**first, 4u);
      const auto start = std::chrono::steady_clock::now();
      auto end = co_await with_timeout(p->server.read(buf), 2s);
      // At once: not when the timeout's cancel tries the read that waited for an edge that
      // never comes.
      EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
      CO_ASSERT_OK(end);
      EXPECT_EQ(*end, 0u);
    }(), runtime_options{.backend = backend_kind::epoll});
  }
}

}  // namespace
}  // namespace cogwheel
