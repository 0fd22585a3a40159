#include <cogwheel/redis/delay_queue.hpp>

#include <algorithm>
#include <charconv>
#include <exception>
#include <utility>
#include <vector>

#include <cogwheel/runtime/spawn.hpp>
#include <cogwheel/runtime/timeout.hpp>

#include "delay_queue_scripts.hpp"
#include "parked.hpp"

namespace cogwheel::redis {

namespace {

// Rounded up: a job is never due before the time it was given.
std::int64_t to_ms(wall_clock::time_point t) noexcept {
  return std::chrono::ceil<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

result<bool> as_flag(const result<reply>& r) {
  if (!r) return r.error();
  if (!r->is_integer()) return make_error_code(error::unexpected_type);
  return r->integer() != 0;
}

std::int64_t int_of(const reply& r) noexcept {
  if (auto i = r.to_integer()) return *i;
  if (auto d = r.to_double()) return static_cast<std::int64_t>(*d);
  return 0;
}

}  // namespace

delay_queue::delay_queue(client& c, std::string name)
    : client_(&c),
      name_(std::move(name)),
      due_("{" + name_ + "}:due"),
      inflight_("{" + name_ + "}:inflight"),
      payload_("{" + name_ + "}:payload"),
      attempts_("{" + name_ + "}:attempts"),
      dead_("{" + name_ + "}:dead"),
      channel_("{" + name_ + "}:wake"),
      schedule_(detail::schedule_lua),
      reschedule_(detail::reschedule_lua),
      cancel_(detail::cancel_lua),
      claim_(detail::claim_lua),
      ack_(detail::ack_lua),
      fail_(detail::fail_lua) {}

task<result<bool>> delay_queue::schedule(std::string_view id, std::string_view payload, wall_clock::time_point due) {
  const command_arg keys[] = {due_, payload_};
  const command_arg args[] = {id, payload, to_ms(due), channel_};
  co_return as_flag(co_await schedule_.run(*client_, keys, args));
}

task<result<bool>> delay_queue::reschedule(std::string_view id, wall_clock::time_point due) {
  const command_arg keys[] = {due_};
  const command_arg args[] = {id, to_ms(due), channel_};
  co_return as_flag(co_await reschedule_.run(*client_, keys, args));
}

task<result<bool>> delay_queue::cancel(std::string_view id) {
  const command_arg keys[] = {due_, inflight_, payload_, attempts_};
  const command_arg args[] = {id};
  co_return as_flag(co_await cancel_.run(*client_, keys, args));
}

void delay_queue::stop() noexcept {
  stopping_ = true;
  wake();
}

void delay_queue::wake() noexcept { detail::wake(idle_); }

// A job became the earliest at `payload` (ms): wake the worker if it sleeps past it.
void delay_queue::on_message(std::string_view payload) noexcept {
  std::int64_t at = 0;
  std::from_chars(payload.data(), payload.data() + payload.size(), at);
  hint_ms_ = std::min(hint_ms_, at);
  if (idle_ != nullptr && at < sleeping_until_ms_) {
    ++stats_.woken_by_message;
    wake();
  }
}

task<void> delay_queue::run_job(job j, const handler_type& handler, const worker_options& o,
                                clock::time_point claimed_at) {
  // The claim was sent at claimed_at, before the server stamped the visibility expiry: a local
  // deadline of claimed_at + visibility ends no later than the job's visibility does.
  result<void> outcome;
  try {
    outcome = co_await with_deadline(handler(j), claimed_at + o.visibility);
  } catch (const std::exception&) {
    outcome = make_error_code(errc::operation_canceled);
  }
  if (outcome) {
    acks_.push_back(std::move(j.id));
    if (!acking_) {
      acking_ = true;
      spawn(flush_acks());
    }
  } else {
    ++stats_.failed;
    const auto shift = std::min<std::int64_t>(j.attempt - 1, 30);
    const auto delay = std::min<std::int64_t>(o.retry_initial.count() << shift, o.retry_max.count());
    const command_arg keys[] = {due_, inflight_, dead_};
    const command_arg args[] = {j.id, delay, j.attempt, o.max_attempts, channel_};
    (void)co_await fail_.run(*client_, keys, args);
  }
  --running_;
  wake();  // the worker may be waiting for a free slot
}

// Acknowledges every job done so far in one script, again while more finished meanwhile. A
// failed acknowledgement leaves those jobs in flight: they run again after their visibility
// (at-least-once).
task<void> delay_queue::flush_acks() {
  const command_arg keys[] = {inflight_, payload_, attempts_};
  std::vector<std::string> batch;
  std::vector<command_arg> args;
  while (!acks_.empty()) {
    batch.swap(acks_);
    args.assign(batch.begin(), batch.end());
    auto r = co_await ack_.run(*client_, keys, args);
    ++stats_.ack_batches;
    if (r && r->is_integer()) stats_.acked += static_cast<std::uint64_t>(r->integer());
    batch.clear();
  }
  acking_ = false;
  wake();  // run() may be waiting for the last batch
}

task<result<void>> delay_queue::run(handler_type handler, worker_options o) {
  client_options sub_options;
  sub_options.address = o.address;
  sub_options.subscriptions = {channel_};
  sub_options.on_message = [this](std::string_view, std::string_view m) { on_message(m); };
  auto sub = co_await client::connect(std::move(sub_options));
  if (!sub) co_return sub.error();

  const command_arg keys[] = {due_, inflight_, payload_, attempts_};
  auto error_backoff = std::chrono::milliseconds(10);
  while (!stopping_) {
    std::int64_t wait_ms = o.max_wait.count();
    std::int64_t now_ms = 0;
    if (running_ < o.concurrency) {
      const unsigned limit = o.concurrency - running_;
      const command_arg args[] = {o.visibility.count(), limit};
      const clock::time_point sent = clock::now();
      hint_ms_ = INT64_MAX;
      auto r = co_await claim_.run(*client_, keys, args);
      ++stats_.claims;
      if (!r || !r->is_array() || r->size() != 4 || !(*r)[1].is_array()) {
        co_await sleep_for(error_backoff);
        error_backoff = std::min(error_backoff * 2, std::chrono::milliseconds(1000));
        continue;
      }
      error_backoff = std::chrono::milliseconds(10);
      now_ms = int_of((*r)[0]);
      const auto fields = (*r)[1].elements();
      for (std::size_t i = 0; i + 3 < fields.size(); i += 4) {
        job j{std::string(fields[i].str()), std::string(fields[i + 1].str()), int_of(fields[i + 2]),
              int_of(fields[i + 3])};
        ++running_;
        ++stats_.jobs;
        spawn(run_job(std::move(j), handler, o, sent));
      }
      if (fields.size() / 4 == limit) continue;  // more may be due already
      for (std::size_t k : {2u, 3u}) {
        const std::int64_t next = int_of((*r)[k]);
        if (next >= 0) wait_ms = std::min(wait_ms, std::max<std::int64_t>(next - now_ms, 0) + o.coalesce.count());
      }
      if (hint_ms_ < now_ms + wait_ms) continue;  // announced while the claim was on its way
    }
    if (stopping_) break;
    sleep_operation idle = sleep_for(std::chrono::milliseconds(wait_ms));
    // Waiting for a free slot, an earlier job changes nothing.
    sleeping_until_ms_ = running_ < o.concurrency ? now_ms + wait_ms : INT64_MIN;
    detail::parked p(idle_, idle);
    co_await idle;
  }
  while (running_ > 0 || acking_) {
    sleep_operation idle = sleep_for(o.max_wait);
    detail::parked p(idle_, idle);
    co_await idle;
  }
  co_return result<void>();
}

}  // namespace cogwheel::redis
