// What the examples print of the runtime's metrics at exit: timer lateness p50/p99/max per
// timer kind, and the time each kind spent on timer work. The loops are gone by the time
// run() returns, so a keeper task on each core copies its metrics out while it runs.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <vector>

#include <cogwheel/runtime/metrics.hpp>
#include <cogwheel/runtime/sleep.hpp>
#include <cogwheel/runtime/task.hpp>

namespace examples {

// One line: "timer lateness (wheel, 1234 timers): p50 0.012 ms  p99 0.950 ms  max 1.310 ms".
inline void print_lateness(std::FILE* out, const char* kind, const cogwheel::histogram& h) {
  std::fprintf(out, "timer lateness (%s, %llu timers): p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", kind,
               static_cast<unsigned long long>(h.count()), static_cast<double>(h.quantile(0.5)) * 1e-6,
               static_cast<double>(h.quantile(0.99)) * 1e-6, static_cast<double>(h.max()) * 1e-6);
}

// The latest metrics of every core, kept where main() can read them after run() returned.
class metrics_keeper {
 public:
  // Spawn on each core: copies the core's metrics every `every` (and never returns: for a
  // runtime that ends with stop()).
  cogwheel::task<void> keep(unsigned core, std::chrono::milliseconds every = std::chrono::milliseconds(50)) {
    for (;;) {
      save(core, cogwheel::this_core_metrics());
      co_await cogwheel::sleep_for(every);
    }
  }
  void save(unsigned core, const cogwheel::core_metrics& m) {
    const std::lock_guard lock(mutex_);
    if (cores_.size() <= core) cores_.resize(core + 1);
    cores_[core] = m;
  }
  // Lateness per timer kind over every core.
  void print_summary(std::FILE* out) const {
    const std::lock_guard lock(mutex_);
    for (auto kind : {cogwheel::timer_kind::wheel, cogwheel::timer_kind::heap}) {
      cogwheel::histogram h;
      bool any = false;
      for (const auto& c : cores_) {
        if (c.timers != kind) continue;
        h.merge(c.timer_lateness);
        any = true;
      }
      if (any) print_lateness(out, kind == cogwheel::timer_kind::wheel ? "wheel" : "heap", h);
    }
  }

 private:
  mutable std::mutex mutex_;
  std::vector<cogwheel::core_metrics> cores_;
};

}  // namespace examples
