#!/usr/bin/env bash
# The main demo, in two phases (about a minute and a half after the build):
#   1. idle_demo: a server that kicks idle connections at their deadlines, on real loopback
#      sockets (4,000 by default), on the timing wheel and then on the heap timer, side by side;
#   2. idle_at_scale: the same job at 100,000 and 1,000,000 connections, where the choice of
#      timer queue matters. Real sockets stop at the descriptor limit, so these connections are
#      simulated on the paused clock; the timer queue and its work are real. It ends with the
#      timer CPU per heartbeat, the wheel's then the heap's.
# Builds with CMake (Release) into build/demo first.
# Usage: bash examples/demo.sh [idle_demo flags, e.g. --connections=9000]
#        (from any directory; installs missing Debian packages)
# The timer-queue benchmark table (wheel vs heap, 1e3..1e6 pending timers, about a minute):
#        bash examples/demo.sh --timer-bench
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/deps.sh

cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
if [ "${1:-}" = "--timer-bench" ]; then
  cmake --build build/demo --target timer_bench
  out=build/demo/timer_bench.json
  build/demo/bench/timer_bench \
    --benchmark_filter='/(1000|10000|100000|1000000)$' \
    --benchmark_repetitions=3 --benchmark_min_time=0.2 \
    --benchmark_display_aggregates_only=true \
    --benchmark_out="$out" --benchmark_out_format=json
  echo
  python3 bench/pair_table.py "$out"
  exit 0
fi
cmake --build build/demo --target idle_demo idle_at_scale
build/demo/examples/idle_demo "$@"
echo
build/demo/examples/idle_at_scale
