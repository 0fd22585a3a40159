#!/usr/bin/env bash
# cogwheel's examples/http against nginx (Debian's nginx-light), side by side, with wrk
# and slowhttptest: throughput and CPU per request (beside the floor, bench/http/
# bare_uring_responder), slowloris, slow body, slow read, and memory per idle keep-alive
# connection. Builds the servers (CMake Release, build/bench-http), runs
# bench/http/run.py, keeps the JSON in docs/results/http.json and draws docs/http.png.
# About 12 minutes with the defaults (10 s wrk runs, 3 repetitions).
# Usage: bash bench/http/run.sh [run.py flags, e.g. --duration=5 --reps=1 --only=throughput]
# Needs: 2 CPUs (servers on CPU 0, clients on CPU 1), a hard RLIMIT_NOFILE of 20,000, and the
# Debian packages libhttp-parser-dev nginx-light wrk slowhttptest (python3-matplotlib for the plot).
set -euo pipefail
cd "$(dirname "$0")/../.."
for tool in nginx wrk slowhttptest taskset; do
  command -v "$tool" >/dev/null || { echo "bench/http: $tool is missing (apt-get install nginx-light wrk slowhttptest)"; exit 1; }
done
cmake -S . -B build/bench-http -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOGWHEEL_BUILD_TESTS=OFF -DCOGWHEEL_BENCH=ON >/dev/null
cmake --build build/bench-http --target http_server bare_uring_responder
python3 bench/http/run.py --binary=build/bench-http/examples/http/http_server \
  --bare-binary=build/bench-http/bench/http/bare_uring_responder --out=docs/results/http.json "$@"
# Debian's matplotlib is for Debian's python3 (another python3 may come first on PATH).
/usr/bin/python3 bench/http/plot.py docs/results/http.json docs/http.png || echo "bench/http: no plot (python3-matplotlib missing?)"
