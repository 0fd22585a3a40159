// uring_driver: the io_uring backend. Each request becomes one SQE (user_data: the owner's
// address); submissions and the wait are one io_uring_enter; completions are read from the CQ
// (kernel-side overflow included) in one pass.
//
// Set-up prefers IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN (task work runs only inside our own
// io_uring_enter), then falls back for older kernels.
#pragma once

#include <liburing.h>

#include <cstdint>
#include <vector>

#include "io_driver.hpp"

namespace cogwheel::detail {

class uring_driver final : public io_driver {
 public:
  // Returns -errno when the ring cannot be set up (the caller decides between failing and
  // another backend); see try_create.
  static std::unique_ptr<uring_driver> try_create(const runtime_options& options, live_metrics& stats,
                                                  std::vector<completion>& set_aside, int& error);
  ~uring_driver() override;

  backend_kind kind() const noexcept override { return backend_kind::io_uring; }
  void submit(io_completion& op, io_request& req) override;
  void cancel(io_completion& op, bool all) override;
  // A close SQE behind the queued ones: the kernel runs a submission's SQEs in order, and
  // each of them takes its file (a reference of its own) when it runs, before the close does.
  // Every operation on a socket is issued inline: none is left to io-wq (which would look the
  // number up later): that is why shutdown is a plain syscall, not an SQE.
  void close_after_queued(int fd) noexcept override;
  void flush() noexcept override;
  void unwatch(int) noexcept override {}  // nothing is remembered of a descriptor
  bool kernel_work_pending() noexcept override {
    return io_uring_sq_ready(&ring_) != 0 || io_uring_cq_ready(&ring_) != 0;
  }
  void wait(std::int64_t timeout_ns, std::vector<completion>& out) override;

  int add_buffer_group(std::uint16_t group, std::byte* memory, std::uint32_t count, std::uint32_t size,
                       std::uint32_t stride) override;
  void give_buffer(std::uint16_t group, std::uint16_t id) noexcept override;
  void remove_buffer_group(std::uint16_t group) noexcept override;

 private:
  // A registered provided-buffer ring (mapped: the kernel wants it page-aligned).
  struct buffer_ring {
    std::uint16_t group = 0;
    io_uring_buf_ring* ring = nullptr;
    std::size_t ring_bytes = 0;
    std::byte* memory = nullptr;
    std::uint32_t size = 0;
    std::uint32_t stride = 0;  // buffer i at memory + i * stride
    int mask = 0;
  };

  uring_driver(live_metrics& stats, std::vector<completion>& set_aside) : stats_(stats), set_aside_(set_aside) {}
  // A free SQE; never null: when the SQ is full it submits what is queued and retries (the
  // completions that frees stay in the kernel's CQ, or are set aside if the kernel refuses with
  // EBUSY). Nothing is dropped.
  io_uring_sqe* get_sqe();
  // One io_uring_submit; false when the kernel refused (EBUSY: the completions it holds are
  // set aside first, so the next attempt can go in).
  bool submit_once() noexcept;
  // submit_once until the kernel took every queued SQE.
  void submit_queued() noexcept;
  // Moves every CQE the ring holds into `out` (flushing kernel-side overflow), consuming them.
  void drain_cq(std::vector<completion>& out);
  buffer_ring* find_group(std::uint16_t group) noexcept;

  io_uring ring_{};
  live_metrics& stats_;
  std::vector<completion>& set_aside_;
  std::vector<buffer_ring> buffer_rings_;
};

}  // namespace cogwheel::detail
