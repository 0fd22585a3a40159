// epoll_driver: the readiness backend, for machines where io_uring is blocked. An operation
// is its non-blocking syscall: tried at once when submitted, and if the descriptor is not
// ready (EAGAIN), linked into that descriptor's waiters and tried again at each readiness
// event, in submission order. Descriptors are registered once, edge-triggered, for input and
// output; an edge can never be missed because every operation tries its syscall before it
// waits: an edge comes for an arrival, not for what is already there, so only a try tells an
// operation whether its descriptor is ready now.
// In particular a stream read tries its recv even when the previous read returned fewer bytes
// than it asked for. Such a read does not prove that the next recv would say EAGAIN, nor that
// the next arrival raises an edge: recv stops at an urgent mark (MSG_OOB) with the rest of the
// stream queued behind it and no edge to come; with SO_RCVLOWAT above 1 (settable at any time
// through native_handle()) an arrival below it raises no edge yet a recv returns it; and a
// read that stops short for a reason a later kernel adds would be the same. Only a syscall can
// tell these apart (FIONREAD, SIOCATMARK, getsockopt of SO_RCVLOWAT, a TCP_INQ control message
// says the queue is empty but not the watermark), so skipping the recv would save nothing that
// is not paid back by the check: the EAGAIN recv after a read that emptied the socket is this
// backend's price for being right whatever the peer and the socket's options are.
// Results are queued as completions and dispatched by the loop like CQEs, so the loop,
// the operations and their cancellation work unchanged:
//   - cancelling a waiting operation completes it with -ECANCELED having consumed nothing (a
//     timed-out read read no byte); one whose syscall already ran keeps its result;
//   - nothing ever runs in the kernel on a caller's buffer after its completion, so cancel and
//     wait never blocks.
// No provided buffers in the kernel: recv_pooled picks a buffer of the group here, when the
// socket has data.
#pragma once

#include <cstdint>
#include <vector>

#include "io_driver.hpp"

namespace cogwheel::detail {

class epoll_driver final : public io_driver {
 public:
  // Returns nullptr and sets `error` (an errno) when epoll cannot be set up.
  static std::unique_ptr<epoll_driver> try_create(live_metrics& stats, std::vector<completion>& set_aside, int& error);
  ~epoll_driver() override;

  backend_kind kind() const noexcept override { return backend_kind::epoll; }
  void submit(io_completion& op, io_request& req) override;
  void cancel(io_completion& op, bool all) override;
  // Every syscall ran when its operation started: nothing queued can name the number.
  void close_after_queued(int fd) noexcept override;
  void flush() noexcept override {}
  // EPOLL_CTL_DEL; thread-safe (the set is the kernel's; the table entry is left to this
  // loop, which treats the socket as new if it comes back: io_request::fresh).
  void unwatch(int fd) noexcept override;
  bool kernel_work_pending() noexcept override { return false; }  // syscalls ran already
  void wait(std::int64_t timeout_ns, std::vector<completion>& out) override;

  int add_buffer_group(std::uint16_t group, std::byte* memory, std::uint32_t count, std::uint32_t size,
                       std::uint32_t stride) override;
  void give_buffer(std::uint16_t group, std::uint16_t id) noexcept override;
  void remove_buffer_group(std::uint16_t group) noexcept override;

 private:
  // One descriptor number: its waiting requests (oldest first), and what was done to the
  // socket that has it now, `socket` (io_request::socket): a request of another socket under
  // the same number (the old one was closed, the number reused) finds the entry reset, so
  // nothing depends on the number's history. Waiters are never those of an older socket: an
  // operation keeps its socket open until its final completion.
  struct descriptor {
    intrusive_list<io_request> waiting;  // oldest first
    std::uint64_t socket = 0;
    bool registered = false;   // in the epoll set
    bool nonblocking = false;  // O_NONBLOCK set (accept and connect block otherwise)
  };
  struct buffer_group {
    std::uint16_t group = 0;
    std::byte* memory = nullptr;
    std::uint32_t size = 0;
    std::uint32_t stride = 0;  // buffer i at memory + i * stride
    std::vector<std::uint16_t> free;
  };

  epoll_driver(live_metrics& stats, std::vector<completion>& set_aside) : stats_(stats), set_aside_(set_aside) {}
  // The entry of req's descriptor, reset first when it is another socket's or req is fresh.
  descriptor& entry(const io_request& req);
  // The syscall of req once; -EAGAIN when the descriptor is not ready for it.
  int perform(io_request& req, unsigned& flags);
  int receive_pooled(io_request& req, unsigned& flags);
  // Makes sure req's descriptor is in the epoll set (and non-blocking when `nonblocking`);
  // -errno if not.
  int prepare_descriptor(io_request& req, bool nonblocking);
  void link(io_request& req, std::uint32_t wanted);
  void unlink(io_request& req) noexcept;
  // One submission of req ends with res: queued for dispatch; unlinked when it was the last.
  void complete(io_request& req, int res, unsigned flags);
  void on_ready(int fd, std::uint32_t events);
  buffer_group* find_group(std::uint16_t group) noexcept;

  int epfd_ = -1;
  bool have_pwait2_ = true;
  live_metrics& stats_;  // syscalls
  std::vector<completion>& set_aside_;
  std::vector<completion>* sink_ = &set_aside_;  // where complete() queues: wait()'s `out` during it
  std::vector<descriptor> descriptors_;          // by descriptor number
  std::vector<buffer_group> groups_;
};

}  // namespace cogwheel::detail
