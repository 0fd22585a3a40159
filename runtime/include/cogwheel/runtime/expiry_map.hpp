/// @file
/// expiry_map: keys with deadlines on this core's timer queue, handed out in batches as they
/// fall due (docs/expiry_map.md).
///
/// Memory per key beyond sizeof(Key) and sizeof(Value), at 10^7 keys (u64 -> u64 measured by
/// bench/expiry_map_bench.cpp): the entry's timer_node (16 bytes), the wheel's slot entry for it
/// (8 bytes; the heap twin's array entry is 8 too), the key index (8-byte slots at a load of at
/// most 3/4: 13.4 bytes at 10^7 keys, 10.7 to 21.3 in general), plus padding of the entry to its
/// alignment and the unused tail of the last 256 KiB chunk: about 38 bytes, at most 48.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include <cogwheel/runtime/detail/expiry_index.hpp>
#include <cogwheel/runtime/detail/expiry_slab.hpp>
#include <cogwheel/runtime/detail/loop_access.hpp>
#include <cogwheel/runtime/operation.hpp>
#include <cogwheel/runtime/result.hpp>
#include <cogwheel/runtime/time.hpp>
#include <cogwheel/timer/node.hpp>
#include <cogwheel/timer/ticks.hpp>

namespace cogwheel {

/// A hash map whose keys expire: each key has a deadline on the timer queue of the core that
/// created the map (its wheel, or the heap twin when the runtime runs on that), and leaves the
/// map when the deadline passes: never before it, at most one tick plus one loop iteration
/// after it, together with every other key due in the same tick. A task waiting in
/// `co_await expired()` receives those keys and values as one batch; with no task waiting they
/// are simply dropped.
///
/// Deadlines are `now() + ttl` rounded up to the queue's tick, as every timer of the runtime:
/// expiry() reports the rounded time. A key past its deadline is absent to every member (find()
/// returns nullptr for it even when the queue has not fired it yet) except size(), which counts
/// it until it leaves.
///
/// Entries live in a pool of the map's own (256 KiB chunks, a free list): an operation
/// allocates nothing but the memory a new entry takes when the pool has no vacant slot (and the
/// index doubling now and then; the batch handed to expired() is one vector). No per-key
/// callback: one expiry function per map type, however many maps exist.
///
/// Threading: the loop thread that created it, only (construction, every member, destruction).
/// Not copyable, not movable (its entries point back to it).
template <class Key, class Value, class Hash = std::hash<Key>, class Eq = std::equal_to<Key>>
class expiry_map {
  struct entry : timer::timer_node {
    template <class K, class V>
    entry(K&& k, V&& v) : timer_node(timer_node::calls<&expiry_map::on_due>{}), key(std::forward<K>(k)), value(std::forward<V>(v)) {}
    Key key;
    Value value;
  };
  using slab_type = detail::expiry_slab<sizeof(entry), alignof(entry)>;

 public:
  /// One batch of expired entries (keys and values, moved out of the map).
  using batch = std::vector<std::pair<Key, Value>>;

  /// The awaitable expired() returns (a cancellable operation, see operation.hpp).
  class expired_operation;

  /// An empty map on the calling thread's loop. Precondition: called on a cogwheel loop thread.
  explicit expiry_map(Hash hash = Hash(), Eq eq = Eq())
      : loop_(&detail::current_loop()), scale_(detail::timer_tick(*loop_)), slab_(this), hash_(std::move(hash)), eq_(std::move(eq)) {}
  expiry_map(const expiry_map&) = delete;             ///< Not copyable.
  expiry_map& operator=(const expiry_map&) = delete;  ///< Not copyable.
  /// Cancels every deadline and destroys every entry; a task waiting in expired() resumes with
  /// errc::operation_canceled. Precondition: on the map's loop thread, while that loop runs.
  ~expiry_map();

  /// Sets k's value and its deadline to now() + ttl (ttl <= 0: past at once, it leaves at the
  /// next iteration). Returns true when k was new (absent, or past its deadline: that entry's
  /// value is replaced and not delivered to expired()). Throws std::bad_alloc when the pool
  /// cannot grow.
  bool insert_or_assign(Key k, Value v, clock::duration ttl);
  /// Moves k's deadline to now() + ttl, O(1) (a later deadline applied lazily, when the old one
  /// comes up); a persistent k expires again. False when k is absent or past its deadline.
  bool expire_after(const Key& k, clock::duration ttl);
  /// k no longer expires. False when k is absent or past its deadline.
  bool persist(const Key& k);
  /// Removes k (its value destroyed, not delivered to expired()). False when k is absent or past
  /// its deadline (such an entry is removed all the same).
  bool erase(const Key& k);
  /// k's value, or nullptr when k is absent or past its deadline (even before the timer queue
  /// fired it). The pointer stays valid until k is erased, replaced or expires.
  Value* find(const Key& k);
  /// When k expires (its deadline rounded up to a tick); nullopt when k is absent, past its
  /// deadline, or persistent.
  std::optional<clock::time_point> expiry(const Key& k) const;
  /// How many entries the map holds, including any past their deadline that have not left yet
  /// (they leave at the tick that fires them).
  std::size_t size() const noexcept { return index_.size(); }
  /// Whether size() == 0.
  bool empty() const noexcept { return size() == 0; }

  /// `co_await expired()`: the next batch of entries whose deadline passed, already removed from
  /// the map (every entry that the timer queue fired in one advance: all of one tick at least).
  /// Waits for the next batch; the result is errc::operation_canceled when cut short (a timeout,
  /// a stop request, the map destroyed) before a batch arrived: that operation takes nothing,
  /// and entries falling due after it was cut short are dropped as with nobody waiting. A batch
  /// handed to a waiter that is destroyed before it resumes is kept for the next expired(),
  /// which completes at once with it. One waiter at a time (a second one aborts).
  expired_operation expired() noexcept { return expired_operation(*this); }

 private:
  friend class expired_operation;

  static void on_due(timer::timer_node& n) noexcept;
  void expire(entry& e) noexcept;
  entry& at(std::uint32_t id) const noexcept { return *static_cast<entry*>(slab_.at(id)); }
  // The position of k in the index (found false: absent), its tag in `tag`.
  std::size_t locate(const Key& k, std::uint32_t& tag, bool& found) const {
    tag = detail::expiry_index::tag_of(detail::expiry_index::mix(static_cast<std::uint64_t>(hash_(k))));
    return index_.probe(tag, found, [&](std::uint32_t id) { return eq_(at(id).key, k); });
  }
  // Whether a scheduled entry's deadline has passed by `now`.
  bool past(const entry& e, clock::time_point now) const noexcept {
    return e.scheduled() && scale_.time_of(e.deadline_tick()) <= now;
  }
  // The deadline of a ttl counted from `now` (a past one: due at the next advance).
  static clock::time_point deadline_of(clock::time_point now, clock::duration ttl) noexcept {
    return ttl <= clock::duration::zero() ? clock::time_point::min() : detail::saturating_add(now, ttl);
  }
  // Removes the entry at index position pos (timer cancelled) and destroys it.
  void remove(std::size_t pos, entry& e) noexcept {
    const std::uint32_t id = index_.id_at(pos);
    if (e.scheduled()) detail::cancel_timer(*loop_, e);
    index_.remove_at(pos);
    e.~entry();
    slab_.release(id);
  }

  detail::event_loop* loop_;
  timer::tick_scale scale_;  // the loop's queue's: ticks to time points
  slab_type slab_;
  detail::expiry_index index_;
  batch batch_;                          // fired, waiting for a waiter to take it
  expired_operation* waiter_ = nullptr;  // the task in expired(), if any
  [[no_unique_address]] Hash hash_;
  [[no_unique_address]] Eq eq_;
};

/// What `co_await map.expired()` awaits: the next batch (see expiry_map::expired()).
template <class Key, class Value, class Hash, class Eq>
class expiry_map<Key, Value, Hash, Eq>::expired_operation : public operation<expired_operation> {
 public:
  /// Waits on `map`.
  explicit expired_operation(expiry_map& map) noexcept : map_(&map) {}
  /// Moves an operation that has not started.
  expired_operation(expired_operation&& o) noexcept : operation<expired_operation>(std::move(o)), map_(o.map_) {}
  /// Leaves the map's waiter seat; a batch it was handed but did not take stays in the map for
  /// the next expired().
  ~expired_operation() {
    if (map_ != nullptr && map_->waiter_ == this) map_->waiter_ = nullptr;
  }

  /// The operation protocol: completes at once with a batch kept from a waiter that went away,
  /// else takes the map's waiter seat until the next batch.
  std::coroutine_handle<> start(continuation c) {
    if (!map_->batch_.empty()) {
      taken_ = true;
      return c.complete();
    }
    if (map_->waiter_ != nullptr) {
      std::fputs("cogwheel: expiry_map::expired() awaited by two tasks at once\n", stderr);
      std::abort();
    }
    map_->waiter_ = this;
    continuation_ = c;
    return std::noop_coroutine();
  }
  /// The operation protocol: a waiter not yet handed a batch leaves the seat and completes with
  /// errc::operation_canceled at the next iteration; one handed a batch completes with it.
  void cancel() noexcept {
    if (map_ == nullptr || map_->waiter_ != this || handed_) return;
    map_->waiter_ = nullptr;
    later_.post(continuation_);
  }
  /// The operation protocol: the batch, or errc::operation_canceled.
  cogwheel::result<batch> result() {
    if (map_ == nullptr || !(handed_ || taken_)) return errc::operation_canceled;
    if (map_->waiter_ == this) map_->waiter_ = nullptr;
    return std::exchange(map_->batch_, batch());
  }

 private:
  friend class expiry_map;

  // From the map's expiry, for the first entry of a batch: resumed right after the advance.
  void hand() noexcept {
    handed_ = true;
    detail::post_expired(*map_->loop_, node_, continuation_);
  }

  expiry_map* map_;  // null once the map is destroyed
  continuation continuation_;
  detail::ready_node node_;  // in the expired batch once handed
  resume_later later_;       // cancelled: completes at the next iteration
  bool handed_ = false;      // a batch is on its way
  bool taken_ = false;       // completed at once with a kept batch
};

template <class Key, class Value, class Hash, class Eq>
expiry_map<Key, Value, Hash, Eq>::~expiry_map() {
  index_.for_each([&](std::uint32_t id) {
    entry& e = at(id);
    if (e.scheduled()) detail::cancel_timer(*loop_, e);
    e.~entry();
  });
  if (waiter_ != nullptr) {
    expired_operation& w = *waiter_;
    waiter_ = nullptr;
    if (w.handed_) w.node_.unlink();  // it has been queued to run: it will find no map instead
    w.map_ = nullptr;
    w.later_.post(w.continuation_);
  }
}

template <class Key, class Value, class Hash, class Eq>
bool expiry_map<Key, Value, Hash, Eq>::insert_or_assign(Key k, Value v, clock::duration ttl) {
  const clock::time_point now = detail::current_time();
  index_.reserve_one();
  std::uint32_t tag;
  bool found;
  const std::size_t pos = locate(k, tag, found);
  if (found) {
    entry& e = at(index_.id_at(pos));
    const bool was_past = past(e, now);
    e.value = std::move(v);
    detail::reschedule_timer(*loop_, e, deadline_of(now, ttl));
    return was_past;
  }
  const std::uint32_t id = slab_.allocate();
  entry* e;
  try {
    e = ::new (slab_.at(id)) entry(std::move(k), std::move(v));
  } catch (...) {
    slab_.release(id);
    throw;
  }
  index_.place(pos, tag, id);
  detail::schedule_timer(*loop_, *e, deadline_of(now, ttl));
  return true;
}

template <class Key, class Value, class Hash, class Eq>
bool expiry_map<Key, Value, Hash, Eq>::expire_after(const Key& k, clock::duration ttl) {
  std::uint32_t tag;
  bool found;
  const std::size_t pos = locate(k, tag, found);
  if (!found) return false;
  entry& e = at(index_.id_at(pos));
  const clock::time_point now = detail::current_time();
  if (past(e, now)) return false;
  detail::reschedule_timer(*loop_, e, deadline_of(now, ttl));
  return true;
}

template <class Key, class Value, class Hash, class Eq>
bool expiry_map<Key, Value, Hash, Eq>::persist(const Key& k) {
  std::uint32_t tag;
  bool found;
  const std::size_t pos = locate(k, tag, found);
  if (!found) return false;
  entry& e = at(index_.id_at(pos));
  if (!e.scheduled()) return true;
  if (past(e, detail::current_time())) return false;
  detail::cancel_timer(*loop_, e);
  return true;
}

template <class Key, class Value, class Hash, class Eq>
bool expiry_map<Key, Value, Hash, Eq>::erase(const Key& k) {
  std::uint32_t tag;
  bool found;
  const std::size_t pos = locate(k, tag, found);
  if (!found) return false;
  entry& e = at(index_.id_at(pos));
  const bool live = !e.scheduled() || !past(e, detail::current_time());
  remove(pos, e);
  return live;
}

template <class Key, class Value, class Hash, class Eq>
Value* expiry_map<Key, Value, Hash, Eq>::find(const Key& k) {
  std::uint32_t tag;
  bool found;
  const std::size_t pos = locate(k, tag, found);
  if (!found) return nullptr;
  entry& e = at(index_.id_at(pos));
  if (e.scheduled() && past(e, detail::current_time())) return nullptr;
  return &e.value;
}

template <class Key, class Value, class Hash, class Eq>
std::optional<clock::time_point> expiry_map<Key, Value, Hash, Eq>::expiry(const Key& k) const {
  std::uint32_t tag;
  bool found;
  const std::size_t pos = locate(k, tag, found);
  if (!found) return std::nullopt;
  const entry& e = at(index_.id_at(pos));
  if (!e.scheduled()) return std::nullopt;
  const clock::time_point at_time = scale_.time_of(e.deadline_tick());
  if (at_time <= detail::current_time()) return std::nullopt;
  return at_time;
}

template <class Key, class Value, class Hash, class Eq>
void expiry_map<Key, Value, Hash, Eq>::on_due(timer::timer_node& n) noexcept {
  entry& e = static_cast<entry&>(n);
  static_cast<expiry_map*>(slab_type::owner_of(&e))->expire(e);
}

template <class Key, class Value, class Hash, class Eq>
void expiry_map<Key, Value, Hash, Eq>::expire(entry& e) noexcept {
  std::uint32_t tag;
  bool found;
  const std::size_t pos = locate(e.key, tag, found);
  if (waiter_ != nullptr) {
    // Out of memory for the batch terminates (this runs inside the queue's advance).
    batch_.emplace_back(std::move(e.key), std::move(e.value));
    if (!waiter_->handed_) waiter_->hand();
  }
  remove(pos, e);
}

}  // namespace cogwheel
