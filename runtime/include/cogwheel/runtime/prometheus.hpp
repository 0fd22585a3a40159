// to_prometheus: a metrics snapshot in Prometheus's text exposition format (version 0.0.4),
// by Prometheus's naming conventions: every runtime metric is `cogwheel_...`, counters end in
// `_total`, times are in seconds, labels are `core`, `timer_kind`, `phase` (and `level` for
// pending timers, `backend` in cogwheel_core_info). Histograms are exported with 20 fixed
// buckets, 1 us to 2.5 s and +Inf; a bucket's count is of the values at most its `le`, to the
// histogram's resolution (a value within 1/8 below `le` may be counted in the next bucket).
//
// Registered metrics are written under their own names (counters with `_total` added when
// missing), with a `core` label when registered on a loop thread.
#pragma once

#include <string>

#include <cogwheel/runtime/metrics.hpp>

namespace cogwheel {

/// The content type to serve to_prometheus()'s text with.
inline constexpr const char* prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

/// `snapshot` in Prometheus's text exposition format (see the file comment).
std::string to_prometheus(const metrics_snapshot& snapshot);

}  // namespace cogwheel
