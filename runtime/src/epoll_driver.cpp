#include "epoll_driver.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace cogwheel::detail {

namespace {

constexpr std::uint32_t input_events = EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR;
constexpr std::uint32_t output_events = EPOLLOUT | EPOLLHUP | EPOLLERR;

std::uint32_t readiness_for(const io_request& req) noexcept {
  if (req.opcode == io_opcode::poll) return (req.flags & POLLOUT) != 0 ? EPOLLOUT : EPOLLIN;
  switch (req.opcode) {
    case io_opcode::send:
    case io_opcode::sendmsg:
    case io_opcode::connect:
      return EPOLLOUT;
    default:
      return EPOLLIN;
  }
}

int result_of(long r) noexcept { return r < 0 ? -errno : static_cast<int>(r); }

}  // namespace

void epoll_driver::close_after_queued(int fd) noexcept { ::close(fd); }

void epoll_driver::unwatch(int fd) noexcept { ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr); }

std::unique_ptr<epoll_driver> epoll_driver::try_create(live_metrics& stats, std::vector<completion>& set_aside,
                                                       int& error) {
  std::unique_ptr<epoll_driver> d(new epoll_driver(stats, set_aside));
  d->epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (d->epfd_ < 0) {
    error = errno;
    return nullptr;
  }
  return d;
}

epoll_driver::~epoll_driver() {
  if (epfd_ >= 0) ::close(epfd_);
}

epoll_driver::descriptor& epoll_driver::entry(const io_request& req) {
  const auto fd = static_cast<std::size_t>(req.fd);
  if (fd >= descriptors_.size()) descriptors_.resize(std::max<std::size_t>(fd + 1, descriptors_.size() * 2));
  descriptor& d = descriptors_[fd];
  if (d.socket != req.socket || req.fresh) {
    d.socket = req.socket;
    d.registered = false;
    d.nonblocking = false;
  }
  return d;
}

int epoll_driver::prepare_descriptor(io_request& req, bool nonblocking) {
  descriptor& d = entry(req);
  req.fresh = false;
  const int fd = req.fd;
  if (nonblocking && !d.nonblocking) {
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ((fl & O_NONBLOCK) == 0 && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)) return -errno;
    d.nonblocking = true;
  }
  if (!d.registered) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.fd = fd;
    ++stats_.syscalls;
    int r = ::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev);
    if (r < 0 && errno == EEXIST) {
      // The number is in the set for a file this loop no longer knows: a socket handed out
      // (released) under it, or one whose descriptor was duplicated before it closed.
      ++stats_.syscalls;
      r = ::epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev);
    }
    if (r < 0) return -errno;
    ++stats_.epoll_registrations;
    d.registered = true;
  }
  return 0;
}

int epoll_driver::receive_pooled(io_request& req, unsigned& flags) {
  buffer_group* g = find_group(req.buffer_group);
  if (g == nullptr || g->free.empty()) {
    // Like a provided-buffer ring that is empty: no buffer (-ENOBUFS) at once, or, once asked to
    // wait for data first, when data is there (a peek tells; nothing is consumed).
    if (!req.poll_first) return -ENOBUFS;
    char probe;
    const int r = result_of(::recv(req.fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT));
    return r > 0 ? -ENOBUFS : r;
  }
  const std::uint16_t id = g->free.back();
  const int r = result_of(::recv(req.fd, g->memory + std::size_t{id} * g->stride, g->size, req.flags | MSG_DONTWAIT));
  if (r > 0) {
    g->free.pop_back();
    flags = io_flag_buffer | (unsigned{id} << io_buffer_id_shift);
  }
  return r;
}

int epoll_driver::perform(io_request& req, unsigned& flags) {
  flags = 0;
  ++stats_.syscalls;  // (a nop's too: counted as what the backend would do for an operation)
  switch (req.opcode) {
    case io_opcode::nop:
      return 0;
    case io_opcode::read:
      return result_of(::read(req.fd, req.addr, req.len));
    case io_opcode::recv:
      return result_of(::recv(req.fd, req.addr, req.len, req.flags | MSG_DONTWAIT));
    case io_opcode::recv_pooled:
      return receive_pooled(req, flags);
    case io_opcode::send:
      return result_of(::send(req.fd, req.addr, req.len, req.flags | MSG_DONTWAIT));
    case io_opcode::recvmsg:
      return result_of(::recvmsg(req.fd, static_cast<msghdr*>(req.addr), req.flags | MSG_DONTWAIT));
    case io_opcode::sendmsg:
      return result_of(::sendmsg(req.fd, static_cast<const msghdr*>(req.addr), req.flags | MSG_DONTWAIT));
    case io_opcode::connect: {
      if (req.wanted != 0) {
        // Woken for output: the connect has finished, its outcome is the socket's error.
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(req.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -errno;
        return -err;
      }
      if (const int r = prepare_descriptor(req, true); r < 0) return r;
      const int r = result_of(::connect(req.fd, static_cast<const sockaddr*>(req.addr), req.len));
      return r == -EINPROGRESS ? -EAGAIN : r;
    }
    case io_opcode::accept: {
      if (const int r = prepare_descriptor(req, true); r < 0) return r;
      return result_of(::accept4(req.fd, nullptr, nullptr, req.flags | SOCK_NONBLOCK));
    }
    case io_opcode::poll: {
      pollfd p{req.fd, static_cast<short>(req.flags), 0};
      const int r = result_of(::poll(&p, 1, 0));
      return r == 0 ? -EAGAIN : (r < 0 ? r : p.revents);
    }
  }
  return -EINVAL;
}

void epoll_driver::submit(io_completion& op, io_request& req) {
  op.request = &req;
  req.owner = &op;
  ++req.submissions;
  if (req.wanted != 0) return;  // one more of a batch (accepts): it waits with the others
  // Always tried first, a read after a short read as well (see the file's header): only the
  // syscall knows whether the descriptor is ready, and an edge comes only for what changes.
  unsigned flags = 0;
  const int r = perform(req, flags);
  if (r != -EAGAIN) {
    complete(req, r, flags);
    return;
  }
  if (const int e = prepare_descriptor(req, false); e < 0) {
    complete(req, e, 0);
    return;
  }
  link(req, readiness_for(req));
}

void epoll_driver::link(io_request& req, std::uint32_t wanted) {
  descriptor& d = descriptors_[static_cast<std::size_t>(req.fd)];  // entry(req) ran in prepare_descriptor
  req.wanted = wanted;
  d.waiting.push_back(req);
}

void epoll_driver::unlink(io_request& req) noexcept {
  req.unlink();
  req.wanted = 0;
}

void epoll_driver::complete(io_request& req, int res, unsigned flags) {
  if (--req.submissions == 0 && req.wanted != 0) unlink(req);
  sink_->push_back(completion{reinterpret_cast<std::uint64_t>(req.owner), res, flags});
}

void epoll_driver::cancel(io_completion& op, bool all) {
  io_request* req = op.request;
  if (req == nullptr || req->wanted == 0) return;  // not waiting: its completion is queued already
  for (unsigned n = all ? req->submissions : 1; n > 0; --n) complete(*req, -ECANCELED, 0);
}

void epoll_driver::on_ready(int fd, std::uint32_t events) {
  if (static_cast<std::size_t>(fd) >= descriptors_.size()) return;
  descriptor& d = descriptors_[static_cast<std::size_t>(fd)];
  // complete() unlinks only the request it completes, so the next one is taken first.
  for (io_request* req = d.waiting.first(); req != nullptr;) {
    io_request* next = d.waiting.after(*req);
    const bool ready = (req->wanted == EPOLLIN ? input_events : output_events) & events;
    while (ready && req->wanted != 0) {  // a batch (accepts) takes what is there
      unsigned flags = 0;
      const int r = perform(*req, flags);
      if (r == -EAGAIN) break;
      complete(*req, r, flags);
    }
    req = next;
  }
}

void epoll_driver::wait(std::int64_t timeout_ns, std::vector<completion>& out) {
  epoll_event events[256];
  int n;
  ++stats_.syscalls;
  if (have_pwait2_) {
    timespec ts{};
    ts.tv_sec = timeout_ns / 1'000'000'000;
    ts.tv_nsec = timeout_ns % 1'000'000'000;
    n = ::epoll_pwait2(epfd_, events, 256, timeout_ns < 0 ? nullptr : &ts, nullptr);
    if (n < 0 && errno == ENOSYS) {
      have_pwait2_ = false;  // before 5.11, or filtered: milliseconds, rounded up (never early)
      return wait(timeout_ns, out);
    }
  } else {
    const std::int64_t ms = timeout_ns < 0 ? -1 : (timeout_ns + 999'999) / 1'000'000;
    n = ::epoll_wait(epfd_, events, 256, static_cast<int>(std::min<std::int64_t>(ms, 1 << 30)));
  }
  if (n < 0) {
    if (errno == EINTR) return;
    std::fprintf(stderr, "cogwheel: epoll_wait failed: %s\n", std::strerror(errno));
    std::abort();
  }
  sink_ = &out;
  for (int i = 0; i < n; ++i) on_ready(events[i].data.fd, events[i].events);
  sink_ = &set_aside_;
}

// --- provided buffers: a stack of free ids per group ---

// Twice per pooled read (taking a buffer, giving it back): a plain loop over the few groups,
// as uring_driver::find_group (std::find_if's unrolled search costs more for one or two).
epoll_driver::buffer_group* epoll_driver::find_group(std::uint16_t group) noexcept {
  for (buffer_group& g : groups_)
    if (g.group == group) return &g;
  return nullptr;
}

int epoll_driver::add_buffer_group(std::uint16_t group, std::byte* memory, std::uint32_t count, std::uint32_t size,
                                   std::uint32_t stride) {
  if (find_group(group) != nullptr) return -EEXIST;
  buffer_group g;
  g.group = group;
  g.memory = memory;
  g.size = size;
  g.stride = stride;
  g.free.reserve(count);
  for (std::uint32_t id = count; id > 0; --id) g.free.push_back(static_cast<std::uint16_t>(id - 1));
  groups_.push_back(std::move(g));
  return 0;
}

void epoll_driver::give_buffer(std::uint16_t group, std::uint16_t id) noexcept {
  if (buffer_group* g = find_group(group)) g->free.push_back(id);  // reserved: never allocates
}

void epoll_driver::remove_buffer_group(std::uint16_t group) noexcept {
  if (buffer_group* g = find_group(group)) groups_.erase(groups_.begin() + (g - groups_.data()));
}

}  // namespace cogwheel::detail
