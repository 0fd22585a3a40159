// One close_anywhere case, start to finish: set up the victim and its old peer, start the
// operation, end the victim at the scenario's moment from its source, let witnesses take the
// free numbers, let every stray request run, then check.
#pragma once

#include <variant>

namespace cogwheel::io_test {

inline constexpr std::string_view old_bytes = "old connection's bytes";

// The operation's outcome, whichever kind it is.
using outcome = std::variant<std::monostate, result<std::size_t>, result<pooled_buffer>, result<void>,
                             result<std::pair<std::size_t, socket_address>>, result<tcp_stream>>;

struct case_state {
  case_state(const scenario& s, case_env& e) : sc(s), env(e) {}
  const scenario& sc;
  case_env& env;
  std::optional<tcp_stream> stream;    // the victim (stream ops)
  std::optional<tcp_stream> old_peer;  // its peer
  std::optional<udp_socket> udp;       // the victim (UDP ops)
  std::optional<udp_socket> udp_peer;
  std::optional<tcp_listener> listener;  // the victim (accept)
  socket_address udp_peer_at{};
  std::vector<std::byte> out;  // what a write sends
  std::size_t prefilled = 0;   // pattern bytes written before the operation (in_flight writes)
  std::size_t written = 0;     // write_all's count
  std::array<std::byte, 256> in{};
  outcome got;
  bool finished = false;
  frame_holder op_frame{};
  frame_holder reaper{};  // a read in flight on env.idle, destroyed to force a reap
  std::vector<witness_check> witnesses;

  void add_witness() {
    if (is_stream_op(sc.op)) {
      auto w = std::make_shared<tcp_witness>(env.witness_listener);
      witnesses.push_back([w] { return w->check(); });
    } else if (is_udp_op(sc.op)) {
      auto w = std::make_shared<udp_witness>();
      witnesses.push_back([w] { return w->check(); });
    } else if (sc.op == op_kind::connect) {
      auto w = std::make_shared<unconnected_witness>();
      witnesses.push_back([w] { return w->check(); });
      auto t = std::make_shared<tcp_witness>(env.witness_listener);
      witnesses.push_back([t] { return t->check(); });
    } else {
      auto w = std::make_shared<listener_witness>();
      witnesses.push_back([w] { return w->check(); });
    }
  }

  task<void> operation() {
    auto timed = [this](auto op) { return with_timeout(std::move(op), sc.how == way::timeout ? 3ms : 10s); };
    switch (sc.op) {
      case op_kind::read: got = co_await timed(stream->read(in)); break;
      case op_kind::read_pooled: got = co_await timed(stream->read_pooled(*env.pool)); break;
      case op_kind::write: got = co_await timed(stream->write(out)); break;
      case op_kind::write_all: got = co_await timed(stream->write_all(out, written)); break;
      case op_kind::shutdown: got = co_await timed(stream->shutdown()); break;
      case op_kind::udp_receive: got = co_await timed(udp->receive(in)); break;
      case op_kind::udp_receive_from: got = co_await timed(udp->receive_from(in)); break;
      case op_kind::udp_send: got = co_await timed(udp->send(out)); break;
      case op_kind::udp_send_to: got = co_await timed(udp->send_to(out, udp_peer_at)); break;
      case op_kind::udp_connect: got = co_await timed(udp->connect(udp_peer_at)); break;
      case op_kind::connect: {
        sockaddr_in at = env.connect_target.at;
        auto to = socket_address::from_sockaddr(reinterpret_cast<sockaddr*>(&at), sizeof at);
        got = co_await timed(tcp_stream::connect(*to));
        break;
      }
      case op_kind::accept: got = co_await timed(listener->accept()); break;
    }
    finished = true;
    if (sc.how == way::timeout) add_witness();  // the operation (and a connect's socket) is gone
  }

  // Ends the victim the scenario's way; then witnesses take the free numbers at once.
  void end_victim() {
    if (sc.when == moment::completed && reaper.frame) std::exchange(reaper.frame, {}).destroy();
    switch (sc.how) {
      case way::close:
        if (stream) stream->close();
        if (udp) udp->close();
        break;
      case way::destroy:
        stream.reset();
        udp.reset();
        break;
      case way::release:
        if (stream) ::close(stream->release());
        if (udp) ::close(udp->release());
        break;
      case way::move_assign:
        if (stream) *stream = tcp_stream{};
        if (udp) *udp = udp_socket{};
        break;
      case way::destroy_frame:
        if (op_frame.frame) std::exchange(op_frame.frame, {}).destroy();
        break;
      case way::close_listener:
        listener->close();
        break;
      case way::timeout:
        return;
    }
    add_witness();
  }

  task<std::string> set_up() {
    if (is_stream_op(sc.op)) {
      auto p = co_await connect_pair();
      if (!p) co_return "set-up: " + p.error().message();
      stream = std::move(p->server);
      old_peer = std::move(p->client);
      if (is_write_op(sc.op) && sc.when == moment::in_flight) {
        // Fill the send path so that the write has to wait in the kernel.
        (void)old_peer->set_receive_buffer_size(4096);
        (void)stream->set_send_buffer_size(4096);
        const auto fill = pattern_bytes(1 << 20);
        for (;;) {
          const long n = ::send(stream->native_handle(), fill.data() + prefilled, fill.size() - prefilled,
                                MSG_DONTWAIT | MSG_NOSIGNAL);
          if (n <= 0) break;
          prefilled += static_cast<std::size_t>(n);
        }
      }
      const auto all = pattern_bytes(prefilled + 64 * 1024);
      out.assign(all.begin() + static_cast<std::ptrdiff_t>(prefilled), all.end());
      if (sc.when == moment::completed && is_read_op(sc.op)) (void)co_await old_peer->write_all(bytes_of(old_bytes));
    } else if (is_udp_op(sc.op)) {
      auto a = udp_socket::bind(socket_address::ipv4_loopback(0));
      auto b = udp_socket::bind(socket_address::ipv4_loopback(0));
      if (!a || !b) co_return "set-up: udp bind";
      udp = std::move(*a);
      udp_peer = std::move(*b);
      udp_peer_at = udp_peer->local_address();
      if (sc.op != op_kind::udp_connect) {
        auto c = co_await udp->connect(udp_peer_at);
        auto d = co_await udp_peer->connect(udp->local_address());
        if (!c || !d) co_return "set-up: udp connect";
      }
      const auto data = pattern_bytes(512);
      out.assign(data.begin(), data.end());
      if (sc.when == moment::completed && is_read_op(sc.op)) (void)co_await udp_peer->send(bytes_of(old_bytes));
    } else if (sc.op == op_kind::accept) {
      auto l = tcp_listener::bind(socket_address::ipv4_loopback(0));
      if (!l) co_return "set-up: listen";
      listener = std::move(*l);
    }
    if (sc.when == moment::completed) {
      reaper = hold([](tcp_stream& s) -> task<void> {
        std::array<std::byte, 16> buf;
        (void)co_await s.read(buf);
      }(env.idle->server));
    }
    co_await yield();  // the reaper's read goes into the kernel
    co_return std::string{};
  }

  void start() { op_frame = hold(operation()); }

  // Runs start() and end_victim() at the scenario's moment, from its source.
  task<void> play() {
    auto end = [this] { end_victim(); };
    if (sc.how == way::timeout) {
      start();
      while (!finished) co_await sleep_for(1ms);
      co_return;
    }
    if (sc.when == moment::in_flight) {
      start();
      co_await sleep_for(3ms);  // the operation is in the kernel by now
      switch (sc.from) {
        case source::same_task: end(); break;
        case source::other_task: co_await yield(); end(); break;
        case source::timer: co_await sleep_for(1ms); end(); break;
        case source::other_core: {
          const int ran = channel.ran.load();
          ask_other_core(end);
          while (channel.ran.load() == ran) co_await yield();
          break;
        }
      }
      co_return;
    }
    // before_submit and completed: the end comes in the iteration that started the operation.
    switch (sc.from) {
      case source::same_task:
        start();
        end();
        break;
      case source::other_task:
        co_await when_all([this]() -> task<void> { co_await yield(); start(); }(),
                          [end]() -> task<void> { co_await yield(); end(); }());
        break;
      case source::timer:
        co_await when_all([this]() -> task<void> { co_await sleep_for(1ms); start(); }(),
                          [end]() -> task<void> { co_await sleep_for(1ms); end(); }());
        break;
      case source::other_core: {
        const int ran = channel.ran.load();
        co_await sleep_for(1ms);  // from the expired batch: the inbox is read next
        start();
        ask_other_core(end);
        while (channel.ran.load() == ran) co_await yield();
        break;
      }
    }
  }

  // After the operation finished and every stray request had its chance.
  std::string check() {
    for (const witness_check& w : witnesses)
      if (std::string r = w(); !r.empty()) return "witness: " + r;
    auto bad_error = [&](const std::error_code& e) -> std::string {
      if (e == errc::operation_canceled || e == errc::timed_out) return {};
      return "ended with " + e.message();
    };
    if (auto* r = std::get_if<result<std::size_t>>(&got)) {
      if (!*r) return bad_error(r->error());
      if (is_read_op(sc.op)) {
        if (sc.when != moment::completed || text_of(std::span(in).first(**r)) != old_bytes)
          return "a read returned " + std::to_string(**r) + " bytes that were not the old peer's";
      } else if (**r == 0) {
        return "a write reported 0 bytes";
      } else {
        written = **r;
      }
    } else if (auto* p = std::get_if<result<pooled_buffer>>(&got)) {
      if (!*p) return bad_error(p->error());
      if (sc.when != moment::completed || text_of((*p)->bytes()) != old_bytes) return "a pooled read returned foreign bytes";
    } else if (auto* v = std::get_if<result<void>>(&got)) {
      if (!*v) return bad_error(v->error());
      if (sc.op == op_kind::write_all && written != out.size()) return "write_all succeeded short";
    } else if (auto* f = std::get_if<result<std::pair<std::size_t, socket_address>>>(&got)) {
      if (!*f) return bad_error(f->error());
      if (sc.when != moment::completed || text_of(std::span(in).first((*f)->first)) != old_bytes)
        return "receive_from returned a foreign datagram";
    } else if (auto* s = std::get_if<result<tcp_stream>>(&got)) {
      if (!*s) return bad_error(s->error());
    } else if (sc.how != way::destroy_frame) {
      return "the operation never finished";
    }
    return {};
  }

  // The old peer got exactly what the writes reported, then the end of the stream.
  task<std::string> check_old_peer() {
    if (!old_peer || !is_write_op(sc.op)) co_return std::string{};
    auto got = co_await read_to_eof(*old_peer);
    if (!got) co_return "old peer: " + got.error().message();
    const auto expected = pattern_bytes(prefilled + written);
    if (*got != expected)
      co_return "old peer got " + std::to_string(got->size()) + " bytes, expected " + std::to_string(expected.size());
    co_return std::string{};
  }
};

inline task<std::string> run_case(const scenario& sc, case_env& env) {
  const int descriptors = open_descriptors();
  std::string failure;
  {
    case_state c(sc, env);
    failure = co_await c.set_up();
    if (!failure.empty()) co_return failure;
    co_await c.play();
    // One more witness once the loop went round (a number freed by the kernel later).
    co_await yield();
    c.add_witness();
    for (int i = 0; i < 200 && !c.finished; ++i) co_await sleep_for(1ms);
    co_await sleep_for(3ms);  // any stray request has run by now
    failure = c.check();
    if (failure.empty()) failure = co_await c.check_old_peer();
    if (c.op_frame.frame) c.op_frame.frame.destroy();
    if (c.reaper.frame) c.reaper.frame.destroy();
    // The connect target's backlog: accepted and dropped, so later cases start alike.
    while (true) {
      const int fd = ::accept4(env.connect_target.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      ::close(fd);
    }
  }
  co_await sleep_for(2ms);
  if (failure.empty() && open_descriptors() != descriptors)
    failure = "descriptors: " + std::to_string(descriptors) + " before, " + std::to_string(open_descriptors()) + " after";
  if (failure.empty() && env.pool->available() != env.pool->capacity()) failure = "a pooled buffer was not returned";
  co_return failure;
}

}  // namespace cogwheel::io_test
