// Which backend a loop gets: runtime_options::backend, overridden by COGWHEEL_BACKEND; under
// `automatic`, io_uring when it can be set up, else epoll, said once per process on stderr.
#include "io_driver.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

#include "epoll_driver.hpp"
#include "uring_driver.hpp"

namespace cogwheel::detail {

namespace {

// Why io_uring_setup failed, and what to do about it.
std::string why_no_io_uring(int err, unsigned entries) {
  switch (err) {
    case EPERM:
      return "io_uring is not permitted here: the kernel has it disabled (sysctl "
             "kernel.io_uring_disabled is 2, or 1 and this process is not in "
             "kernel.io_uring_group), or a seccomp filter blocks io_uring_setup (container "
             "runtimes' default profiles do). Enable it with 'sysctl -w kernel.io_uring_disabled=0' "
             "or a seccomp profile that allows io_uring_setup, io_uring_enter and "
             "io_uring_register";
    case ENOSYS:
      return "this kernel has no io_uring (or a seccomp filter hides it); io_uring needs Linux "
             "5.19 or later built with CONFIG_IO_URING";
    case ENOMEM:
      return "not enough locked memory for a ring of " + std::to_string(entries) +
             " entries (kernels before 5.12 charge rings to RLIMIT_MEMLOCK). Raise 'ulimit -l' or "
             "lower runtime_options::sq_entries";
    case EMFILE:
    case ENFILE:
      return "no file descriptor left for the ring. Close descriptors or raise 'ulimit -n'";
    default:
      return "the kernel rejected the ring parameters (sq_entries " + std::to_string(entries) +
             "); use a power of two up to 32768";
  }
}

backend_kind requested(backend_kind option) {
  const char* env = std::getenv("COGWHEEL_BACKEND");
  if (env == nullptr || *env == '\0') return option;
  if (std::strcmp(env, "io_uring") == 0) return backend_kind::io_uring;
  if (std::strcmp(env, "epoll") == 0) return backend_kind::epoll;
  if (std::strcmp(env, "automatic") == 0) return backend_kind::automatic;
  throw std::invalid_argument(std::string("cogwheel: COGWHEEL_BACKEND='") + env +
                              "' names no backend: use io_uring, epoll or automatic (or leave it unset)");
}

// Set by the first loop that fell back: later loops of the process under `automatic` go to
// epoll at once, so the cores of a runtime do not end up on different backends (the second
// core's ring failing where the first one's was set up, e.g. for locked memory, is the case
// this cannot cover: that core runs on epoll).
std::atomic<bool> fell_back{false};

}  // namespace

std::unique_ptr<io_driver> make_io_driver(const runtime_options& options, live_metrics& stats,
                                          std::vector<completion>& set_aside) {
  const backend_kind wanted = requested(options.backend);
  int uring_error = 0;
  if (wanted == backend_kind::io_uring || (wanted == backend_kind::automatic && !fell_back.load())) {
    if (auto d = uring_driver::try_create(options, stats, set_aside, uring_error)) return d;
    if (wanted == backend_kind::io_uring)
      throw std::system_error(uring_error, std::system_category(),
                              "cogwheel: cannot set up io_uring (backend io_uring was asked for): " +
                                  why_no_io_uring(uring_error, options.sq_entries) +
                                  "; or run on epoll (COGWHEEL_BACKEND=epoll)");
  }
  int epoll_error = 0;
  if (auto d = epoll_driver::try_create(stats, set_aside, epoll_error)) {
    if (uring_error != 0 && !fell_back.exchange(true))
      std::fprintf(stderr, "cogwheel: io_uring_setup failed (%s), running on epoll: %s.\n",
                   std::strerror(uring_error), why_no_io_uring(uring_error, options.sq_entries).c_str());
    return d;
  }
  std::string m = "cogwheel: no I/O backend can run here: epoll_create1 failed (" +
                  std::string(std::strerror(epoll_error)) + ")";
  if (uring_error != 0)
    m += ", and io_uring_setup (" + std::string(std::strerror(uring_error)) + "): " +
         why_no_io_uring(uring_error, options.sq_entries);
  throw std::system_error(epoll_error, std::system_category(), m);
}

}  // namespace cogwheel::detail
