#!/usr/bin/env bash
# The main demo: the timing wheel against the 4-ary heap on identical timer workloads.
# Builds timer_bench (CMake, Release) into build/demo, runs every workload for N = 1e3..1e6
# pending timers with 3 repetitions (about 1-3 minutes on 2 cores), and prints the Markdown table
# of medians and heap/wheel ratios. The full run (N up to 1e7), what each workload measures and
# the recorded results: bench/README.md.
# Usage: bash examples/demo.sh          (from any directory; installs missing Debian packages)
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/deps.sh

cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/demo --target timer_bench

out=build/demo/timer_bench.json
build/demo/bench/timer_bench \
  --benchmark_filter='/(1000|10000|100000|1000000)$' \
  --benchmark_repetitions=3 --benchmark_min_time=0.2 \
  --benchmark_display_aggregates_only=true \
  --benchmark_out="$out" --benchmark_out_format=json
echo
python3 bench/pair_table.py "$out"
