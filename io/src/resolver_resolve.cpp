// resolve(host, port) and the error category of its failures.
#include <cogwheel/io/resolve.hpp>

#include <sys/socket.h>

#include <coroutine>
#include <string_view>

#include <cogwheel/runtime/operation.hpp>

#include "resolver.hpp"

namespace cogwheel {

namespace {

class resolve_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cogwheel.resolve"; }
  std::string message(int code) const override {
    switch (static_cast<resolve_errc>(code)) {
      case resolve_errc::not_found: return "name not found";
      case resolve_errc::no_data: return "name has no address";
      case resolve_errc::no_answer: return "no name server answered";
      case resolve_errc::refused: return "name server refused the query";
      case resolve_errc::server_failure: return "name server failure";
      case resolve_errc::bad_response: return "malformed or unsupported name server response";
      case resolve_errc::bad_name: return "not a valid name";
    }
    return "unknown resolve error";
  }
  std::error_condition default_error_condition(int code) const noexcept override {
    if (static_cast<resolve_errc>(code) == resolve_errc::no_answer) return std::errc::timed_out;
    return {code, *this};
  }
};

// Both families of one name at once, as one cancellable operation: completes when both are
// answered, or at once (errc::operation_canceled) when cancelled, detaching both lookups.
class both_families_operation : public operation<both_families_operation> {
 public:
  explicit both_families_operation(std::string_view name) noexcept : name_(name) {}

  std::coroutine_handle<> start(continuation c) {
    continuation_ = c;
    pending_ = 2;
    if (v6_.start(name_, AF_INET6, continuation(&both_families_operation::on_one, this))) --pending_;
    if (v4_.start(name_, AF_INET, continuation(&both_families_operation::on_one, this))) --pending_;
    return pending_ == 0 ? c.complete() : std::noop_coroutine();
  }
  void cancel() noexcept {
    if (pending_ == 0) return;
    pending_ = 0;
    cancelled_ = true;
    v6_.detach();
    v4_.detach();
    later_.post(continuation_);
  }
  cogwheel::result<std::vector<socket_address>> result() {
    if (cancelled_) return errc::operation_canceled;
    std::vector<socket_address> all = std::move(v6_.answer().addresses);
    for (socket_address& a : v4_.answer().addresses) all.push_back(a);
    if (all.empty()) return detail::combined_error(v6_.answer().error, v4_.answer().error);
    return all;
  }

 private:
  static std::coroutine_handle<> on_one(void* p) noexcept {
    auto& self = *static_cast<both_families_operation*>(p);
    if (--self.pending_ != 0) return std::noop_coroutine();
    return self.continuation_.complete();
  }

  std::string_view name_;
  detail::lookup_waiter v6_;
  detail::lookup_waiter v4_;
  continuation continuation_;
  resume_later later_;
  int pending_ = 0;
  bool cancelled_ = false;
};

}  // namespace

const std::error_category& resolve_category() noexcept {
  static const resolve_category_impl category;
  return category;
}

task<result<std::vector<socket_address>>> resolve(std::string host, std::uint16_t port) {
  std::string_view numeric = host;
  if (numeric.size() > 2 && numeric.front() == '[' && numeric.back() == ']') numeric = numeric.substr(1, numeric.size() - 2);
  if (auto a = socket_address::from_ip(numeric, port)) co_return std::vector<socket_address>{*a};
  auto r = co_await both_families_operation(host);
  if (r)
    for (socket_address& a : *r) a.set_port(port);
  co_return r;
}

}  // namespace cogwheel
