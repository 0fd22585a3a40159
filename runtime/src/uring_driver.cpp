#include "uring_driver.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cogwheel::detail {

static_assert(io_flag_buffer == IORING_CQE_F_BUFFER && io_buffer_id_shift == IORING_CQE_BUFFER_SHIFT,
              "completion flags pass through from the CQE unchanged");

namespace {

// v rounded up to a power of two, as the kernel sizes rings. Above 2^31 bit_ceil has no answer:
// such a size gives 2^31, which io_uring_queue_init refuses (EINVAL), as it would v.
unsigned ring_size(unsigned v) noexcept { return std::bit_ceil(std::min(v, 1u << 31)); }

}  // namespace

std::unique_ptr<uring_driver> uring_driver::try_create(const runtime_options& options, live_metrics& stats,
                                                       std::vector<completion>& set_aside, int& error) {
  std::unique_ptr<uring_driver> d(new uring_driver(stats, set_aside));
  const unsigned sq = ring_size(options.sq_entries == 0 ? 1 : options.sq_entries);
  const unsigned cq = options.cq_entries == 0 ? 4 * sq : ring_size(options.cq_entries);
  // Preferred set-up first (one issuer, task work deferred to our own io_uring_enter: the kernel
  // runs completions' task work only when we enter, not by interrupting us), then fallbacks for
  // older kernels.
  const unsigned attempts[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
      IORING_SETUP_COOP_TASKRUN,
      0,
  };
  int err = 0;
  for (unsigned flags : attempts) {
    io_uring_params p{};
    p.flags = flags | IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
    p.cq_entries = cq;
    err = io_uring_queue_init_params(sq, &d->ring_, &p);
    if (err != -EINVAL) break;
  }
  if (err < 0) {
    error = -err;
    d->ring_.ring_fd = -1;  // nothing to tear down
    return nullptr;
  }
  return d;
}

uring_driver::~uring_driver() {
  if (ring_.ring_fd >= 0) submit_queued();  // closes queued behind cancelled operations
  while (!buffer_rings_.empty()) remove_buffer_group(buffer_rings_.back().group);
  if (ring_.ring_fd >= 0) io_uring_queue_exit(&ring_);
}

void uring_driver::submit_queued() noexcept {
  while (io_uring_sq_ready(&ring_) != 0) submit_once();
}

bool uring_driver::submit_once() noexcept {
  ++stats_.syscalls;
  const int r = io_uring_submit(&ring_);
  if (r == -EBUSY || r == -EAGAIN) {
    // The kernel holds completions we have not consumed: set them aside, then retry.
    io_uring_get_events(&ring_);
    drain_cq(set_aside_);
    return false;
  }
  if (r < 0 && r != -EINTR) {
    std::fprintf(stderr, "cogwheel: io_uring_submit failed: %s\n", std::strerror(-r));
    std::abort();
  }
  return r >= 0;
}

io_uring_sqe* uring_driver::get_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    ++stats_.sq_full_flushes;  // each attempt, a refused one included
    submit_once();
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void uring_driver::close_after_queued(int fd) noexcept {
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_close(sqe, fd);
  io_uring_sqe_set_data64(sqe, 0);  // nobody waits for it; a failure (EBADF) has no one to tell
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

void uring_driver::flush() noexcept { submit_queued(); }

void uring_driver::submit(io_completion& op, io_request& req) {
  io_uring_sqe* sqe = get_sqe();
  switch (req.opcode) {
    case io_opcode::nop:
      io_uring_prep_nop(sqe);
      break;
    case io_opcode::read:
      io_uring_prep_read(sqe, req.fd, req.addr, req.len, 0);
      break;
    case io_opcode::recv:
      io_uring_prep_recv(sqe, req.fd, req.addr, req.len, req.flags);
      break;
    case io_opcode::recv_pooled:
      io_uring_prep_recv(sqe, req.fd, nullptr, req.len, req.flags);
      sqe->flags |= IOSQE_BUFFER_SELECT;
      sqe->buf_group = req.buffer_group;
      if (req.poll_first) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
      break;
    case io_opcode::send:
      io_uring_prep_send(sqe, req.fd, req.addr, req.len, req.flags);
      break;
    case io_opcode::recvmsg:
      io_uring_prep_recvmsg(sqe, req.fd, static_cast<msghdr*>(req.addr), static_cast<unsigned>(req.flags));
      break;
    case io_opcode::sendmsg:
      io_uring_prep_sendmsg(sqe, req.fd, static_cast<const msghdr*>(req.addr), static_cast<unsigned>(req.flags));
      break;
    case io_opcode::connect:
      io_uring_prep_connect(sqe, req.fd, static_cast<const sockaddr*>(req.addr), req.len);
      break;
    case io_opcode::accept:
      io_uring_prep_accept(sqe, req.fd, nullptr, nullptr, req.flags);
      break;
    case io_opcode::poll:
      io_uring_prep_poll_add(sqe, req.fd, static_cast<unsigned>(req.flags));
      break;
  }
  io_uring_sqe_set_data(sqe, &op);
  op.request = &req;
}

void uring_driver::cancel(io_completion& op, bool all) {
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_cancel64(sqe, reinterpret_cast<std::uint64_t>(&op), all ? IORING_ASYNC_CANCEL_ALL : 0);
  io_uring_sqe_set_data64(sqe, 0);  // its own outcome does not matter: op's completion does
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

void uring_driver::wait(std::int64_t timeout_ns, std::vector<completion>& out) {
  int r;
  ++stats_.syscalls;
  if (timeout_ns == 0) {
    // Not a wait with a zero timeout: the kernel arms a timer for that too, a cost every yield()
    // would pay. Submitting with GETEVENTS runs the
    // deferred task work and flushes overflow just the same, and returns at once.
    r = io_uring_submit_and_get_events(&ring_);
  } else if (timeout_ns < 0) {
    r = io_uring_submit_and_wait(&ring_, 1);
  } else {
    __kernel_timespec ts{};
    ts.tv_sec = timeout_ns / 1'000'000'000;
    ts.tv_nsec = timeout_ns % 1'000'000'000;
    io_uring_cqe* cqe = nullptr;
    r = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  }
  if (r < 0 && r != -ETIME && r != -EINTR && r != -EBUSY && r != -EAGAIN) {
    std::fprintf(stderr, "cogwheel: io_uring_enter failed: %s\n", std::strerror(-r));
    std::abort();
  }
  drain_cq(out);
}

void uring_driver::drain_cq(std::vector<completion>& out) {
  // Counted before peeking: io_uring_peek_batch_cqe flushes the kernel's overflow list itself
  // when it finds the CQ empty, so by the time the loop below sees an empty CQ the flag is
  // usually gone again (and a count taken only there stayed at 0).
  if (io_uring_cq_has_overflow(&ring_)) ++stats_.cq_overflows;
  for (;;) {
    io_uring_cqe* cqes[64];
    const unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, 64);
    for (unsigned i = 0; i < n; ++i) out.push_back(completion{cqes[i]->user_data, cqes[i]->res, cqes[i]->flags});
    io_uring_cq_advance(&ring_, n);
    if (n > 0) continue;
    if (!io_uring_cq_has_overflow(&ring_)) return;
    io_uring_get_events(&ring_);  // the kernel kept completions the CQ had no room for: fetch them
  }
}

// --- provided buffers ---

// Once per pooled buffer given back. A plain loop: the groups are few (one per pool, usually
// one), and std::find_if's unrolled-by-four search does more work to find the first.
uring_driver::buffer_ring* uring_driver::find_group(std::uint16_t group) noexcept {
  for (buffer_ring& b : buffer_rings_)
    if (b.group == group) return &b;
  return nullptr;
}

int uring_driver::add_buffer_group(std::uint16_t group, std::byte* memory, std::uint32_t count, std::uint32_t size,
                                   std::uint32_t stride) {
  if (find_group(group) != nullptr) return -EEXIST;
  buffer_ring b;
  b.group = group;
  b.memory = memory;
  b.size = size;
  b.stride = stride;
  b.mask = io_uring_buf_ring_mask(count);
  // Mapped, not allocated: the kernel wants the ring page-aligned.
  b.ring_bytes = std::size_t{count} * sizeof(io_uring_buf);
  void* ring = ::mmap(nullptr, b.ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ring == MAP_FAILED) return -errno;
  b.ring = static_cast<io_uring_buf_ring*>(ring);
  io_uring_buf_ring_init(b.ring);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<std::uintptr_t>(b.ring);
  reg.ring_entries = count;
  reg.bgid = group;
  const int err = io_uring_register_buf_ring(&ring_, &reg, 0);
  if (err < 0) {
    ::munmap(b.ring, b.ring_bytes);
    // Kernels before 5.19 know no such registration (EINVAL); seccomp or a trimmed kernel
    // may say EOPNOTSUPP.
    return err == -EINVAL ? -EOPNOTSUPP : err;
  }
  for (std::uint32_t id = 0; id < count; ++id)
    io_uring_buf_ring_add(b.ring, memory + std::size_t{id} * stride, size, static_cast<std::uint16_t>(id), b.mask,
                          static_cast<int>(id));
  io_uring_buf_ring_advance(b.ring, static_cast<int>(count));
  buffer_rings_.push_back(b);
  return 0;
}

void uring_driver::give_buffer(std::uint16_t group, std::uint16_t id) noexcept {
  buffer_ring* b = find_group(group);
  if (b == nullptr) return;
  io_uring_buf_ring_add(b->ring, b->memory + std::size_t{id} * b->stride, b->size, id, b->mask, 0);
  io_uring_buf_ring_advance(b->ring, 1);
}

void uring_driver::remove_buffer_group(std::uint16_t group) noexcept {
  buffer_ring* b = find_group(group);
  if (b == nullptr) return;
  io_uring_unregister_buf_ring(&ring_, group);
  ::munmap(b->ring, b->ring_bytes);
  buffer_rings_.erase(buffer_rings_.begin() + (b - buffer_rings_.data()));
}

}  // namespace cogwheel::detail
