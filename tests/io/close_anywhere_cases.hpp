// The cases of close_anywhere_test: which operation, at which moment of its life, ended in
// which way, from where; and one case run start to finish with its checks.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "close_anywhere_witness.hpp"
#include "support.hpp"

namespace cogwheel::io_test {

enum class op_kind { read, read_pooled, write, write_all, shutdown, udp_receive, udp_receive_from, udp_send,
                     udp_send_to, udp_connect, connect, accept };
enum class moment {
  before_submit,  // started in this iteration, not yet handed to the kernel
  in_flight,      // in the kernel, waiting
  completed,      // finished in the kernel, its completion taken but not yet dispatched
};
enum class way { close, destroy, release, move_assign, destroy_frame, timeout, close_listener };
enum class source { same_task, other_task, timer, other_core };

inline constexpr op_kind all_ops[] = {op_kind::read,        op_kind::read_pooled,      op_kind::write,
                                      op_kind::write_all,   op_kind::shutdown,         op_kind::udp_receive,
                                      op_kind::udp_receive_from, op_kind::udp_send,    op_kind::udp_send_to,
                                      op_kind::udp_connect, op_kind::connect,          op_kind::accept};
inline constexpr moment all_moments[] = {moment::before_submit, moment::in_flight, moment::completed};
inline constexpr source all_sources[] = {source::same_task, source::other_task, source::timer, source::other_core};

struct scenario {
  op_kind op;
  moment when;
  way how;
  source from;
};

inline bool is_stream_op(op_kind o) { return o <= op_kind::shutdown; }
inline bool is_udp_op(op_kind o) { return o >= op_kind::udp_receive && o <= op_kind::udp_connect; }
inline bool is_write_op(op_kind o) { return o == op_kind::write || o == op_kind::write_all; }
inline bool is_read_op(op_kind o) {
  return o == op_kind::read || o == op_kind::read_pooled || o == op_kind::udp_receive || o == op_kind::udp_receive_from;
}

inline std::vector<way> ways_for(op_kind o) {
  if (o == op_kind::connect) return {way::destroy_frame, way::timeout};
  if (o == op_kind::accept) return {way::destroy_frame, way::timeout, way::close_listener};
  return {way::close, way::destroy, way::release, way::move_assign};
}

inline bool applicable(const scenario& s) {
  // A timeout is its own source: a timer, with the operation in the kernel.
  if (s.how == way::timeout) return s.from == source::timer && s.when == moment::in_flight;
  // These complete as soon as the kernel sees them: they are never left waiting there.
  if (s.when == moment::in_flight && (s.op == op_kind::shutdown || s.op == op_kind::udp_send ||
                                      s.op == op_kind::udp_send_to || s.op == op_kind::udp_connect))
    return false;
  return true;
}

inline std::string describe(const scenario& s) {
  static const char* ops[] = {"read", "read_pooled", "write", "write_all", "shutdown", "udp_receive",
                              "udp_receive_from", "udp_send", "udp_send_to", "udp_connect", "connect", "accept"};
  static const char* moments[] = {"before_submit", "in_flight", "completed"};
  static const char* ways[] = {"close", "destroy", "release", "move_assign", "destroy_frame", "timeout", "close_listener"};
  static const char* sources[] = {"same_task", "other_task", "timer", "other_core"};
  return std::string(ops[int(s.op)]) + "/" + moments[int(s.when)] + "/" + ways[int(s.how)] + "/" +
         sources[int(s.from)];
}

// --- the other core: runs `work` on core 0 when asked, as a message posted from core 1 ---

struct other_core_channel {
  std::function<void()> work;          // set by core 0 before asking
  std::atomic<int> asked{0};           // core 0 -> core 1
  std::atomic<int> posting{0};         // core 1 is about to post (core 0 may spin on it)
  std::atomic<int> ran{0};             // the work ran on core 0
};
inline other_core_channel channel;

inline task<void> serve_other_core(std::atomic<bool>& done) {
  int served = 0;
  while (!done.load(std::memory_order_acquire)) {
    if (channel.asked.load(std::memory_order_acquire) == served) {
      co_await yield();
      continue;
    }
    ++served;
    channel.posting.store(served, std::memory_order_release);
    co_await submit_to(0, [] {
      channel.work();
      channel.ran.fetch_add(1, std::memory_order_release);
    });
  }
}

// Asks core 1 to post `work` to this core (0), and returns once the post is imminent: spins a
// little past that, so the message is in the inbox before this iteration's submissions.
inline void ask_other_core(std::function<void()> work) {
  channel.work = std::move(work);
  const int n = channel.asked.fetch_add(1, std::memory_order_acq_rel) + 1;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (channel.posting.load(std::memory_order_acquire) != n && std::chrono::steady_clock::now() < give_up) {
  }
  const auto settle = std::chrono::steady_clock::now() + std::chrono::microseconds(300);
  while (std::chrono::steady_clock::now() < settle) {
  }
}

// --- one case ---

using witness_check = std::function<witness_report()>;

// What lives across cases on core 0 (created once, so descriptor counts per case are stable).
struct case_env {
  plain_listener witness_listener;                         // tcp witnesses connect here
  plain_listener connect_target;                           // connect operations connect here
  std::optional<stream_pair> idle;                         // a read in flight on it forces reaps
  std::optional<buffer_pool> pool;
};

}  // namespace cogwheel::io_test

#include "close_anywhere_run.hpp"
