#include "resolver_sockets.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <cogwheel/runtime/detail/loop_services.hpp>

namespace cogwheel::detail {

struct socket_watchers::watcher : io_completion {
  socket_watchers* set = nullptr;
  ares_socket_t fd = ARES_SOCKET_BAD;
  short events = 0;  // POLLIN or POLLOUT
  io_request request;
  bool in_flight = false;
  bool wanted = false;
  bool retired = false;
  bool dispatching = false;  // inside process(): c-ares may change wants or close the socket
};

socket_watchers::watcher* socket_watchers::find(ares_socket_t fd, short events) noexcept {
  for (watcher* w : active_)
    if (w->fd == fd && w->events == events) return w;
  return nullptr;
}

void socket_watchers::want(ares_socket_t fd, bool readable, bool writable) {
  set_wanted(fd, POLLIN, readable);
  set_wanted(fd, POLLOUT, writable);
}

void socket_watchers::set_wanted(ares_socket_t fd, short events, bool wanted) {
  watcher* w = find(fd, events);
  if (w == nullptr) {
    if (!wanted) return;
    w = new watcher();
    w->set = this;
    w->fd = fd;
    w->events = events;
    // The socket's identity (io_request::socket): the other direction's, if watched already; a
    // socket c-ares opens under a closed one's number gets new watchers (forget), so a new one.
    const watcher* other = find(fd, events == POLLIN ? short{POLLOUT} : short{POLLIN});
    w->request.socket = other != nullptr ? other->request.socket : new_socket_identity();
    w->on_cqe = &socket_watchers::on_poll;
    active_.push_back(w);
  }
  w->wanted = wanted;
  if (wanted && !w->in_flight && !w->dispatching) submit(*w);
  if (!wanted && w->in_flight) cancel_async(*loop_, *w);  // completes with -ECANCELED
}

void socket_watchers::submit(watcher& w) {
  w.request.set(io_opcode::poll, w.fd, nullptr, 0, w.events);
  w.in_flight = true;
  detail::submit(*loop_, w, w.request);
}

void socket_watchers::forget(ares_socket_t fd) noexcept {
  for (short events : {short{POLLIN}, short{POLLOUT}})
    if (watcher* w = find(fd, events)) retire(*w);
}

void socket_watchers::retire(watcher& w) noexcept {
  active_.erase(std::find(active_.begin(), active_.end(), &w));
  w.retired = true;
  w.wanted = false;
  if (w.in_flight) {
    cancel_async(*loop_, w);
    retired_.push_back(&w);
  } else if (!w.dispatching) {
    delete &w;
  }
}

void socket_watchers::on_poll(io_completion& c, int res, unsigned /*flags*/) noexcept {
  auto& w = static_cast<watcher&>(c);
  socket_watchers& set = *w.set;
  w.in_flight = false;
  if (w.retired) {
    if (set.shutting_down_) return;  // shutdown() deletes it once its wait returns
    set.retired_.erase(std::find(set.retired_.begin(), set.retired_.end(), &w));
    delete &w;
    return;
  }
  if (res == -ECANCELED && !w.wanted) return;  // withdrawn: it stays idle until wanted again
  if (res != -ECANCELED) {
    // Ready, or an error on the socket (c-ares finds it when it reads or writes).
    w.dispatching = true;
    const ares_socket_t fd = w.fd;
    set.process_(set.ctx_, w.events == POLLIN ? fd : ARES_SOCKET_BAD, w.events == POLLOUT ? fd : ARES_SOCKET_BAD);
    w.dispatching = false;
    if (w.retired) {  // c-ares closed the socket meanwhile
      if (!w.in_flight) delete &w;
      return;
    }
  }
  if (w.wanted && !w.in_flight && !set.shutting_down_) set.submit(w);
}

void socket_watchers::shutdown() noexcept {
  shutting_down_ = true;
  while (!active_.empty()) retire(*active_.back());
  for (watcher* w : retired_) {
    if (w->in_flight) cancel_and_wait(*loop_, *w, w->in_flight);
    delete w;
  }
  retired_.clear();
}

namespace {

ares_socket_t open_socket(int domain, int type, int protocol, void*) {
  return ::socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
}

int close_socket(ares_socket_t fd, void* user) {
  static_cast<socket_watchers*>(user)->forget(fd);
  close_descriptor(fd);
  return 0;
}

int connect_socket(ares_socket_t fd, const sockaddr* to, ares_socklen_t len, void*) {
  return ::connect(fd, to, len);
}

ares_ssize_t receive_from(ares_socket_t fd, void* buf, size_t len, int flags, sockaddr* from,
                          ares_socklen_t* from_len, void*) {
  return ::recvfrom(fd, buf, len, flags | MSG_DONTWAIT, from, from_len);
}

ares_ssize_t send_vector(ares_socket_t fd, const iovec* iov, int count, void*) {
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<std::size_t>(count);
  return ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

const ares_socket_functions socket_watchers::functions = {open_socket, close_socket, connect_socket, receive_from,
                                                          send_vector};

}  // namespace cogwheel::detail
