// A driver that applies one stream of choices as operations to a real queue (timer_wheel or
// timer_heap) and to the reference model (reference_model.hpp), comparing them after every
// operation. Shared by tests/timer/differential_test.cpp (choices from a PRNG) and
// tests/fuzz/timer_fuzz.cpp (choices from the fuzzer's input bytes), so both check the same
// thing. Needs no test framework: a mismatch makes step() return false and failure() explain it.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <cogwheel/timer/heap.hpp>
#include <cogwheel/timer/node.hpp>
#include <cogwheel/timer/ticks.hpp>
#include <cogwheel/timer/wheel.hpp>

#include "choice_source.hpp"
#include "reference_model.hpp"

namespace cogwheel::timer::testing {

template <class Queue>
constexpr const char* queue_name() {
  if constexpr (std::is_same_v<Queue, timer_wheel>) return "timer_wheel";
  else return "timer_heap";
}

// Runs one queue and the model side by side. Queue is timer_wheel or timer_heap.
template <class Queue>
class differential_driver {
  static_assert(std::is_same_v<Queue, timer_wheel> || std::is_same_v<Queue, timer_heap>);
  // The heap reports the earliest deadline exactly; the wheel a bound no later than it.
  static constexpr bool exact_next_deadline = std::is_same_v<Queue, timer_heap>;
  static constexpr std::uint32_t no_node = ~std::uint32_t{0};

  // What a callback does to its partner node, another node of the pool.
  enum class partner_action : std::uint8_t { cancel, schedule, reschedule };

  // A pool node. What its callback does is drawn when it is scheduled: record its firing, then
  // optionally cancel, schedule (if idle) or reschedule a partner node (`partner_delay` ns after
  // the advance's time), and re-arm itself `period` ns after the advance's time.
  struct probe : timer_node {
    std::uint32_t id = 0;
    std::uint32_t partner = no_node;
    partner_action action = partner_action::cancel;
    ns_t partner_delay = 0;
    ns_t period = -1;              // < 0: one-shot
    bool rearm_by_schedule = false;  // re-arm with schedule() (else reschedule() of an idle node)
    differential_driver* owner = nullptr;
  };
  struct firing {
    std::uint32_t id;
    bool partner_result;  // what cancel() returned, or whether schedule() was called
  };
  enum class op : std::uint8_t { schedule, cancel, reschedule, advance, restart };
  struct op_record {
    op kind;
    std::uint32_t id;
    ns_t arg;
  };

 public:
  explicit differential_driver(const driver_settings& s)
      : settings_(s), pool_(new probe[s.nodes]), model_(s.tick.count(), ns_of(s.start), s.nodes),
        now_(ns_of(s.start)), cluster_(now_) {
    for (std::uint32_t i = 0; i < s.nodes; ++i) {
      pool_[i].id = i;
      pool_[i].owner = this;
      pool_[i].set_on_expire(&on_expire);
    }
    emplace_queue();
    fired_.reserve(s.nodes);
    due_flag_.assign(s.nodes, 0);
  }
  differential_driver(const differential_driver&) = delete;
  differential_driver& operator=(const differential_driver&) = delete;

  std::uint64_t operations() const noexcept { return ops_; }
  std::uint64_t fired() const noexcept { return fired_total_; }
  std::size_t peak_pending() const noexcept { return peak_pending_; }
  // The ids fired by the latest advance(), sorted (to compare two queues run in lockstep).
  std::vector<std::uint32_t> last_fired() const {
    std::vector<std::uint32_t> ids;
    for (const firing& f : fired_) ids.push_back(f.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  std::size_t size() const noexcept { return queue_->size(); }
  const std::string& failure() const noexcept { return failure_; }

  // Applies one operation drawn from src to the queue and the model and compares them.
  template <class Source>
  bool step(Source& src) {
    ++ops_;
    if (now_ == ns_max && src.below(8) == 0) return restart(src);
    if (src.below(1000) < settings_.advance_permille) return advance(draw_advance_time(src));
    if (settings_.burst_permille != 0 && src.below(1000) < settings_.burst_permille) return burst(src);
    if (src.below(4096) == 0) return restart(src);
    const std::uint32_t id = static_cast<std::uint32_t>(src.below(settings_.nodes));
    const unsigned total = settings_.schedule_weight + settings_.cancel_weight + settings_.reschedule_weight;
    const auto r = static_cast<unsigned>(src.below(total));
    if (r < settings_.schedule_weight) {
      std::uint32_t pick = id;
      for (int tries = 0; tries < 3 && model_.pending(pick); ++tries)
        pick = static_cast<std::uint32_t>(src.below(settings_.nodes));
      return model_.pending(pick) ? reschedule(src, pick) : schedule(src, pick);
    }
    if (r < settings_.schedule_weight + settings_.cancel_weight) {
      // Half the cancels are a timeout replaced: the same node scheduled again at once (the
      // wheel may put it back into the entry it just left, timer_wheel::requeue(), or file it
      // at once, file_now()).
      if (!cancel(id)) return false;
      return src.below(2) == 0 || schedule(src, id);
    }
    return reschedule(src, id);
  }

  // Final checks: every node's state matches, advance to the end of time fires what it must,
  // and destroying the queue leaves every node idle.
  bool finish() {
    for (std::uint32_t i = 0; i < settings_.nodes; ++i)
      if (!check_node(i)) return false;
    if (!advance(ns_max)) return false;
    return destroy_queue();
  }

 private:
  // --- operations --------------------------------------------------------------------------

  template <class Source>
  bool schedule(Source& src, std::uint32_t id) {
    const ns_t deadline = draw_deadline(src, id);
    draw_behaviour(src, id);
    record(op::schedule, id, deadline);
    queue_->schedule(pool_[id], at(deadline));
    model_.schedule(id, model_.scale().deadline_tick(deadline));
    return check_node(id) && check_size();
  }

  bool cancel(std::uint32_t id) {
    record(op::cancel, id, 0);
    const bool got = queue_->cancel(pool_[id]);
    const bool want = model_.cancel(id);
    if (got != want) return fail() << "cancel(node " << id << ") returned " << got << ", expected " << want;
    return check_node(id) && check_size();
  }

  template <class Source>
  bool reschedule(Source& src, std::uint32_t id) {
    const ns_t deadline = draw_deadline(src, id);
    draw_behaviour(src, id);
    record(op::reschedule, id, deadline);
    queue_->reschedule(pool_[id], at(deadline));
    model_.reschedule(id, model_.scale().deadline_tick(deadline));
    return check_node(id) && check_size();
  }

  template <class Source>
  bool burst(Source& src) {
    const auto cancels = static_cast<std::uint32_t>(257 + src.below(256));
    const auto first = static_cast<std::uint32_t>(src.below(settings_.nodes));
    for (std::uint32_t i = 0, done = 0; i < settings_.nodes && done < cancels; ++i) {
      const std::uint32_t id = (first + i) % settings_.nodes;
      if (!model_.pending(id)) continue;
      ++ops_;
      ++done;
      if (!cancel(id)) return false;
    }
    const auto schedules = static_cast<std::uint32_t>(257 + src.below(256));
    for (std::uint32_t k = 0; k < schedules; ++k) {
      const auto id = static_cast<std::uint32_t>(src.below(settings_.nodes));
      ++ops_;
      if (!(model_.pending(id) ? reschedule(src, id) : schedule(src, id))) return false;
    }
    return true;
  }

  bool advance(ns_t to) {
    record(op::advance, 0, to);
    peak_pending_ = std::max(peak_pending_, model_.size());
    fired_.clear();
    advance_time_ = to;
    const std::size_t returned = queue_->advance(at(to));
    fired_total_ += fired_.size();
    if (returned != fired_.size())
      return fail() << "advance returned " << returned << " but " << fired_.size() << " callbacks ran";

    due_.clear();
    if (!model_.collect(model_.scale().now_tick(to), due_)) {
      if (!fired_.empty())
        return fail() << "advance to a time behind the queue's fired node " << fired_[0].id;
    } else {
      now_ = std::max(now_, to);
      if (!replay_firings()) return false;
    }
    for (const firing& f : fired_) {
      if (!check_node(f.id)) return false;
      if (pool_[f.id].partner != no_node && !check_node(pool_[f.id].partner)) return false;
    }
    if (!check_size()) return false;
    const ns_t queue_now = ns_of(queue_->now());
    if (queue_now != model_.scale().time_of(model_.now()))
      return fail() << "now() is " << queue_now << " ns, expected "
                    << model_.scale().time_of(model_.now());
    return check_next_deadline() && check_invariants();
  }

  // The wheel's own invariants (timer_wheel::invariant_violation), after every batch of
  // operations, i.e. after every advance(); with more than 512 timers pending (an O(pending)
  // check) after every 8th, so the long streams stay within seconds under ASan.
  bool check_invariants() {
    if constexpr (std::is_same_v<Queue, timer_wheel>) {
      if (model_.size() > 512 && ++checks_skipped_ % 8 != 0) return true;
      if (const char* why = queue_->invariant_violation())
        return fail() << "wheel invariant broken: " << why;
    }
    return true;
  }

  template <class Source>
  bool restart(Source& src) {
    record(op::restart, 0, 0);
    if (!destroy_queue()) return false;
    const driver_settings s = draw_settings(src, settings_.tick, {settings_.nodes});
    settings_.start = s.start;
    emplace_queue();
    model_ = reference_model(settings_.tick.count(), ns_of(settings_.start), settings_.nodes);
    now_ = cluster_ = ns_of(settings_.start);
    return check_size() && check_next_deadline() && check_invariants();
  }

  void emplace_queue() {
    queue_.emplace(settings_.tick, settings_.start);
    if constexpr (std::is_same_v<Queue, timer_wheel>) {
      queue_->set_visit_min_live(settings_.visit_min_live);
      // The pools are small: half the runs put a replaced timeout back at any size (requeue()),
      // the others file it at once, as small wheels do (file_now()).
      queue_->set_requeue_min_size(settings_.requeue_min_size);
    }
  }

  bool destroy_queue() {
    queue_.reset();
    for (std::uint32_t i = 0; i < settings_.nodes; ++i)
      if (pool_[i].scheduled())
        return fail() << "node " << i << " still scheduled after its queue was destroyed";
    return true;
  }

  // --- the callback and its replay against the model ------------------------------------------

  static void on_expire(timer_node& n) noexcept {
    probe& p = static_cast<probe&>(n);
    p.owner->expired(p);
  }

  void expired(probe& p) noexcept {
    firing f{p.id, false};
    if (p.partner != no_node) {
      probe& other = pool_[p.partner];
      const clock::time_point t = at(sat_add(advance_time_, p.partner_delay));
      switch (p.action) {
        case partner_action::cancel:
          f.partner_result = queue_->cancel(other);
          break;
        case partner_action::schedule:
          f.partner_result = !other.scheduled();
          if (f.partner_result) queue_->schedule(other, t);
          break;
        case partner_action::reschedule:
          queue_->reschedule(other, t);
          break;
      }
    }
    if (p.period >= 0) {
      const clock::time_point t = at(sat_add(advance_time_, p.period));
      if (p.rearm_by_schedule)
        queue_->schedule(p, t);
      else
        queue_->reschedule(p, t);
    }
    fired_.push_back(f);
  }

  // Checks the observed firing sequence against the due set, applying each callback's cancel
  // and re-arm to the model in the order the queue ran them.
  bool replay_firings() {
    for (std::uint32_t id : due_) due_flag_[id] = 1;
    std::size_t due_left = due_.size();
    bool ok = true;
    for (const firing& f : fired_) {
      const probe& p = pool_[f.id];
      if (!due_flag_[f.id]) {
        ok = fail() << "node " << f.id << " fired at now_tick " << model_.now()
                    << " but was not due (pending " << model_.pending(f.id) << ", deadline tick "
                    << model_.deadline(f.id) << ", or it fired twice)";
        break;
      }
      due_flag_[f.id] = 0;
      --due_left;
      if (p.partner != no_node && !replay_partner(p, f, due_left)) {
        ok = false;
        break;
      }
      if (p.period >= 0)
        model_.schedule(f.id, model_.scale().deadline_tick(sat_add(advance_time_, p.period)));
    }
    if (ok && due_left != 0) {
      for (std::uint32_t id : due_)
        if (due_flag_[id]) {
          ok = fail() << "node " << id << " with deadline tick " << model_.deadline(id)
                      << " was due at now_tick " << model_.now() << " but did not fire";
          break;
        }
    }
    for (std::uint32_t id : due_) due_flag_[id] = 0;
    return ok;
  }

  // Applies a callback's action on its partner to the model. A partner still due in this batch
  // (not fired yet) is scheduled from the callback's point of view: a cancel or a reschedule
  // takes it out of the batch, and schedule() is not called.
  bool replay_partner(const probe& p, const firing& f, std::size_t& due_left) {
    const bool due = due_flag_[p.partner] != 0;
    const tick_t t = model_.scale().deadline_tick(sat_add(advance_time_, p.partner_delay));
    switch (p.action) {
      case partner_action::cancel: {
        bool want;
        if (due) {
          due_flag_[p.partner] = 0;
          --due_left;
          want = true;
        } else {
          want = model_.cancel(p.partner);
        }
        if (want != f.partner_result)
          return fail() << "node " << f.id << "'s callback cancel(node " << p.partner
                        << ") returned " << f.partner_result << ", expected " << want;
        return true;
      }
      case partner_action::schedule: {
        const bool want = !due && !model_.pending(p.partner);
        if (want != f.partner_result)
          return fail() << "node " << f.id << "'s callback saw node " << p.partner
                        << (f.partner_result ? " idle" : " scheduled") << ", expected the opposite";
        if (want) model_.schedule(p.partner, t);
        return true;
      }
      case partner_action::reschedule:
        if (due) {
          due_flag_[p.partner] = 0;
          --due_left;
        }
        model_.reschedule(p.partner, t);
        return true;
    }
    return true;
  }

  // --- checks ---------------------------------------------------------------------------------

  bool check_node(std::uint32_t id) {
    const bool want = model_.pending(id);
    if (pool_[id].scheduled() != want)
      return fail() << "node " << id << " scheduled() is " << !want << ", expected " << want;
    if (want && pool_[id].deadline_tick() != model_.deadline(id))
      return fail() << "node " << id << " deadline_tick() is " << pool_[id].deadline_tick()
                    << ", expected " << model_.deadline(id);
    return true;
  }

  bool check_size() {
    if (queue_->size() != model_.size())
      return fail() << "size() is " << queue_->size() << ", expected " << model_.size();
    if (queue_->empty() != (model_.size() == 0))
      return fail() << "empty() disagrees with size() " << model_.size();
    return true;
  }

  bool check_next_deadline() {
    const std::optional<clock::time_point> got = queue_->next_deadline();
    const std::optional<tick_t> earliest = model_.earliest();
    if (got.has_value() != earliest.has_value())
      return fail() << "next_deadline() is " << (got ? "set" : "nullopt") << " with "
                    << model_.size() << " timers pending";
    if (!got) return true;
    const ns_t nd = ns_of(*got);
    const ns_t want = model_.scale().time_of(*earliest);
    const ns_t queue_now = model_.scale().time_of(model_.now());
    if constexpr (exact_next_deadline) {
      if (nd != want)
        return fail() << "next_deadline() is " << nd << " ns, expected exactly " << want;
    } else {
      // A lower bound, never behind the wheel's time: an overdue timer is reported as now().
      if (nd > std::max(want, queue_now) || nd < queue_now)
        return fail() << "next_deadline() is " << nd << " ns; earliest deadline " << want
                      << " ns, now() " << queue_now << " ns";
    }
    return true;
  }

  // --- drawing operations ---------------------------------------------------------------------

  // A duration of k random bits, k itself random below max_bits: log-uniform up to 2^max_bits.
  template <class Source>
  static ns_t log_uniform(Source& src, unsigned max_bits) {
    return static_cast<ns_t>(src.bits(static_cast<unsigned>(src.below(max_bits + 1))));
  }

  template <class Source>
  ns_t draw_deadline(Source& src, std::uint32_t id) {
    const ns_t tick = settings_.tick.count();
    switch (src.below(16)) {
      case 0: case 1:  // just past
        return sat_add(now_, -static_cast<ns_t>(src.below(3 * tick)));
      case 2:  // long past, before the epoch, or the earliest time point
        switch (src.below(3)) {
          case 0: return sat_add(now_, -log_uniform(src, 62));
          case 1: return -log_uniform(src, 62);
          default: return ns_min;
        }
      case 3:  // zero duration
        return now_;
      case 4: case 5: case 6:  // within a few ticks, at nanosecond resolution
        return sat_add(now_, static_cast<ns_t>(src.below(4 * tick)));
      case 7: case 8:  // across the low levels
        return sat_add(now_, static_cast<ns_t>(src.below(static_cast<std::uint64_t>(tick) << 12)));
      case 9:  // far: up to 146 years
        return sat_add(now_, log_uniform(src, 62));
      case 10:  // the end of time
        return src.below(2) == 0 ? ns_max : ns_max - static_cast<ns_t>(src.below(2 * tick));
      case 11: case 12:  // clustered around a moving point
        if (src.below(64) == 0)
          cluster_ = sat_add(now_, static_cast<ns_t>(src.below(static_cast<std::uint64_t>(tick) << 18)));
        return sat_add(cluster_, static_cast<ns_t>(src.below(2 * tick)));
      case 13: {  // on a tick boundary, or a nanosecond either side
        const tick_t t = model_.scale().now_tick(now_) + src.below(200);
        return sat_add(model_.scale().time_of(t), static_cast<ns_t>(src.below(3)) - 1);
      }
      default: {  // earlier or later than the node's current deadline
        if (!model_.pending(id)) return sat_add(now_, static_cast<ns_t>(src.below(64 * tick)));
        const ns_t current = model_.scale().time_of(model_.deadline(id));
        const ns_t delta = src.below(2) == 0 ? static_cast<ns_t>(src.below(4 * tick)) : log_uniform(src, 62);
        return sat_add(current, src.below(2) == 0 ? -delta : delta);
      }
    }
  }

  template <class Source>
  void draw_behaviour(Source& src, std::uint32_t id) {
    probe& p = pool_[id];
    p.partner = src.below(32) == 0 ? static_cast<std::uint32_t>(src.below(settings_.nodes)) : no_node;
    p.action = static_cast<partner_action>(src.below(3));
    p.partner_delay = src.below(2) == 0 ? static_cast<ns_t>(src.below(64 * settings_.tick.count()))
                                        : log_uniform(src, 62);
    // A node acting on itself would race its own re-arm (schedule() of a scheduled node).
    if (p.partner == id && p.action != partner_action::cancel) p.partner = (id + 1) % settings_.nodes;
    // In lockstep the two queues must fire the same sets, but callbacks run in an unspecified
    // order, and a callback acting on another due node makes the set depend on that order.
    if (settings_.lockstep) p.partner = no_node;
    p.period = -1;
    if (src.below(32) == 0) {
      const ns_t tick = settings_.tick.count();
      switch (src.below(5)) {
        case 0: p.period = 0; break;
        case 1: p.period = static_cast<ns_t>(src.below(tick)); break;
        case 2: p.period = tick; break;
        case 3: p.period = static_cast<ns_t>(src.below(64 * tick)); break;
        default: p.period = log_uniform(src, 62); break;
      }
      p.rearm_by_schedule = src.below(2) == 0;
    }
  }

  template <class Source>
  ns_t draw_advance_time(Source& src) {
    const ns_t tick = settings_.tick.count();
    if (src.below(1000) < settings_.jump_permille)  // a huge jump: up to 146 years
      return sat_add(now_, log_uniform(src, 62));
    switch (src.below(16)) {
      case 0: case 1: case 2: case 11:  // sub-tick
        return sat_add(now_, static_cast<ns_t>(src.below(tick)));
      case 3: case 4:  // one tick
        return sat_add(now_, tick);
      case 5: case 6:  // a few ticks
        return sat_add(now_, static_cast<ns_t>(src.below(8 * tick)));
      case 7: {  // to the queue's next_deadline(), or a nanosecond before it
        if (settings_.lockstep) {
          src.below(2);
          return now_;
        }
        const auto nd = queue_->next_deadline();
        if (!nd) return now_;
        return sat_add(ns_of(*nd), -static_cast<ns_t>(src.below(2)));
      }
      case 8: {  // to the earliest deadline, or a nanosecond before it
        const auto e = model_.earliest();
        if (!e) return now_;
        return sat_add(model_.scale().time_of(*e), -static_cast<ns_t>(src.below(2)));
      }
      case 9: case 10:  // across the low levels
        return sat_add(now_, static_cast<ns_t>(src.below(static_cast<std::uint64_t>(tick) << (6 * (1 + src.below(3))))));
      case 12:  // backwards, possibly to before the epoch
        return src.below(8) == 0 ? ns_min : sat_add(now_, -log_uniform(src, 62));
      case 13:  // the same time again
        return now_;
      case 14:  // into the cluster
        return sat_add(cluster_, static_cast<ns_t>(src.below(2 * tick)));
      default:  // the end of time, rarely; else a few ticks
        if (src.below(256) == 0) return ns_max;
        return sat_add(now_, static_cast<ns_t>(src.below(3 * tick)));
    }
  }

  // --- diagnostics ----------------------------------------------------------------------------

  void record(op kind, std::uint32_t id, ns_t arg) noexcept {
    history_[history_pos_++ % history_.size()] = op_record{kind, id, arg};
  }

  // Starts a failure description (with context) and converts to false.
  class failure_stream {
   public:
    explicit failure_stream(differential_driver& d) : d_(d) {}
    failure_stream(const failure_stream&) = delete;
    ~failure_stream() { d_.failure_ = d_.context() + out_.str(); }
    template <class T>
    failure_stream& operator<<(const T& v) {
      out_ << v;
      return *this;
    }
    operator bool() const noexcept { return false; }

   private:
    differential_driver& d_;
    std::ostringstream out_;
  };
  failure_stream fail() { return failure_stream(*this); }

  std::string context() const {
    static constexpr const char* names[] = {"schedule", "cancel", "reschedule", "advance", "restart"};
    std::ostringstream out;
    out << queue_name<Queue>() << " tick " << settings_.tick.count() << " ns, " << settings_.nodes
        << " nodes, start " << ns_of(settings_.start) << " ns, operation " << ops_
        << ", model now_tick " << model_.now() << "; latest operations (oldest first):\n";
    const std::size_t n = std::min<std::size_t>(history_pos_, history_.size());
    for (std::size_t i = history_pos_ - n; i < history_pos_; ++i) {
      const op_record& r = history_[i % history_.size()];
      out << "  " << names[static_cast<int>(r.kind)];
      if (r.kind == op::schedule || r.kind == op::cancel || r.kind == op::reschedule) out << " node " << r.id;
      if (r.kind != op::cancel && r.kind != op::restart) out << " at " << r.arg << " ns";
      out << '\n';
    }
    out << "mismatch: ";
    return out.str();
  }

  driver_settings settings_;
  std::unique_ptr<probe[]> pool_;  // declared before queue_: the queue must go first
  std::optional<Queue> queue_;
  reference_model model_;
  ns_t now_;             // the latest time advanced to (never decreases)
  ns_t cluster_;         // centre of clustered deadlines
  ns_t advance_time_ = 0;  // the argument of the advance() in progress
  std::vector<firing> fired_;
  std::vector<std::uint32_t> due_;
  std::vector<std::uint8_t> due_flag_;
  std::uint64_t ops_ = 0;
  std::uint64_t fired_total_ = 0;
  std::uint64_t checks_skipped_ = 0;
  std::size_t peak_pending_ = 0;
  std::string failure_;
  std::array<op_record, 16> history_{};
  std::size_t history_pos_ = 0;
};

}  // namespace cogwheel::timer::testing
