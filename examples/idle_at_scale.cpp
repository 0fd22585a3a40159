// idle_at_scale: the demo's last phase. The idle-connection job at the scale where the choice
// of timer queue matters: 100,000 and 1,000,000 connections, each heartbeating every 0.5..1.5 s
// and pushing its 3 s idle deadline forward, 10% going silent to be kicked. Real sockets stop
// at the descriptor limit (two per loopback connection, 20,000 here), so the connections are
// simulated: coroutines on one core that receive heartbeats from a simulated network on the
// paused clock (examples/idle_simulation.hpp). The timer queue and its work are the real ones,
// the wheel's and then the heap twin's, on identical work.
//
// What it prints: per size and queue, the heartbeats handled, the kicks (0 wrongly), the loop's
// CPU per heartbeat, and last, the timer CPU per heartbeat (advance() plus deadline::reset():
// where the wheel does its lazy re-filing and the heap its sifting).
//
// Usage: idle_at_scale [--connections=100000,1000000] [--seconds=12]
// Needs: about 1 GiB of memory per million connections.
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <cogwheel/cogwheel.hpp>

#include "idle_simulation.hpp"
#include "support.hpp"

using namespace cogwheel;

namespace {

std::vector<long> parse_sizes(const std::string& list) {
  std::vector<long> sizes;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (const long n = std::strtol(item.c_str(), nullptr, 10); n > 0) sizes.push_back(n);
  return sizes;
}

std::string with_commas(long n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<long> sizes = parse_sizes(examples::flag(argc, argv, "connections", "100000,1000000"));
  const auto length = std::chrono::seconds(examples::flag_int(argc, argv, "seconds", 12));
  // A silent connection sends up to 5 heartbeats 0.5..1.5 s apart, then is kicked 3 s later:
  // by 10.5 s every one has been.
  if (sizes.empty() || length < std::chrono::seconds(11)) {
    std::fprintf(stderr, "usage: idle_at_scale [--connections=100000,1000000] [--seconds=12 (>= 11)]\n");
    return 2;
  }

  std::printf("The same job at the scale where the timer queue matters. Real sockets stop at the descriptor\n"
              "limit (two per loopback connection), so these connections are simulated: coroutines fed by a\n"
              "simulated network on the paused clock. The timer queue and its work are the real ones.\n\n");
  struct column {
    std::string name;
    examples::idle_simulation_result r;
  };
  std::vector<column> columns;
  for (const long n : sizes) {
    for (auto [name, kind] : {std::pair{"wheel", timer_kind::wheel}, std::pair{"heap", timer_kind::heap}}) {
      std::printf("== %s connections on the %s, %lld s of virtual time ...\n", with_commas(n).c_str(), name,
                  static_cast<long long>(length.count()));
      std::fflush(stdout);
      columns.push_back({std::string(name) + " " + with_commas(n), examples::simulate_idle_connections(n, kind, length)});
    }
  }

  std::printf("\n%-32s", "");
  for (const auto& c : columns) std::printf("%18s", c.name.c_str());
  std::printf("\n");
  const auto row = [&](const char* label, auto value) {
    std::printf("%-32s", label);
    for (const auto& c : columns) std::printf("%18s", value(c.r).c_str());
    std::printf("\n");
  };
  const auto num = [](double v, const char* fmt) {
    char b[32];
    std::snprintf(b, sizeof b, fmt, v);
    return std::string(b);
  };
  using result = examples::idle_simulation_result;
  row("heartbeats handled", [&](const result& r) { return with_commas(r.heartbeats); });
  row("silent (should be kicked)", [&](const result& r) { return with_commas(r.silent); });
  row("kicked", [&](const result& r) { return with_commas(r.kicked); });
  row("wrongly kicked (must be 0)", [&](const result& r) { return std::to_string(r.wrongly_kicked); });
  row("loop CPU per heartbeat (ns)", [&](const result& r) { return num(r.per_heartbeat(r.loop_cpu_s * 1e9), "%.0f"); });
  row("  of which advance() (ns)", [&](const result& r) { return num(r.per_heartbeat(r.advance_ns), "%.1f"); });
  row("  of which reset() (ns)", [&](const result& r) { return num(r.per_heartbeat(r.reset_ns), "%.1f"); });
  row("timer CPU per heartbeat (ns)", [&](const result& r) { return num(r.per_heartbeat(r.timer_ns()), "%.1f"); });

  bool ok = true;
  for (const auto& c : columns) ok = ok && c.r.wrongly_kicked == 0 && c.r.kicked == c.r.silent;
  const column& wheel = columns[columns.size() - 2];
  const column& heap = columns.back();
  const double ratio = wheel.r.timer_ns() / heap.r.timer_ns() * static_cast<double>(heap.r.heartbeats) /
                       static_cast<double>(wheel.r.heartbeats);
  std::printf("\nThe last row is what each heartbeat costs the timer queue: pushing a connection's idle deadline\n"
              "forward and later expiring it. At %s connections the wheel spends %.2fx the heap's time on it\n"
              "(O(1) per push, against a sift through a heap of %s).%s\n",
              with_commas(heap.r.connections).c_str(), ratio, with_commas(heap.r.connections).c_str(),
              ok ? "" : "\nMISMATCH: a connection was kicked wrongly or not at all (see the rows above)");
  return ok ? 0 : 1;
}
