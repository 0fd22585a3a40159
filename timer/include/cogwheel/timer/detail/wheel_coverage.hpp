// What the wheel's code paths were reached, counted only where COGWHEEL_TIMER_COVERAGE is defined
// for the library and the program alike: the tests and the fuzzer compile the timer sources
// once more with it (tests/timer/CMakeLists.txt, tests/fuzz/), and the differential tests assert
// that each run reached every level and every flush path. Everywhere else, in every build type,
// cover() compiles to nothing and the counters stay zero. The switch is a test-only flag and not
// NDEBUG, so a Release library used from a Debug program sees one definition of every inline
// wheel method (no ODR violation).
//
// One set of counters per thread (a test reads what its own runs reached).
#pragma once

#include <cstdint>

#include <cogwheel/timer/detail/wheel_index.hpp>

namespace cogwheel::timer::detail {

struct wheel_coverage {
  std::uint64_t filed[level_count] = {};      // nodes filed into a slot of each level
  std::uint64_t processed[level_count] = {};  // slots of each level that came due
  std::uint64_t filed_overdue = 0;            // nodes filed at or before the wheel's time
  std::uint64_t stage_flush_full = 0;         // staging filed because 256 nodes were staged
  std::uint64_t stage_flush_advance = 0;      // staging filed by advance()
  std::uint64_t cancel_flush_full = 0;        // cancel log applied because it held 256 entries
  std::uint64_t cancel_flush_filing = 0;      // cancel log applied (non-empty) before filing
  std::uint64_t cancel_flush_destroy = 0;     // cancel log applied (non-empty) by the destructor
  std::uint64_t lazy_pushes = 0;              // later deadlines recorded without moving the node
  std::uint64_t revived = 0;                  // schedules put back into the entry just cancelled
  std::uint64_t filed_now = 0;                // replaced timeouts filed at once, not staged
  std::uint64_t filed_now_woke = 0;           // of those, appends that woke a level's visits
  std::uint64_t visit_moves = 0;              // pushed nodes re-filed by a visit before due
  std::uint64_t visit_emptied = 0;            // visits that emptied the visited slot
  std::uint64_t visit_restarts = 0;           // visit passes that reached a slot's end and began again
  std::uint64_t fast_advances = 0;            // advance() calls answered in O(1)
  std::uint64_t due_cancels = 0;              // cancels of nodes already in the expiry batch
  std::uint64_t visit_entries = 0;            // slot entries read by visit passes
  std::uint64_t visit_nodes = 0;              // nodes whose deadline a visit pass read
  std::uint64_t sample_nodes = 0;             // nodes read by mostly_pushed() samples
  std::uint64_t due_nodes = 0;                // nodes read when their slot came due (process)
  std::uint64_t cascade_moves = 0;            // of those, re-filed (not fired)
};

#ifdef COGWHEEL_TIMER_COVERAGE
inline constexpr bool wheel_coverage_enabled = true;
#else
inline constexpr bool wheel_coverage_enabled = false;
#endif

inline wheel_coverage& coverage() noexcept {
  thread_local wheel_coverage counters;
  return counters;
}

// Applies f to the counters where coverage is enabled; nothing otherwise.
template <class F>
inline void cover(F&& f) noexcept {
  if constexpr (wheel_coverage_enabled) f(coverage());
}

}  // namespace cogwheel::timer::detail
