// delay_queue: the producers' and operators' side (schedule, cancel, depth, the dead set) and
// the stats. The worker (run) is in delay_queue_worker.cpp.
#include <cogwheel/redis/delay_queue.hpp>

#include <algorithm>
#include <bit>
#include <utility>

#include "delay_queue_internal.hpp"
#include "delay_queue_scripts.hpp"

namespace cogwheel::redis {

using detail::as_flag;
using detail::int_of;

void lateness_stats::record(std::int64_t us) noexcept {
  const auto v = static_cast<std::uint64_t>(std::max<std::int64_t>(us, 0));
  ++count;
  sum_us += v;
  max_us = std::max(max_us, v);
  ++buckets[std::min<std::size_t>(static_cast<std::size_t>(std::bit_width(v)), buckets.size() - 1)];
}

std::uint64_t lateness_stats::quantile_us(double q) const noexcept {
  if (count == 0) return 0;
  const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(count - 1)) + 1;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    seen += buckets[i];
    if (seen >= rank) return i == 0 ? 1 : std::min<std::uint64_t>(std::uint64_t{1} << i, max_us);
  }
  return max_us;
}

delay_queue::delay_queue(client& c, std::string name, queue_options options)
    : client_(&c),
      name_(std::move(name)),
      qopts_(options),
      keys_storage_{"{" + name_ + "}:due",   "{" + name_ + "}:inflight", "{" + name_ + "}:job",
                    "{" + name_ + "}:attempts", "{" + name_ + "}:claims",  "{" + name_ + "}:dead",
                    "{" + name_ + "}:reason", "{" + name_ + "}:token",  "{" + name_ + "}:payload"},
      keys_{keys_storage_[0], keys_storage_[1], keys_storage_[2], keys_storage_[3], keys_storage_[4],
            keys_storage_[5], keys_storage_[6], keys_storage_[7], keys_storage_[8]},
      channel_("{" + name_ + "}:wake"),
      schedule_(detail::schedule_lua),
      reschedule_(detail::reschedule_lua),
      cancel_(detail::cancel_lua),
      claim_(detail::claim_lua),
      ack_(detail::ack_lua),
      fail_(detail::fail_lua),
      extend_(detail::extend_lua),
      release_(detail::release_lua),
      depth_(detail::depth_lua),
      list_dead_(detail::list_dead_lua),
      requeue_(detail::requeue_lua) {}

task<result<reply>> delay_queue::call(script& s, std::span<const command_arg> args) {
  return s.run(*client_, keys_, args);
}

task<result<bool>> delay_queue::schedule(std::string id, std::string payload, wall_clock::time_point due) {
  if (payload.size() > qopts_.max_payload_bytes) co_return std::make_error_code(errc::value_too_large);
  const command_arg args[] = {id, payload, detail::to_ms(due), channel_, "at"};
  co_return as_flag(co_await call(schedule_, args));
}

task<result<bool>> delay_queue::schedule_after(std::string id, std::string payload, std::chrono::milliseconds delay) {
  if (payload.size() > qopts_.max_payload_bytes) co_return std::make_error_code(errc::value_too_large);
  const command_arg args[] = {id, payload, std::max<std::int64_t>(delay.count(), 0), channel_, "after"};
  co_return as_flag(co_await call(schedule_, args));
}

task<result<bool>> delay_queue::reschedule(std::string id, wall_clock::time_point due) {
  const command_arg args[] = {id, detail::to_ms(due), channel_};
  co_return as_flag(co_await call(reschedule_, args));
}

task<result<bool>> delay_queue::cancel(std::string id) {
  const command_arg args[] = {id};
  co_return as_flag(co_await call(cancel_, args));
}

task<result<queue_depth>> delay_queue::depth() {
  auto r = co_await call(depth_, {});
  if (!r) co_return r.error();
  if (!r->is_array() || r->size() != 3) co_return make_error_code(error::unexpected_type);
  co_return queue_depth{int_of((*r)[0]), int_of((*r)[1]), int_of((*r)[2])};
}

namespace {
// A page of list_dead: jobs, and bytes of their payloads, ids and reasons, per script (the
// first job always goes, and a payload over max_payload_bytes is left out), so that one reply stays far below max_reply_bytes
// and one script holds the server briefly, however large the dead set or the count asked.
constexpr std::size_t dead_page_jobs = 256;
constexpr std::size_t dead_page_bytes = 4u << 20;
constexpr std::size_t dead_fields = 6;  // id, payload, died_ms, attempts, reason, payload bytes
}  // namespace

task<result<std::vector<dead_job>>> delay_queue::list_dead(std::size_t offset, std::size_t count) {
  std::vector<dead_job> out;
  while (out.size() < count) {
    const std::size_t page = std::min(count - out.size(), dead_page_jobs);
    // After the first page, the next starts after the last job listed (the offset is the
    // fallback when that job left the dead set meanwhile).
    const command_arg args[] = {offset, page, dead_page_bytes, qopts_.max_payload_bytes,
                                out.empty() ? command_arg("") : command_arg(out.back().id)};
    auto r = co_await call(list_dead_, std::span(args, out.empty() ? 4 : 5));
    if (!r) co_return r.error();
    if (!r->is_array() || r->size() < 2 || (r->size() - 2) % dead_fields != 0) co_return make_error_code(error::unexpected_type);
    const auto f = r->elements();
    for (std::size_t i = 2; i < f.size(); i += dead_fields) {
      out.push_back(dead_job{std::string(f[i].str()), std::string(f[i + 1].str()),
                             static_cast<std::size_t>(int_of(f[i + 5])), int_of(f[i + 2]), int_of(f[i + 3]),
                             std::string(f[i + 4].str())});
    }
    if (f.size() == 2 || int_of(f[1]) != 1) break;  // the end of the dead set
    offset = static_cast<std::size_t>(int_of(f[0]));
  }
  co_return out;
}

task<result<bool>> delay_queue::requeue_dead(std::string id, std::chrono::milliseconds delay) {
  const command_arg args[] = {id, std::max<std::int64_t>(delay.count(), 0), channel_};
  co_return as_flag(co_await call(requeue_, args));
}

task<result<bool>> delay_queue::extend(const job& j, std::chrono::milliseconds visibility) {
  const clock::time_point sent = now();
  visibility = std::max(visibility, std::chrono::milliseconds::zero());  // the server never shortens
  const command_arg args[] = {j.id, j.token, visibility.count()};
  auto r = co_await call(extend_, args);
  if (!r) co_return r.error();
  if (r->is_integer() && r->integer() == 0) {
    count_lost_leases(1);
    co_return false;
  }
  if (!r->is_array()) co_return make_error_code(error::unexpected_type);
  // The server stamped the new expiry after `sent`: ending the margin before sent + visibility,
  // the handler's deadline stays inside the lease. Like the lease, it is never shortened (the
  // reply's expiry is the server's clock, the deadline the local one: the deadline only moves
  // later, which the server's max() makes safe).
  if (j.lease_ != nullptr) {
    const clock::time_point until = detail::later_by(sent, visibility - detail::margin_of(o_));
    if (until > j.lease_->expiry()) j.lease_->reset_to(until);
  }
  co_return true;
}

}  // namespace cogwheel::redis
