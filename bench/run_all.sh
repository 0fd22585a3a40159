#!/usr/bin/env bash
# Runs every benchmark of this directory once, keeps the JSON under docs/results/, prints the
# wheel/heap tables and draws the plots into docs/ (needs Debian's python3-matplotlib for the
# plots). About 10 minutes on 2 cores.
# Usage: bash bench/run_all.sh [build dir, default build/bench]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build"
out=docs/results
mkdir -p "$out"
b="$build/bench"
"$b/timer_bench" --benchmark_repetitions=3 --benchmark_display_aggregates_only=true \
  --benchmark_filter='/(1000|10000|100000|1000000|10000000)$' \
  --benchmark_out="$out/timer.json" --benchmark_out_format=json
"$b/runtime_bench" --benchmark_out="$out/runtime.json" --benchmark_out_format=json
"$b/idle_bench" --benchmark_out="$out/idle.json" --benchmark_out_format=json
"$b/echo_bench" --benchmark_out="$out/echo.json" --benchmark_out_format=json
if [ -x "$build/bench/peers/timer_peers_bench" ]; then
  "$build/bench/peers/timer_peers_bench" --benchmark_out="$out/timer_peers.json" --benchmark_out_format=json
fi
python3 bench/pair_table.py "$out/timer.json"
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  peers=()
  [ -f "$out/timer_peers.json" ] && peers=(--timer "$out/timer_peers.json")
  /usr/bin/python3 bench/plot.py --timer "$out/timer.json" "${peers[@]}" --echo "$out/echo.json" --out docs \
    --title-note "$(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) vCPU"
fi
