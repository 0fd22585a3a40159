// pooled_recv_operation: tcp_stream::read_pooled(), a recv whose buffer the kernel takes from a
// buffer_pool's ring when data arrives (IOSQE_BUFFER_SELECT), so the wait holds no buffer.
//
// Submission: first a plain buffer-select recv (data already there costs one SQE, as read()
// does). A ring that is empty at that moment fails it with ENOBUFS even if no data has come;
// then once more with IORING_RECVSEND_POLL_FIRST, which waits for data before picking a buffer,
// so errc::no_buffer_space is reported only when data arrived and no buffer was free.
//
// Ownership: a completion that carries a buffer makes this operation its owner at once
// (on_completion, got_id_), on every path: make_result hands it to the awaiting coroutine, or,
// when the frame is going away or nobody asks for the result, the destructor returns it to the
// ring. The pool is counted as used by this operation from start() to its destruction, so it
// outlives its completion. Kept small: it sits in the frame of every waiting connection.
#pragma once

#include <coroutine>
#include <cstdint>

#include <cogwheel/io/buffer_pool.hpp>
#include <cogwheel/io/detail/kernel_operation.hpp>

namespace cogwheel::detail {

class pooled_recv_operation : public kernel_operation<pooled_recv_operation, cogwheel::result<pooled_buffer>> {
 public:
  // pool null: the core's shared pool (buffer_pool::of_this_core()).
  pooled_recv_operation(fd_operations& owner, int fd, pool_state* pool, bool shared) noexcept
      : kernel_operation(&owner), fd_(fd), pool_(pool), shared_(shared) {}
  pooled_recv_operation(pooled_recv_operation&& o) noexcept
      : kernel_operation(std::move(o)), fd_(o.fd_), pool_(o.pool_), shared_(o.shared_) {}
  ~pooled_recv_operation();

  std::coroutine_handle<> start(continuation c);
  void prepare(io_request& req) noexcept;
  bool on_completion(int res, unsigned flags) noexcept;
  cogwheel::result<pooled_buffer> make_result(int res) noexcept;

 private:
  int fd_;
  int start_error_ = 0;  // errno: the pool could not be used, completed at once with this
  pool_state* pool_;
  std::uint16_t got_id_ = 0;
  bool got_ = false;         // owns buffer got_id_ of pool_, filled with res_ bytes
  bool shared_;
  bool counted_ = false;     // this operation holds a use of pool_
  bool poll_first_ = false;  // second attempt, see above
};

}  // namespace cogwheel::detail
