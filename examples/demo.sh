#!/usr/bin/env bash
# The main demo: idle_demo, a server that kicks idle connections at their deadlines, run on the
# timing wheel and then on the heap timer, printed side by side (4,000 loopback connections by
# default; about 15 s). Builds with CMake (Release) into build/demo first.
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
cmake --build build/demo --target idle_demo
exec build/demo/examples/idle_demo "$@"
