// delay_queue::run: the worker. Three kinds of coroutines, all on the queue's core:
//   run()       waits for a stop (stop(), or a stop request of its own caller) and then for
//               work() to have drained; it performs no operation of its own after the stop,
//               so a cancelled run() still waits for the drain (a plain awaiter, not an
//               operation a stop could cut short);
//   work()      (spawned: no stop source) claims jobs and sleeps until the next is due; on
//               stop it drains: held jobs are handed back, running handlers get stop_grace and
//               then have their deadline cut, acknowledgements are flushed;
//   run_job()   (spawned, one per claimed job) waits on the wheel until the job's start time,
//               runs the handler under its lease as a deadline, reports the outcome.
#include <cogwheel/redis/delay_queue.hpp>

#include <algorithm>
#include <charconv>
#include <exception>
#include <random>
#include <utility>
#include <vector>

#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/stats.hpp>
#include <cogwheel/runtime/stop.hpp>
#include <cogwheel/runtime/timeout.hpp>

#include "delay_queue_internal.hpp"
#include "delay_queue_scripts.hpp"
#include "parked.hpp"

namespace cogwheel::redis {

using detail::int_of;

// A job of run_job, linked into the queue's list from claim to report, so that a stop can
// reach it: its sleep while it is held, its deadline while it runs.
struct delay_queue::held {
  held* prev = nullptr;
  held* next = nullptr;
  sleep_operation* wait = nullptr;
  deadline* lease = nullptr;
};

namespace {

constexpr std::size_t max_ack_batch = 512;

// A failure's text, stored as the dead job's reason, is cut to this: it is for a human, and an
// exception's message may hold a whole body (2 MiB of them made every listing of the dead set
// that reached them larger than the client's max_reply_bytes).
constexpr std::size_t max_reason_bytes = 4096;

// Jobs one claim takes at most, whatever the worker's free slots: the claim passes their ids to
// one HMGET (Lua's unpack stops at ~8,000 values: a larger claim failed every time, and the
// worker retried it forever), and a script holds the whole server while it runs, so a claim of
// thousands of jobs stalls every other client (delay_queue_bench --backlog, bench/redis/README.md).
// A worker with more free slots claims again at once (the script says more may be due).
constexpr unsigned max_claim_jobs = 512;

// Jobs per claim record (claim_lua's ARGV[7]): a claim of k jobs writes k / claim_record_jobs
// in-flight entries; taking a job out of its record (ack, fail, hand-back) costs the server
// O(claim_record_jobs), whatever the size of the claim.
constexpr unsigned claim_record_jobs = 128;

// With a lookahead L, a job is claimed at least claim_ahead(L) - L/8 (the largest jitter) before
// it is due: the worker claims again when L - claim_ahead(L) of it is used up, or claim_ahead(L)
// before the next due job, whichever is later, plus its own jitter of 0 to L/8. So a worker
// claims every 3L/4 to 7L/8 (n workers: about n / (0.8 L) claims per second). Fewer, larger
// claims: a claim costs Redis more than its jobs' share (bench/redis/README.md).
constexpr std::int64_t claim_ahead(std::int64_t lookahead) noexcept { return lookahead / 4; }
constexpr std::int64_t max_jitter(std::int64_t lookahead) noexcept { return lookahead / 8; }
static_assert(claim_ahead(200) - max_jitter(200) == 25, "a job due is claimed at least L/8 ahead");

// Acknowledgements as ack_lua's groups: token, k, then k ranges of positions (first, last),
// one group per record (sorted by token and position, so that a record is read and written
// once per batch and consecutive jobs make one range). `acks` is reordered.
void append_acks(std::vector<std::pair<std::int64_t, std::uint32_t>>& acks, std::vector<command_arg>& args) {
  std::sort(acks.begin(), acks.end());
  for (std::size_t i = 0; i < acks.size();) {
    const std::int64_t token = acks[i].first;
    args.emplace_back(token);
    const std::size_t count_at = args.size();
    args.emplace_back(0);
    std::size_t ranges = 0;
    while (i < acks.size() && acks[i].first == token) {
      const std::uint32_t first = acks[i].second;
      std::uint32_t last = first;
      for (++i; i < acks.size() && acks[i].first == token && acks[i].second <= last + 1; ++i) last = acks[i].second;
      args.emplace_back(first);
      args.emplace_back(last);
      ++ranges;
    }
    args[count_at] = command_arg(ranges);
  }
}

std::int64_t to_us(clock::duration d) noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

// Waits, without being an operation a stop request could cancel, until `slot` is resumed.
struct resumed_by {
  std::coroutine_handle<>& slot;
  bool ready;
  bool await_ready() const noexcept { return ready; }
  void await_suspend(std::coroutine_handle<> h) noexcept { slot = h; }
  void await_resume() const noexcept {}
  // Destroyed with a frame torn down mid-wait (loop shutdown): nobody may resume it then.
  ~resumed_by() { slot = nullptr; }
};

}  // namespace

void delay_queue::count_lost_leases(std::uint64_t n) noexcept {
  stats_.lost_leases += n;
  metrics_.lost_leases += n;
}

void delay_queue::count_dead(std::uint64_t n) noexcept {
  stats_.dead += n;
  metrics_.dead += n;
}

void delay_queue::count_retry() noexcept {
  ++stats_.retries;
  ++metrics_.retries;
}

// Once per queue, on the core of its first run(): the registry adds the core label.
void delay_queue::register_metrics() {
  if (!registrations_.empty()) return;
  std::string queue = "queue=\"";
  for (const char c : name_) {  // a label value escapes \, " and newlines
    if (c == '\\' || c == '"') queue += '\\';
    if (c == '\n') queue += "\\n"; else queue += c;
  }
  queue += '"';
  const std::string p = "cogwheel_delay_queue_";
  registrations_.push_back(register_counter(p + "claims", "Claim scripts run by the worker.", metrics_.claims, queue));
  registrations_.push_back(register_counter(p + "jobs_fired", "Handlers started.", metrics_.fired, queue));
  registrations_.push_back(register_counter(p + "retries", "Failed jobs the server scheduled again.", metrics_.retries, queue));
  registrations_.push_back(register_counter(p + "lost_leases",
                                            "Acks, failures or extensions refused: another claim held the job.",
                                            metrics_.lost_leases, queue));
  registrations_.push_back(register_counter(p + "dead_jobs", "Jobs the worker moved to the dead set.", metrics_.dead, queue));
  registrations_.push_back(register_histogram(p + "lateness_seconds",
                                              "This attempt's due time to handler start, by Redis's clock.",
                                              metrics_.lateness_ns, queue));
  registrations_.push_back(register_histogram(p + "scheduled_lateness_seconds",
                                              "The time the producer scheduled to handler start (retries included), by Redis's clock.",
                                              metrics_.scheduled_lateness_ns, queue));
}

void delay_queue::stop() noexcept {
  stopping_ = true;
  wake();
  detail::wake(run_idle_);
}

void delay_queue::wake() noexcept { detail::wake(idle_); }

// A job ended: work() needs to know when it drains, or when it waits for free slots and a
// quarter of them (at least one) are free; otherwise its sleep stands. Waking it at each free
// slot would cost a claim script per job whenever more is due than the worker may hold, several
// times the Redis CPU per job.
void delay_queue::finished() noexcept {
  if (stopping_) detail::wake(ack_idle_);
  const unsigned refill = std::max(1u, o_.concurrency / 4);
  if (stopping_ || (sleeping_until_ms_ == INT64_MIN && running_ + held_ + refill <= o_.concurrency)) wake();
}

// A job became the earliest at `payload` (ms): wake the worker if its next claim would take
// it too late (with a lookahead, a job is claimed claim_ahead(L) before it is due).
// An announcement that is not an integer is ignored: Lua formats a time of 10^17 ms (3 million
// years) or more as a float ("9.2233720368547758e+18", from schedule_after(milliseconds::max())),
// whose leading digit read as a time woke the worker for a job it could not claim.
void delay_queue::on_message(std::string_view payload) noexcept {
  std::int64_t at = 0;
  const char* end = payload.data() + payload.size();
  if (const auto [ptr, ec] = std::from_chars(payload.data(), end, at); ec != std::errc() || ptr != end) return;
  hint_ms_ = std::min(hint_ms_, at);
  if (idle_ != nullptr && at - claim_ahead(o_.lookahead.count()) < sleeping_until_ms_) {
    ++stats_.woken_by_message;
    wake();
  }
}

task<result<void>> delay_queue::run(handler_type handler, worker_options options) {
  if (working_) co_return std::make_error_code(errc::operation_in_progress);
  // No wait between claims is a busy loop of claim scripts; no lease, a deadline already past
  // for every handler (each job cut and retried until dead).
  if (options.max_wait.count() <= 0 || options.visibility.count() <= 0) co_return std::make_error_code(errc::invalid_argument);
  handler_ = std::move(handler);
  o_ = options;
  register_metrics();
  stopping_ = false;
  fatal_ = {};
  if (o_.lookahead.count() > 0) {
    std::minstd_rand gen(std::random_device{}());
    jitter_ms_ = static_cast<std::int64_t>(gen() % static_cast<unsigned>(max_jitter(o_.lookahead.count()) + 1));
  }
  client_options sub_options;
  sub_options.address = o_.address;
  sub_options.host = o_.host;
  sub_options.port = o_.port;
  sub_options.tls = o_.tls;
  sub_options.subscriptions = {channel_};
  sub_options.on_message = [this](std::string_view, std::string_view m) { on_message(m); };
  auto sub = co_await client::connect(std::move(sub_options));
  if (!sub) co_return sub.error();

  working_ = true;
  spawn(work());
  bool cancelled = false;
  while (!stopping_ && working_) {
    sleep_operation until_stop(clock::time_point::max());
    detail::parked p(run_idle_, until_stop);
    co_await until_stop;
    if ((cancelled = co_await stop_requested())) break;
  }
  stopping_ = true;
  wake();
  co_await resumed_by{run_waiter_, !working_};
  handler_ = nullptr;
  if (fatal_) co_return fatal_;
  if (cancelled) co_return std::make_error_code(errc::operation_canceled);  // a timeout says timed_out
  co_return result<void>();
}

task<void> delay_queue::work() {
  const std::uint64_t jumps = this_core_metrics().clock_jumps;
  auto error_backoff = std::chrono::milliseconds(10);
  const std::int64_t lookahead = o_.lookahead.count();
  // Reused by every claim: the acknowledgements it carries and its arguments.
  std::vector<done_job> carried;
  std::vector<command_arg> args;
  while (!stopping_) {
    std::int64_t wait_ms = o_.max_wait.count();
    std::int64_t now_ms = 0;
    bool slot_bound = false;  // more is due than the free slots, fewer than a quarter, may take
    if (running_ + held_ < o_.concurrency) {
      const unsigned limit = std::min(o_.concurrency - running_ - held_, max_claim_jobs);
      // The acknowledgements gathered so far go with the claim (up to a batch); a failed
      // claim leaves them in flight, like a failed acknowledgement: they run again.
      const std::size_t n = std::min(acks_.size(), max_ack_batch);
      carried.assign(std::make_move_iterator(acks_.begin()), std::make_move_iterator(acks_.begin() + static_cast<std::ptrdiff_t>(n)));
      acks_.erase(acks_.begin(), acks_.begin() + static_cast<std::ptrdiff_t>(n));
      args.clear();
      args.emplace_back(o_.visibility.count());
      args.emplace_back(limit);
      args.emplace_back(lookahead);
      args.emplace_back(o_.max_attempts);
      args.emplace_back(qopts_.max_payload_bytes);
      args.emplace_back(o_.max_claim_bytes);
      args.emplace_back(claim_record_jobs);
      append_acks(carried, args);
      if (!carried.empty()) ++claims_carrying_acks_;
      const clock::time_point sent = now();
      next_claim_ = sent;  // on its way: acknowledgements done meanwhile wait for the one after
      hint_ms_ = INT64_MAX;
      auto r = co_await call(claim_, args);
      const clock::time_point replied = now();
      ++stats_.claims;
      ++metrics_.claims;
      if (!r || !r->is_array() || r->size() != 12 || !(*r)[1].is_array() || !(*r)[10].is_array() || !(*r)[11].is_array() ||
          (*r)[1].size() != (*r)[11].size()) {
        wait_ms = error_backoff.count();
        error_backoff = std::min(error_backoff * 2, std::chrono::milliseconds(1000));
      } else {
        error_backoff = std::chrono::milliseconds(10);
        if (!carried.empty()) {
          const auto acked = static_cast<std::uint64_t>(int_of((*r)[8]));
          ++stats_.ack_batches;
          stats_.acked += acked;
          count_lost_leases(carried.size() - acked);
        }
        now_ms = int_of((*r)[0]);
        const std::int64_t now_us = int_of((*r)[6]) * 1'000'000 + int_of((*r)[7]);
        count_dead(static_cast<std::uint64_t>(int_of((*r)[5])));
        const auto ids = (*r)[1].elements();
        const auto entries = (*r)[11].elements();  // each the job's stamp (its scheduled time) and payload
        const std::int64_t first_token = int_of((*r)[9]);  // one per record of claim_record_jobs jobs
        const auto later = (*r)[10].elements();  // index, attempt, attempt due of the jobs claimed before
        std::size_t next_later = 0;
        for (std::size_t index = 0; index < entries.size(); ++index) {
          job j;
          j.id = ids[index].str();
          const detail::job_entry e = detail::parse_job_entry(entries[index].str(), now_ms + lookahead);
          j.payload = e.payload;
          j.scheduled_ms = e.due_ms;
          j.attempt_due_ms = e.due_ms;  // a first attempt is due when scheduled
          if (next_later + 2 < later.size() && static_cast<std::size_t>(int_of(later[next_later])) == index) {
            j.attempt = int_of(later[next_later + 1]);
            j.attempt_due_ms = int_of(later[next_later + 2]);
            next_later += 3;
          }
          j.token = first_token + static_cast<std::int64_t>(index / claim_record_jobs);
          j.position_ = static_cast<std::uint32_t>(index % claim_record_jobs) + 1;
          // Due `ahead` after the server's TIME, which was read before `replied`: starting
          // `ahead` after `replied` is never early. The lease was stamped after `sent`.
          const std::int64_t ahead_us = std::max<std::int64_t>(j.attempt_due_ms * 1000 - now_us, 0);
          const clock::time_point start_at = replied + std::chrono::microseconds(ahead_us);
          const clock::time_point lease_end =
              detail::later_by(sent + std::chrono::microseconds(ahead_us), o_.visibility - detail::margin_of(o_));
          // Lateness by the server's clock: its TIME in the reply + local time since the reply.
          const std::int64_t base_us = now_us - to_us(replied.time_since_epoch());
          const std::int64_t late_us = base_us - j.attempt_due_ms * 1000;
          const std::int64_t scheduled_late_us = base_us - j.scheduled_ms * 1000;
          ++held_;
          ++stats_.jobs;
          spawn(run_job(std::move(j), start_at, lease_end, late_us, scheduled_late_us));
        }
        // More may be due already: claim again at once with a quarter of the slots free (at
        // least one), else wait for finished() to free them, as a full worker does. Claiming
        // for each slot that freed while the claim was on its way costs a script per job.
        const bool more = int_of((*r)[4]) == 1;
        const unsigned refill = std::max(1u, o_.concurrency / 4);
        if (more && running_ + held_ + refill <= o_.concurrency) continue;
        slot_bound = more;
        const std::int64_t next_due = int_of((*r)[2]);
        const std::int64_t next_expiry = int_of((*r)[3]);
        if (next_due >= 0 && !slot_bound) {
          // With a lookahead: claim again when three quarters of it are used up, or
          // claim_ahead before the next due job; each worker offset by its own jitter.
          const std::int64_t ahead = claim_ahead(lookahead);
          const std::int64_t at = lookahead > 0 ? std::max(now_ms + lookahead - ahead, next_due - ahead) + jitter_ms_
                                                : next_due + o_.coalesce.count();
          wait_ms = std::min(wait_ms, std::max<std::int64_t>(at - now_ms, 0));
        }
        if (next_expiry >= 0) wait_ms = std::min(wait_ms, std::max<std::int64_t>(next_expiry - now_ms, 0));
        if (!slot_bound && hint_ms_ - claim_ahead(lookahead) < now_ms + wait_ms) continue;  // announced while the claim was on its way
      }
    }
    if (stopping_) break;
    {
      sleep_operation idle = sleep_for(std::chrono::milliseconds(wait_ms));
      // Waiting for a free slot, an earlier job changes nothing.
      const bool claims_next = !slot_bound && running_ + held_ < o_.concurrency;
      sleeping_until_ms_ = claims_next ? now_ms + wait_ms : INT64_MIN;
      next_claim_ = claims_next ? idle.deadline() : clock::time_point::max();
      detail::parked p(idle_, idle);
      co_await idle;
    }
    if (this_core_metrics().clock_jumps != jumps) {  // a paused clock: every sleep would jump
      fatal_ = std::make_error_code(errc::not_supported);
      stopping_ = true;
      detail::wake(run_idle_);
    }
  }
  next_claim_ = clock::time_point::max();
  // The drain. Held jobs are handed back (their sleeps end now); running ones get the grace.
  for (held* h = held_list_; h != nullptr; h = h->next) detail::wake(h->wait);
  detail::wake(ack_idle_);
  // Saturating: a paused clock with nothing left to wait for stands at time_point::max().
  const clock::time_point stopped_at = now();
  const clock::time_point grace_end =
      stopped_at < clock::time_point::max() - o_.stop_grace ? stopped_at + o_.stop_grace : clock::time_point::max();
  while (running_ + held_ > 0 && now() < grace_end) {
    sleep_operation idle(grace_end);
    detail::parked p(idle_, idle);
    co_await idle;
  }
  for (held* h = held_list_; h != nullptr; h = h->next)
    if (h->lease != nullptr) h->lease->reset_to(now());
  while (running_ + held_ > 0 || acking_) {
    sleep_operation idle = sleep_for(o_.max_wait);
    detail::parked p(idle_, idle);
    co_await idle;
  }
  working_ = false;
  detail::wake(run_idle_);
  if (run_waiter_) std::exchange(run_waiter_, nullptr).resume();  // run() returns: touch nothing after
}

task<void> delay_queue::run_job(job j, clock::time_point start_at, clock::time_point lease_end, std::int64_t late_us,
                                std::int64_t scheduled_late_us) {
  held h;
  h.next = held_list_;
  if (held_list_ != nullptr) held_list_->prev = &h;
  held_list_ = &h;
  if (start_at > now() && !stopping_) {
    sleep_operation until_due(start_at);
    detail::parked p(h.wait, until_due);
    co_await until_due;
  }
  if (stopping_) {  // never started: hand it back, the claim not counted as an attempt
    const command_arg args[] = {j.id, j.token, j.attempt_due_ms};
    auto r = co_await call(release_, args);
    if (r && r->is_integer()) stats_.handed_back += static_cast<std::uint64_t>(r->integer());
    --held_;
  } else {
    --held_;
    ++running_;
    ++stats_.fired;
    ++metrics_.fired;
    const std::int64_t started_us = to_us(now().time_since_epoch());
    const std::int64_t late = late_us + started_us;
    const std::int64_t scheduled_late = scheduled_late_us + started_us;
    stats_.attempt_lateness.record(late);
    stats_.scheduled_lateness.record(scheduled_late);
    metrics_.lateness_ns.record(static_cast<std::uint64_t>(std::max<std::int64_t>(late, 0)) * 1000);
    metrics_.scheduled_lateness_ns.record(static_cast<std::uint64_t>(std::max<std::int64_t>(scheduled_late, 0)) * 1000);
    deadline lease(lease_end - now());
    j.lease_ = &lease;
    h.lease = &lease;
    result<void> outcome;
    std::string why;
    try {
      outcome = co_await with_deadline(handler_(j), lease);
      if (!outcome) why = outcome.error().message();
    } catch (const std::exception& e) {
      outcome = std::make_error_code(errc::operation_canceled);
      why = std::string("exception: ") + e.what();
    } catch (...) {
      outcome = std::make_error_code(errc::operation_canceled);
      why = "an exception that is not a std::exception";
    }
    h.lease = nullptr;
    j.lease_ = nullptr;
    if (outcome) {
      acks_.emplace_back(j.token, j.position_);
      if (!acking_) {
        acking_ = true;
        spawn(flush_acks());
      } else if (acks_.size() >= max_ack_batch) {
        detail::wake(ack_idle_);  // a full batch goes at once
      }
    } else {
      ++stats_.failed;
      if (why.size() > max_reason_bytes) why.resize(max_reason_bytes);
      const auto shift = std::min<std::int64_t>(j.attempt - 1, 30);
      const auto delay = std::min<std::int64_t>(o_.retry_initial.count() << shift, o_.retry_max.count());
      const command_arg args[] = {j.id, j.token, delay, o_.max_attempts, channel_, why};
      auto r = co_await call(fail_, args);
      const std::int64_t verdict = r && r->is_integer() ? r->integer() : -1;
      if (verdict == 0) count_lost_leases(1);
      if (verdict == 1) count_retry();
      if (verdict == 2) count_dead(1);
    }
    --running_;
  }
  (h.prev != nullptr ? h.prev->next : held_list_) = h.next;
  if (h.next != nullptr) h.next->prev = h.prev;
  finished();
}

// Acknowledges every job done so far, max_ack_batch per script, again while more finished
// meanwhile. A refused acknowledgement (the lease was lost) counts in lost_leases; a failed
// one leaves the jobs in flight: they run again after their lease (at-least-once).
task<void> delay_queue::flush_acks() {
  std::vector<done_job> batch;
  std::vector<command_arg> args;
  for (;;) {
    if (o_.ack_delay.count() > 0 && !stopping_) {  // gather the jobs done meanwhile
      sleep_operation gather = sleep_for(o_.ack_delay);
      detail::parked p(ack_idle_, gather);
      co_await gather;
    }
    // The worker claims within another ack_delay: the acknowledgements go with that claim
    // (work() takes them when it sends it), one request instead of two. A stop or a full
    // batch wakes this wait and sends them now; a claim that will not come (no free slot)
    // does not hold them (next_claim_ is then time_point::max()). While a claim is on its way
    // (next_claim_ is when it was sent) this looks again every ms until the worker knows
    // when it claims next.
    const std::uint64_t carried_before = claims_carrying_acks_;
    while (!acks_.empty() && !stopping_ && o_.ack_delay.count() > 0 && acks_.size() < max_ack_batch &&
           next_claim_ <= now() + o_.ack_delay) {
      sleep_operation ride(std::max(next_claim_, now()) + std::chrono::milliseconds(1));  // just after work()'s wake-up
      detail::parked p(ack_idle_, ride);
      co_await ride;
    }
    // A claim took them; those done since are young: gather them afresh for the next one.
    if (claims_carrying_acks_ == carried_before || acks_.empty() || stopping_ || acks_.size() >= max_ack_batch) break;
  }
  while (!acks_.empty()) {
    const std::size_t n = std::min(acks_.size(), max_ack_batch);
    batch.assign(std::make_move_iterator(acks_.begin()), std::make_move_iterator(acks_.begin() + static_cast<std::ptrdiff_t>(n)));
    acks_.erase(acks_.begin(), acks_.begin() + static_cast<std::ptrdiff_t>(n));
    args.clear();
    append_acks(batch, args);
    auto r = co_await call(ack_, args);
    ++stats_.ack_batches;
    if (r && r->is_integer()) {
      stats_.acked += static_cast<std::uint64_t>(r->integer());
      count_lost_leases(batch.size() - static_cast<std::uint64_t>(r->integer()));
    }
  }
  acking_ = false;
  finished();  // work() may be draining
}

}  // namespace cogwheel::redis
