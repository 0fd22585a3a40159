/// @file
/// TCP: tcp_stream (connect, read, write, write_all, shutdown, close) and tcp_listener (bind,
/// accept). Every operation is one request to the core's backend (io_uring or epoll) and an
/// awaitable that allocates nothing, and composes with with_timeout / with_deadline: on a
/// timeout the request is cancelled and its completion awaited, so the kernel is done with the
/// buffer before the caller resumes, and bytes that were transferred anyway are returned rather
/// than lost.
///
/// Errors are the errno of the syscall or completion as a std::error_code (ECONNRESET, EPIPE,
/// ...); SIGPIPE is never raised (sends use MSG_NOSIGNAL). A stream or listener belongs to the
/// core it is used on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include <cogwheel/io/address.hpp>
#include <cogwheel/io/buffer_pool.hpp>
#include <cogwheel/io/connect_options.hpp>
#include <cogwheel/io/detail/kernel_operation.hpp>
#include <cogwheel/io/detail/pooled_recv_operation.hpp>
#include <cogwheel/io/detail/socket_handle.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/task.hpp>

namespace cogwheel {

class tcp_stream;

namespace detail {

// The stream of a connected socket `fd` (from connect or accept), its local address learnt now
// (getsockname). On failure fd is closed and the error returned: it is the connect's or the
// accept's failure. `identity`: the socket's (io_request::socket) when a connect already used
// it on the calling thread's loop; 0 for a socket new to cogwheel (an accepted one).
cogwheel::result<tcp_stream> connected_stream(int fd, std::uint64_t identity = 0) noexcept;

class connect_operation : public kernel_operation<connect_operation, cogwheel::result<tcp_stream>> {
 public:
  explicit connect_operation(const socket_address& to) noexcept : to_(to) {}
  connect_operation(connect_operation&& o) noexcept;
  ~connect_operation();

  std::coroutine_handle<> start(continuation c);
  void prepare(io_request& req) noexcept;
  cogwheel::result<tcp_stream> make_result(int res);

 private:
  socket_address to_;
  int fd_ = -1;
  int socket_error_ = 0;
  std::uint64_t socket_ = 0;  // fd_'s identity (io_request::socket), kept by the stream
};

// A read into an empty buffer completes at once with errc::invalid_argument: its 0 would be
// indistinguishable from "the peer closed".
class recv_operation : public kernel_operation<recv_operation, cogwheel::result<std::size_t>> {
 public:
  recv_operation(fd_operations& owner, int fd, std::span<std::byte> buf, int flags) noexcept
      : kernel_operation(&owner), fd_(fd), buf_(buf), flags_(flags) {}
  std::coroutine_handle<> start(continuation c) {
    if (buf_.empty()) {
      empty_ = true;
      return c.complete();
    }
    return kernel_operation::start(c);
  }
  void prepare(io_request& req) noexcept;
  cogwheel::result<std::size_t> make_result(int res) noexcept {
    if (empty_) return errc::invalid_argument;
    if (res < 0) return errno_code(res);
    return static_cast<std::size_t>(res);
  }

 private:
  int fd_;
  std::span<std::byte> buf_;
  int flags_;
  bool empty_ = false;
};

class send_operation : public kernel_operation<send_operation, cogwheel::result<std::size_t>> {
 public:
  send_operation(fd_operations& owner, int fd, std::span<const std::byte> buf) noexcept
      : kernel_operation(&owner), fd_(fd), buf_(buf) {}
  void prepare(io_request& req) noexcept;
  cogwheel::result<std::size_t> make_result(int res) noexcept {
    if (res < 0) return errno_code(res);
    return static_cast<std::size_t>(res);
  }

 private:
  int fd_;
  std::span<const std::byte> buf_;
};

// Sends until every byte is written, re-submitting after partial writes. On cancellation
// (a timeout, or the stream closing) it stops after the write in flight: no follow-up SQE
// names the descriptor again. *progress (when given) counts what went out in every outcome,
// since with_timeout returns only timed_out.
class send_all_operation : public kernel_operation<send_all_operation, cogwheel::result<void>> {
 public:
  send_all_operation(fd_operations& owner, int fd, std::span<const std::byte> buf,
                     std::size_t* progress = nullptr) noexcept
      : kernel_operation(&owner), fd_(fd), buf_(buf), progress_(progress) {
    if (progress_ != nullptr) *progress_ = 0;
  }
  void prepare(io_request& req) noexcept;
  bool on_result(int res) noexcept {
    if (res > 0) written_ += static_cast<std::size_t>(res);
    if (progress_ != nullptr) *progress_ = written_;
    if (res <= 0 || written_ == buf_.size() || cancel_requested()) return true;
    resubmit();
    return false;
  }
  cogwheel::result<void> make_result(int res) noexcept {
    if (written_ == buf_.size()) return {};
    if (res < 0) return errno_code(res);
    if (res == 0) return errc::broken_pipe;
    return errc::operation_canceled;
  }

 private:
  int fd_;
  std::span<const std::byte> buf_;
  std::size_t written_ = 0;
  std::size_t* progress_;
};

// shutdown(2) never blocks, so it is a plain syscall made when the operation starts, not a
// request: io_uring would run a shutdown SQE on a worker thread, which looks the descriptor
// number up only then, when it may name another socket.
class shutdown_operation : public operation<shutdown_operation> {
 public:
  shutdown_operation(int fd, int how) noexcept : fd_(fd), how_(how) {}
  std::coroutine_handle<> start(continuation c) noexcept;
  void cancel() noexcept {}
  cogwheel::result<void> result() const noexcept {
    if (error_ != 0) return errno_code(error_);
    return {};
  }

 private:
  int fd_;
  int how_;
  int error_ = 0;
};

class acceptor;
class accept_operation;

// What an accept produced: a connected socket its holder owns, or the errno of a failure.
struct accept_outcome {
  int fd = -1;    // >= 0: a connection
  int error = 0;  // the errno when fd < 0
  static accept_outcome of_cqe(int res) noexcept { return res >= 0 ? accept_outcome{res, 0} : accept_outcome{-1, -res}; }
  static accept_outcome failed(int err) noexcept { return {-1, err}; }
};

}  // namespace detail

/// A connected TCP socket. Move-only; destroying it closes it (see close()). Its operations
/// return awaitables that must be awaited on the core the stream is used on; the stream must not
/// move between creating an awaitable and awaiting it. A read and a write may be in flight at
/// the same time (from two tasks), each bounded by its own with_timeout / with_deadline.
class tcp_stream {
 public:
  /// No socket: is_open() is false and every operation fails with errc::bad_file_descriptor.
  tcp_stream() noexcept = default;
  /// Takes ownership of a connected TCP socket and learns its local address (getsockname); if
  /// that fails (fd is not an IPv4/IPv6 socket), local_address() is 0.0.0.0:0.
  explicit tcp_stream(int fd) noexcept;
  /// A stream may move while operations are in flight on it (they stay with it), but only on
  /// the thread they run on. The moved-from stream is closed (is_open() false).
  tcp_stream(tcp_stream&&) noexcept = default;
  /// Closes this stream first, as close() does, then takes `o`'s socket and operations.
  tcp_stream& operator=(tcp_stream&&) noexcept = default;

  /// Connects to `to`. awaitable<result<tcp_stream>>: the connected stream (its local address
  /// learnt), or the errno of socket(), connect() or getsockname (ECONNREFUSED, ENETUNREACH,
  /// EMFILE...). A connect that fails, times out or is cancelled leaves no socket open.
  static detail::connect_operation connect(const socket_address& to) noexcept {
    return detail::connect_operation(to);
  }
  /// A connection to `host` (a name, resolved as resolve() does, or a numeric address) on
  /// `port` by Happy Eyeballs v2 (RFC 8305, see connect_options.hpp): attempts to the resolved
  /// addresses staggered by connect_options::attempt_delay, the first to connect wins and the
  /// others are cancelled. One operation: a timeout bounds resolution and attempts as a whole.
  /// Errors: the last failed attempt's errno, or the resolution's error (a resolve_errc) when
  /// no address could be tried; errc::operation_canceled when stopped.
  static task<cogwheel::result<tcp_stream>> connect(std::string host, std::uint16_t port, connect_options options = {});

  /// Reads what has arrived, up to buf.size() bytes. awaitable<result<size_t>>: the bytes
  /// read, at least 1; 0 means the peer closed its side. An empty buf gives
  /// errc::invalid_argument. `buf` must outlive the co_await; a timeout that loses the race to
  /// the data returns the data.
  detail::recv_operation read(std::span<std::byte> buf) noexcept { return {sock_.operations(), sock_.fd(), buf, 0}; }
  /// awaitable<result<pooled_buffer>>: the bytes of one read in a buffer taken from `pool`
  /// only when they arrived (see buffer_pool.hpp); empty means the peer closed its side.
  /// errc::no_buffer_space: data is waiting but every buffer is held; retry after dropping
  /// some. Timeouts and cancellation as for read(): a buffer that raced in is returned, never
  /// dropped. `pool` must belong to this core and outlive the co_await.
  detail::pooled_recv_operation read_pooled(buffer_pool& pool) noexcept { return {sock_.operations(), sock_.fd(), pool.state(), false}; }
  /// read_pooled(pool) from this core's shared pool (buffer_pool::of_this_core(), created at
  /// first use).
  detail::pooled_recv_operation read_pooled() noexcept { return {sock_.operations(), sock_.fd(), nullptr, true}; }
  /// One send. awaitable<result<size_t>>: the bytes written, possibly fewer than buf.size();
  /// EPIPE / ECONNRESET once the peer is gone. `buf` must outlive the co_await.
  detail::send_operation write(std::span<const std::byte> buf) noexcept { return {sock_.operations(), sock_.fd(), buf}; }
  /// Writes every byte, sending again after partial writes. awaitable<result<void>>. On an
  /// error or a timeout an unknown prefix was sent: use the overload with `written` to know it.
  detail::send_all_operation write_all(std::span<const std::byte> buf) noexcept { return {sock_.operations(), sock_.fd(), buf}; }
  /// write_all(buf), and `written` counts the bytes that went out whatever the outcome: after
  /// with_timeout(s.write_all(buf, n), d) returns timed_out, exactly buf[0, n) was sent.
  /// `written` must outlive the operation.
  detail::send_all_operation write_all(std::span<const std::byte> buf, std::size_t& written) noexcept {
    return {sock_.operations(), sock_.fd(), buf, &written};
  }
  /// shutdown(2) with `how` (SHUT_WR: no more writes from this side, the peer reads
  /// end-of-stream). awaitable<result<void>>, completing at once (it never blocks).
  detail::shutdown_operation shutdown(int how = SHUT_WR) noexcept { return {sock_.fd(), how}; }

  /// Closes the socket (idempotent; also done by the destructor and by assigning onto it).
  /// Operations in flight on it are cancelled first: each completes at the loop's next
  /// iteration with errc::operation_canceled (or with what it transferred: write_all having
  /// counted what it sent), none submits again, and the peer sees the close (FIN, or RST with
  /// linger 0) as soon as the kernel has let go of them. No request ever acts on whatever
  /// socket takes the number next, at any moment of its life (see docs/close.md).
  /// Precondition: on the thread the in-flight operations run on (checked: misuse aborts with
  /// a message); a stream with none may be closed anywhere.
  void close() noexcept { sock_.close(); }
  /// Whether the stream holds a socket (false after close(), release() or a move from it).
  bool is_open() const noexcept { return sock_.is_open(); }
  /// The descriptor, for socket options cogwheel does not wrap (-1 when !is_open()). Still
  /// owned by the stream: do not close it.
  int native_handle() const noexcept { return sock_.fd(); }
  /// Gives up the descriptor without closing it (-1 if none). Operations in flight are
  /// cancelled as by close(): they belong to this stream, not to whoever takes the number,
  /// which may be closed or reused as soon as this returns.
  int release() noexcept { return sock_.release(); }

  /// TCP_NODELAY: on sends small writes at once instead of coalescing them (Nagle).
  /// Errors: the setsockopt errno (EBADF when closed).
  cogwheel::result<void> set_nodelay(bool on) noexcept;
  /// SO_KEEPALIVE: the kernel probes an idle connection and fails it when the peer is gone.
  cogwheel::result<void> set_keepalive(bool on) noexcept;
  /// SO_RCVBUF in bytes (the kernel doubles it and clamps it to net.core.rmem_max).
  cogwheel::result<void> set_receive_buffer_size(int bytes) noexcept;
  /// SO_SNDBUF in bytes (the kernel doubles it and clamps it to net.core.wmem_max).
  cogwheel::result<void> set_send_buffer_size(int bytes) noexcept;
  /// SO_LINGER: with on and 0 seconds, close() sends a reset (RST) instead of a FIN.
  cogwheel::result<void> set_linger(bool on, int seconds) noexcept;
  /// The address the socket is bound to, learnt when it was connected or accepted (no
  /// syscall): it cannot change while the stream is open. 0.0.0.0:0 when !is_open().
  socket_address local_address() const noexcept { return is_open() ? local_ : socket_address{}; }
  /// The peer's address (getpeername, one syscall per call). ENOTCONN when the socket is no
  /// longer connected, EBADF when closed.
  cogwheel::result<socket_address> peer_address() const noexcept;

 private:
  friend cogwheel::result<tcp_stream> detail::connected_stream(int fd, std::uint64_t identity) noexcept;
  tcp_stream(detail::socket_handle&& s, const socket_address& local) noexcept : sock_(std::move(s)), local_(local) {}

  detail::socket_handle sock_;
  socket_address local_;  // fixed once connected; kept here, not in sock_, which every socket shares
};

/// How tcp_listener::bind() sets up the listening socket.
struct listen_options {
  /// listen(2)'s backlog: connections the kernel queues before accepts take them (clamped by
  /// net.core.somaxconn).
  int backlog = 4096;
  bool reuse_address = true;  ///< SO_REUSEADDR: rebind while old connections sit in TIME_WAIT
  bool reuse_port = false;    ///< SO_REUSEPORT: one listener per core on the same port
  bool ipv6_only = false;     ///< IPV6_V6ONLY for IPv6 listeners (false: [::] takes IPv4 too)
  /// Connections the listener accepts ahead of accept() calls, at most (0 counts as 1). When
  /// that many wait unclaimed it stops accepting and the kernel's backlog applies, so a server
  /// that limits its connections by not calling accept() holds no more descriptors than this.
  std::size_t max_unclaimed = 64;
};

namespace detail {

class accept_operation : public operation<accept_operation> {
 public:
  explicit accept_operation(acceptor* a) noexcept : acceptor_(a) {}
  accept_operation(accept_operation&& o) noexcept : operation(std::move(o)), acceptor_(o.acceptor_) {}
  ~accept_operation();

  std::coroutine_handle<> start(continuation c);
  void cancel() noexcept;
  cogwheel::result<tcp_stream> result();

 private:
  friend class acceptor;
  acceptor* acceptor_;
  continuation continuation_;
  ready_node later_;  // completion deferred to the loop (cancel, or a listener closing)
  accept_outcome outcome_;
  bool waiting_ = false;
};

}  // namespace detail

/// A listening socket. Once accept() has been called, the listener keeps accepting ahead, one
/// accept request at a time, until listen_options::max_unclaimed connections wait unclaimed.
/// When the process runs out of descriptors (EMFILE/ENFILE) accept() reports it once and the
/// listener backs off (1 ms doubling to 1 s) before accepting again, so an accept loop never
/// spins while open connections keep being served; it recovers as descriptors free up.
/// Any other failed accept (ECONNABORTED; EINVAL once the listening socket is shut down) is
/// returned by one accept() call, and the listener accepts ahead again only when accept() is
/// next called: a socket that fails every accept costs one request per call, never a busy loop.
/// A listener belongs to the core that first calls accept() on it.
class tcp_listener {
 public:
  /// No socket: accept() fails with errc::bad_file_descriptor.
  tcp_listener() noexcept;
  /// Takes `o`'s socket and the connections accepted ahead; `o` is left closed.
  tcp_listener(tcp_listener&& o) noexcept;
  /// Closes this listener first (see close()), then takes `o`'s socket.
  tcp_listener& operator=(tcp_listener&& o) noexcept;
  /// Closes the listener (see close()).
  ~tcp_listener();

  /// A socket bound to `at` and listening (port 0: any free port, see local_address()).
  /// Errors: the errno of socket(), setsockopt(), bind() or listen() (EADDRINUSE, EACCES for a
  /// port below 1024...), or of getsockname.
  static cogwheel::result<tcp_listener> bind(const socket_address& at, listen_options options = {});

  /// The next connection, in arrival order among concurrent accept() calls.
  /// awaitable<result<tcp_stream>>: the stream (its local address learnt), or the errno of the
  /// accept (EMFILE / ENFILE once per exhaustion, see the class comment); errc::bad_file_descriptor
  /// on a closed listener, errc::operation_canceled when the listener closes while it waits.
  detail::accept_operation accept() noexcept { return detail::accept_operation(acceptor_); }

  /// The address the listener is bound to (a port 0 bind: the port chosen), learnt by bind();
  /// 0.0.0.0:0 once closed.
  socket_address local_address() const noexcept { return acceptor_ != nullptr ? local_ : socket_address{}; }
  /// The listening descriptor (-1 when closed). Still owned by the listener.
  int native_handle() const noexcept;
  /// Closes the socket (idempotent). Waiting accept() calls complete with
  /// errc::operation_canceled; connections accepted ahead and not yet claimed are closed.
  /// Precondition: on the core that accepts on it.
  void close() noexcept;

 private:
  detail::acceptor* acceptor_ = nullptr;  // owned; on the heap so its address survives moves
  socket_address local_;
};

}  // namespace cogwheel
