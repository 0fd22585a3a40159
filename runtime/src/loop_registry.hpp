// loop_registry: every event loop alive in the process, so that any thread can snapshot their
// metrics (snapshot_metrics). A loop adds itself at the end of its construction and removes
// itself first thing in its destruction; a snapshot reads the loops under the registry's
// mutex, so none is destroyed while it is read (only its atomic metric cells and the fields
// fixed at construction are read).
#pragma once

namespace cogwheel::detail {

class event_loop;

struct loop_registry {
  static void add(event_loop& loop);
  static void remove(event_loop& loop) noexcept;
};

}  // namespace cogwheel::detail
