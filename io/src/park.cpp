// park(): the record of a parked stream, and each core's lot of them (see park.hpp).
//
// A record owns its stream, a pooled read on it and a timer at `until`. Whichever comes first:
//   - the read completes (data, end of stream, an error; or the cancellation below): the timer
//     is cancelled, the record leaves the lot, wake gets the stream and the outcome, and the
//     record is freed;
//   - the timer fires: inside advance() the record only moves to the lot's expired list, and
//     the lot's one ready node is posted to the loop's expired batch (advance() does timer work
//     only, and no record carries a ready node of its own: 48 B each). The batch cancels each
//     expired record's read, whose completion then ends it as above, as timed_out unless bytes
//     raced in.
// Shutdown: the loop's hook destroys every record still in the lot (its read cancelled and
// waited for, its stream closed) without calling wake.
//
// Invariants: a record is linked in exactly one of its lot's two lists from park to its read's
// completion; its timer is scheduled only while it is in `parked` and not fired. One lot per
// loop, created at the first park on that loop's thread, freed by the loop's shutdown hook.
#include <cogwheel/io/park.hpp>

#include <cstring>
#include <new>

#include <cogwheel/io/detail/pooled_recv_operation.hpp>
#include <cogwheel/runtime/detail/frame_pool.hpp>
#include <cogwheel/runtime/detail/intrusive_list.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/detail/loop_services.hpp>
#include <cogwheel/runtime/detail/ready_queue.hpp>
#include <cogwheel/timer/node.hpp>

namespace cogwheel::detail {

namespace {

class parked_stream;

struct park_lot : shutdown_hook {
  event_loop* loop = nullptr;
  intrusive_list<parked_stream> parked;   // waiting: read in flight, timer scheduled
  intrusive_list<parked_stream> expired;  // timer fired, read not yet cancelled
  ready_node batch;                       // posted while `expired` is not empty
};

thread_local park_lot* this_thread_lot = nullptr;

class parked_stream : public list_link, private timer::timer_node {
 public:
  parked_stream(tcp_stream s, park_wake_fn wake, const std::byte* capture) noexcept
      : timer_node(timer_node::calls<&parked_stream::on_expire>{}), stream_(std::move(s)), read_(stream_.read_pooled()), wake_(wake) {
    std::memcpy(capture_, capture, park_capture_bytes);
  }
  parked_stream(const parked_stream&) = delete;
  parked_stream& operator=(const parked_stream&) = delete;
  // read_ (declared after stream_) is destroyed first: a read still in flight is cancelled and
  // waited for, then the stream closes.
  ~parked_stream() { cancel_timer(*lot_->loop, *this); }

  static void* operator new(std::size_t n) { return allocate_frame(n); }
  static void operator delete(void* p, std::size_t n) noexcept { free_frame(p, n); }

  void start(park_lot& lot, clock::time_point until) {
    lot_ = &lot;
    lot.parked.push_back(*this);
    schedule_timer(*lot.loop, *this, until);
    read_.start(continuation(&parked_stream::on_read, this)).resume();
  }

  // The lot's batch: the timer fired, cancel the read (its completion ends the record).
  void cut() noexcept {
    lot_->parked.push_back(*this);
    read_.cancel();
  }

 private:
  static void on_expire(timer::timer_node& n) noexcept {
    auto& self = static_cast<parked_stream&>(n);
    self.fired_ = true;
    park_lot& lot = *self.lot_;
    self.list_link::unlink();
    if (lot.expired.empty()) post_expired(*lot.loop, lot.batch, continuation(&cut_expired, &lot));
    lot.expired.push_back(self);
  }
  static std::coroutine_handle<> cut_expired(void* p) noexcept {
    static_cast<park_lot*>(p)->expired.drain([](parked_stream& r) { r.cut(); });
    return std::noop_coroutine();
  }

  // The read's completion: hand the stream and the outcome to wake, free the record.
  static std::coroutine_handle<> on_read(void* p) noexcept {
    auto* self = static_cast<parked_stream*>(p);
    cogwheel::result<pooled_buffer> got = self->read_.result();
    if (self->fired_ && !got && got.error() == errc::operation_canceled) got = errc::timed_out;
    tcp_stream s = std::move(self->stream_);
    const park_wake_fn wake = self->wake_;
    alignas(void*) std::byte capture[park_capture_bytes];
    std::memcpy(capture, self->capture_, park_capture_bytes);
    delete self;  // unlinks it; the read has completed, so nothing is waited for
    wake(capture, std::move(s), std::move(got));
    return std::noop_coroutine();
  }

  tcp_stream stream_;
  pooled_recv_operation read_;
  park_lot* lot_ = nullptr;
  park_wake_fn wake_;
  alignas(void*) std::byte capture_[park_capture_bytes];
  bool fired_ = false;
};

void drop_lot(shutdown_hook& h) noexcept {
  auto* lot = static_cast<park_lot*>(&h);
  if (this_thread_lot == lot) this_thread_lot = nullptr;
  lot->batch.unlink();
  lot->expired.drain([](parked_stream& r) { delete &r; });
  lot->parked.drain([](parked_stream& r) { delete &r; });
  delete lot;
}

park_lot& lot_of_this_thread() {
  event_loop& loop = current_loop();
  if (this_thread_lot != nullptr && this_thread_lot->loop == &loop) return *this_thread_lot;
  auto* lot = new park_lot();
  lot->loop = &loop;
  lot->on_shutdown = &drop_lot;
  add_shutdown_hook(loop, *lot);
  this_thread_lot = lot;
  return *lot;
}

}  // namespace

void park_stream(tcp_stream s, clock::time_point until, park_wake_fn wake, const std::byte* capture) {
  park_lot& lot = lot_of_this_thread();
  auto* record = new parked_stream(std::move(s), wake, capture);
  record->start(lot, until);
}

}  // namespace cogwheel::detail
