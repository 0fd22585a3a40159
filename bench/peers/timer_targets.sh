#!/usr/bin/env bash
# The timer rows of issue 27 (items 1, 2, 3 and 8), each beside its peer, measured in one run:
# timer_bench (the wheel, the heap twin, the textbook linked wheel), timer_peers_bench (ratas)
# and idle_bench (the miss floor), alternated REPS times so that a noisy minute of the shared
# machine hits every queue alike; then timer_targets.py prints one table of medians, ranges,
# ratios and the verdict against each target. Needs a build configured with
# -DCOGWHEEL_RATAS_INCLUDE_DIR=<a C++20-compatible ratas checkout> (bench/peers/README.md) for the
# ratas rows; without it they print as "-".
#
#   bash bench/peers/timer_targets.sh BUILD_DIR [OUT_DIR]      (REPS=3 by default)
#
# About 6 minutes per repetition on a 2-vCPU guest (the 1e7 populations and the idle pattern's
# 5 x 60 s of simulated time per queue dominate). Peak memory ~4 GB.
set -euo pipefail
build=${1:?usage: timer_targets.sh BUILD_DIR [OUT_DIR]}
out=${2:-$(mktemp -d)}
reps=${REPS:-3}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)

timer_rows='^(churn|expire)/(wheel|linked)/(1000|1000000)$|^churn/(wheel|linked)/(100000|10000000)$|^reschedule_later/(wheel|linked)/10000000$|^idle_max/(wheel|heap)/'
ratas_rows='^(churn|expire)/ratas/(1000|1000000)$|^churn/ratas/(100000|10000000)$|^reschedule_later/ratas/10000000$'
idle_rows='^miss_floor/1000000$|^idle/(wheel|heap)/1000000/'

for bin in bench/timer_bench bench/idle_bench; do
  [ -x "$build/$bin" ] || { echo "no $build/$bin (build the bench targets)" >&2; exit 1; }
done
for r in $(seq 1 "$reps"); do
  echo "repetition $r of $reps: $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  "$build/bench/timer_bench" --benchmark_format=json --benchmark_filter="$timer_rows" \
    > "$out/timer$r.json" 2>/dev/null
  if [ -x "$build/bench/peers/timer_peers_bench" ]; then
    "$build/bench/peers/timer_peers_bench" --benchmark_format=json --benchmark_filter="$ratas_rows" \
      > "$out/peers$r.json" 2>/dev/null
  fi
  "$build/bench/idle_bench" --benchmark_format=json --benchmark_filter="$idle_rows" \
    > "$out/idle$r.json" 2>/dev/null
done
echo "JSON in $out" >&2
python3 "$here/timer_targets.py" "$out"
