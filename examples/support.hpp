// Boilerplate shared by the example programs (kept out of them so each reads as what it shows):
// command-line flags, the descriptor limit, percentiles and CPU clocks.
#pragma once

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace examples {

// --name=value or --name value; returns fallback when absent.
inline std::string flag(int argc, char** argv, std::string_view name, std::string fallback) {
  const std::string key = "--" + std::string(name);
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == key && i + 1 < argc) return argv[i + 1];
    if (a.size() > key.size() && a.substr(0, key.size()) == key && a[key.size()] == '=')
      return std::string(a.substr(key.size() + 1));
  }
  return fallback;
}
inline long flag_int(int argc, char** argv, std::string_view name, long fallback) {
  return std::strtol(flag(argc, argv, name, std::to_string(fallback)).c_str(), nullptr, 10);
}
inline double flag_double(int argc, char** argv, std::string_view name, double fallback) {
  return std::strtod(flag(argc, argv, name, std::to_string(fallback)).c_str(), nullptr);
}
inline bool has_flag(int argc, char** argv, std::string_view name) {
  const std::string key = "--" + std::string(name);
  for (int i = 1; i < argc; ++i)
    if (argv[i] == key) return true;
  return false;
}

// Raises the soft RLIMIT_NOFILE to the hard limit and returns the new soft limit.
inline long raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  ::getrlimit(RLIMIT_NOFILE, &rl);
  return static_cast<long>(rl.rlim_cur);
}

inline double cpu_seconds(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
inline double process_cpu_seconds() { return cpu_seconds(CLOCK_PROCESS_CPUTIME_ID); }
inline double thread_cpu_seconds() { return cpu_seconds(CLOCK_THREAD_CPUTIME_ID); }

// The p-th percentile (0..100) of v, nearest-rank; 0 for an empty v. Sorts v.
template <class T>
T percentile(std::vector<T>& v, double p) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(rank, v.size() - 1)];
}

}  // namespace examples
