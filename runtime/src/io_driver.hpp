// io_driver: the narrow interface between a core's loop and the kernel interface it does I/O
// through. One implementation per backend: uring_driver (io_uring: operations run in the
// kernel, completions come back through the CQ) and epoll_driver (readiness: non-blocking
// syscalls, retried when the descriptor is ready). The loop owns everything else (dispatch,
// the set-aside completions, cancel-and-wait, the time driver, the inbox), so a further backend
// is one more implementation of this class.
//
// The contract every backend keeps:
//   - submit() never completes an operation inline: its completion comes out of a later wait()
//     or is appended to the loop's set-aside list, and the loop dispatches it.
//   - Each submission of a request completes exactly once; a cancelled one with -ECANCELED
//     unless its result won the race (then that result: bytes read are never lost).
//   - After cancel(), a wait() with no time bound returns only once the operation's completion
//     is available (in `out` or set aside): cancel-and-wait relies on it.
//
// Threading: the loop's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/options.hpp>
#include "live_metrics.hpp"

namespace cogwheel::detail {

// One completion taken from the backend and not yet dispatched.
struct completion {
  std::uint64_t user_data;  // the io_completion's address; 0 once consumed
  int res;
  unsigned flags;
};

class io_driver {
 public:
  virtual ~io_driver() = default;
  virtual backend_kind kind() const noexcept = 0;

  // Starts req for op (see loop_access.hpp). May append completions to the set-aside list.
  virtual void submit(io_completion& op, io_request& req) = 0;
  // Asks for op's operations to end early (all of its submissions when `all`).
  virtual void cancel(io_completion& op, bool all) = 0;
  // Closes fd after every request submitted before it has been handed to the kernel (which
  // then holds its own reference to the file): the number is free only from there on.
  virtual void close_after_queued(int fd) noexcept = 0;
  // Any thread of the runtime (the socket has no request here): stop watching fd.
  virtual void unwatch(int fd) noexcept = 0;
  // Hands the queued requests to the kernel now, without waiting for any.
  virtual void flush() noexcept = 0;
  // True when asking the kernel cannot wait: submissions queued, or completions it holds.
  virtual bool kernel_work_pending() noexcept = 0;
  // Hands queued submissions to the kernel and waits up to timeout_ns (-1: until something
  // completes, 0: a poll), appending what completed to `out`.
  virtual void wait(std::int64_t timeout_ns, std::vector<completion>& out) = 0;

  // Provided buffers for recv_pooled: `count` buffers of `size` bytes at `memory`, buffer i at
  // memory + i * stride (stride >= size), all given to the backend. Returns 0 or -errno
  // (-EOPNOTSUPP: none here).
  virtual int add_buffer_group(std::uint16_t group, std::byte* memory, std::uint32_t count, std::uint32_t size,
                               std::uint32_t stride) = 0;
  // Gives buffer `id` of `group` back after a completion handed it out.
  virtual void give_buffer(std::uint16_t group, std::uint16_t id) noexcept = 0;
  virtual void remove_buffer_group(std::uint16_t group) noexcept = 0;
};

// The backend options and COGWHEEL_BACKEND ask for (see options.hpp). `set_aside` is the
// loop's list of completions taken from the backend outside wait() (the loop dispatches it
// first); `stats` receives the backend's counters. Throws std::system_error naming the cause
// and the remedy when no backend can run, std::invalid_argument for a bad COGWHEEL_BACKEND.
std::unique_ptr<io_driver> make_io_driver(const runtime_options& options, live_metrics& stats,
                                          std::vector<completion>& set_aside);

}  // namespace cogwheel::detail
