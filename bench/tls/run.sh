#!/usr/bin/env bash
# HTTPS: cogwheel's examples/http against nginx (see run.py for what is measured and how).
# Builds http_server (Release, build/bench-tls) and runs run.py; results go to stdout (the
# table) and stderr (each repetition). Needs nginx-light, wrk, openssl, taskset, 2 CPUs and a
# descriptor limit of 20,000.
#   bash bench/tls/run.sh [--reps=5] [--duration=5] [--idle=10000] [--slow=1000]
set -euo pipefail
cd "$(dirname "$0")/../.."
for tool in nginx wrk openssl taskset; do
  command -v "$tool" >/dev/null || { echo "bench/tls: $tool is missing"; exit 1; }
done
ulimit -n 20000
cmake -S . -B build/bench-tls -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOGWHEEL_BUILD_TESTS=OFF -DCOGWHEEL_BENCH=OFF >/dev/null
nice -n 10 cmake --build build/bench-tls --target http_server >/dev/null
python3 bench/tls/run.py --server=build/bench-tls/examples/http/http_server "$@"
