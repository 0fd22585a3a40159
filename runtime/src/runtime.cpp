#include <cogwheel/runtime/runtime.hpp>

#include <cogwheel/runtime/run.hpp>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <latch>
#include <thread>
#include <vector>

#include "event_loop.hpp"

namespace cogwheel {

namespace {

std::atomic<runtime*> signal_target{nullptr};

extern "C" void on_stop_signal(int) {
  if (runtime* rt = signal_target.load()) rt->stop();
}

// Pins the calling thread to the core-th CPU the process may run on (wrapping around), so a
// runtime started under taskset or a cgroup cpuset stays inside it. Best effort: a failure
// leaves the thread unpinned.
void pin_to_cpu(unsigned core) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  const int count = CPU_COUNT(&allowed);
  if (count <= 0) return;
  int wanted = static_cast<int>(core % static_cast<unsigned>(count));
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || wanted-- != 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ::pthread_setaffinity_np(::pthread_self(), sizeof one, &one);
    return;
  }
}

}  // namespace

namespace detail {
void abort_bad_core(unsigned core) noexcept {
  std::fprintf(stderr, "cogwheel: submit_to(%u): no such core in this runtime\n", core);
  std::abort();
}
}  // namespace detail

unsigned this_core() noexcept { return detail::current_loop().core(); }

struct runtime::state {
  explicit state(runtime* owner, runtime_options o);
  ~state();
  void stop() noexcept;
  void run(core_main_ref per_core_main);
  void core_main(unsigned core, core_main_ref per_core_main);
  void core_finished() noexcept;
  void fail(std::exception_ptr e) noexcept;

  runtime* owner;  // what the signal handler stops
  runtime_options options_;
  unsigned cores_;
  // Core i's loop while run() runs (null before it exists and after run()); atomics because
  // stop() may read them from any thread or a signal handler. The array itself lives as long
  // as the runtime.
  std::atomic<detail::event_loop*>* loops_;
  std::atomic<unsigned> running_{0};     // cores whose work has not finished yet
  std::atomic<unsigned> stop_calls_{0};  // stop() calls using loops_ right now
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};  // the first failure claims error_; read after the joins
  std::exception_ptr error_;
};

runtime::runtime(runtime_options options) : state_(new state(this, options)) {}
runtime::~runtime() { delete state_; }
void runtime::stop() noexcept { state_->stop(); }
unsigned runtime::cores() const noexcept { return state_->cores_; }
void runtime::run_cores(core_main_ref per_core_main) { state_->run(per_core_main); }

runtime::state::state(runtime* o, runtime_options options) : owner(o), options_(options) {
  cores_ = options_.cores;
  if (cores_ == 0) {
    const unsigned hw = std::thread::hardware_concurrency();
    cores_ = hw == 0 ? 1 : hw;
  }
  // Allocated here, not in run(): stop() may read it from any thread at any time, so it must
  // not be assigned while the runtime exists (only its atomic entries change).
  loops_ = new std::atomic<detail::event_loop*>[cores_];
  for (unsigned i = 0; i < cores_; ++i) loops_[i].store(nullptr);
}

runtime::state::~state() {
  runtime* self = owner;
  signal_target.compare_exchange_strong(self, nullptr);
  delete[] loops_;
}

void runtime::state::stop() noexcept {
  stopping_.store(true);
  // Counted while it uses the loops: run() waits for it before destroying them.
  stop_calls_.fetch_add(1);
  for (unsigned i = 0; i < cores_; ++i)
    if (detail::event_loop* loop = loops_[i].load()) loop->request_stop();
  stop_calls_.fetch_sub(1);
}

void runtime::state::fail(std::exception_ptr e) noexcept {
  if (!failed_.exchange(true)) error_ = e;
  stop();
}

void runtime::state::core_finished() noexcept {
  if (running_.fetch_sub(1) == 1) stop();
}

void runtime::state::run(core_main_ref per_core_main) {
  std::vector<std::unique_ptr<detail::event_loop>> owned(cores_);
  running_.store(cores_);
  // stopping_ is not cleared here: a stop() that came before run(), or while it starts its
  // threads, must make this run return at once rather than be lost. It is cleared on the way
  // out, once every thread has joined.
  error_ = nullptr;
  failed_.store(false);
  struct sigaction old_int {}, old_term {};
  if (options_.stop_on_signals) {
    signal_target.store(owner);
    struct sigaction sa {};
    sa.sa_handler = &on_stop_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int);
    ::sigaction(SIGTERM, &sa, &old_term);
  }

  std::latch ready(cores_);     // every loop exists (or failed) before any main task starts
  auto serve_core = [this, per_core_main, &ready, &owned](unsigned core) {
    if (options_.pin_threads) pin_to_cpu(core);
    detail::event_loop* loop = nullptr;
    try {
      owned[core] = std::make_unique<detail::event_loop>(options_, core);
      loop = owned[core].get();
      loop->set_peers(loops_, cores_);
      loops_[core].store(loop);
    } catch (...) {
      fail(std::current_exception());
    }
    ready.arrive_and_wait();
    if (loop && !stopping_.load()) {
      try {
        core_main(core, per_core_main);
      } catch (...) {
        fail(std::current_exception());
      }
    } else {
      core_finished();
    }
    // Frames are destroyed on their own thread; the loops themselves only after every thread
    // is done, so a late post_remote or stop() never meets a destroyed loop.
    if (loop != nullptr) loop->shutdown();
  };
  // Core 0 runs on the calling thread, which would otherwise only wait: a one-core runtime is
  // then a single-threaded process, whose syscalls on descriptors skip the kernel's reference
  // counting (fdget's fast path), as a current-thread runtime elsewhere does. The others are
  // started first, so they inherit the caller's CPU set before core 0 pins the caller; the
  // caller's own set is given back afterwards.
  std::vector<std::thread> threads;
  threads.reserve(cores_ - 1);
  for (unsigned core = 1; core < cores_; ++core) threads.emplace_back(serve_core, core);
  cpu_set_t caller_cpus;
  const bool restore_cpus = options_.pin_threads && ::sched_getaffinity(0, sizeof caller_cpus, &caller_cpus) == 0;
  serve_core(0);
  if (restore_cpus) ::sched_setaffinity(0, sizeof caller_cpus, &caller_cpus);
  for (std::thread& t : threads) t.join();
  if (options_.stop_on_signals) {
    runtime* self = owner;
    signal_target.compare_exchange_strong(self, nullptr);
    ::sigaction(SIGINT, &old_int, nullptr);  // the handlers the program had before run()
    ::sigaction(SIGTERM, &old_term, nullptr);
  }
  for (unsigned i = 0; i < cores_; ++i) loops_[i].store(nullptr);
  // A stop() from another thread may have loaded a loop before it was unpublished: wait until
  // no stop() is under way (seq_cst: one that starts later sees only nulls).
  while (stop_calls_.load() != 0) std::this_thread::yield();
  owned.clear();
  stopping_.store(false);
  if (error_) std::rethrow_exception(error_);
}

void runtime::state::core_main(unsigned core, core_main_ref per_core_main) {
  detail::event_loop& loop = *loops_[core].load();
  task<void> main = per_core_main.call(per_core_main.fn, core);
  bool done = false;
  bool counted = false;
  main.start(detail::continuation(&detail::loop_owner::finished, &done), nullptr).resume();
  bool checked = false;
  loop.run_until([&] {
    if (done && !checked) {
      checked = true;
      // A main task that failed stops the runtime now: its exception must not wait for the
      // other cores to run out of work (a server's never would), hidden until then.
      try {
        main.take();
      } catch (...) {
        fail(std::current_exception());
      }
    }
    if (!counted && done && !loop.has_spawned()) {
      counted = true;
      core_finished();
    }
    return false;  // keep serving other cores until the runtime stops
  });
  if (!counted) core_finished();
  loop.destroy_spawned();
}

}  // namespace cogwheel
