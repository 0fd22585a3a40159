// connection: the state behind a client. One TCP connection at a time; a session coroutine
// (spawned on the client's core) runs a reader and a writer on it and reconnects when it fails.
//
// Invariants:
//   - every queued waiter's command bytes are in out_ or writing_ or already sent, in FIFO
//     order; the FIFO holds them in the same order;
//   - replies arrive in command order: the reply at the head of the stream belongs to the
//     first waiter once its discards_before replies (of cancelled commands) have been dropped;
//     trailing_discards_ counts dropped-to-be replies after the last waiter;
//   - while !connected_ the FIFO is empty and out_ is empty;
//   - only the reader and writer coroutines perform operations on link_; others stop them by
//     ::shutdown(2), never by closing the socket under them; the session closes it after both
//     have ended.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <system_error>

#include <cogwheel/redis/client.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/task.hpp>

#include "link.hpp"
#include "reply_reader.hpp"

namespace cogwheel::redis::detail {

class connection : public std::enable_shared_from_this<connection> {
 public:
  explicit connection(client_options options);
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection();

  // The first connection; on success the session keeps it (and its successors) up.
  task<result<void>> start();
  void close() noexcept;

  std::coroutine_handle<> submit(waiter& w, std::span<const command_arg> args, cogwheel::continuation c);
  void cancel(waiter& w) noexcept;
  void abandon(waiter& w) noexcept;

  bool connected() const noexcept { return connected_; }
  const client_stats& stats() const noexcept { return stats_; }

 private:
  task<result<void>> open();
  task<void> session(std::shared_ptr<connection> self);
  task<void> read_loop();
  task<void> write_loop();

  void encode(std::span<const command_arg> args);
  void dispatch(parsed_reply p);
  bool route_message(const reply& r);
  void push(waiter& w) noexcept;
  void unlink(waiter& w) noexcept;
  // Completes w with `outcome` at the next loop iteration.
  void finish_later(waiter& w, std::error_code outcome) noexcept;
  // Ends the current connection: shutdown(2), every waiter failed with `why`.
  void lose(std::error_code why) noexcept;
  void wake_writer() noexcept;

  client_options options_;
  link link_;  // plain or TLS
  reply_reader reader_;
  std::string out_;      // encoded commands not yet handed to the writer
  std::string writing_;  // the batch the writer is sending
  cogwheel::detail::intrusive_list<waiter> waiters_;  // oldest first: replies arrive in this order
  std::uint32_t trailing_discards_ = 0;
  bool connected_ = false;
  bool closing_ = false;
  bool got_reply_ = false;  // the current connection delivered a reply: back-off resets
  sleep_operation* writer_idle_ = nullptr;  // the writer's sleep while out_ is empty
  sleep_operation* backoff_ = nullptr;      // the session's sleep between attempts
  client_stats stats_;
};

}  // namespace cogwheel::redis::detail
