#!/usr/bin/env bash
# User-space instructions per request of an HTTP server under wrk (bench/http/README.md,
# "Session 8"): callgrind with instrumentation off during start-up and a warm-up, on for one wrk
# run, off again; the total divided by wrk's request count.
#
#   bash bench/http/callgrind_per_request.sh OUT_DIR CONNS SECONDS -- SERVER [ARGS...]
#
# SERVER must listen on 127.0.0.1:$PORT (PORT is exported; put it in ARGS as "--port=\$PORT"
# quoted, or let the server read it). Server on CPU 0, wrk -t1 on CPU 1. Prints
# "instructions requests per_request"; callgrind.out is left in OUT_DIR for callgrind_annotate.
set -euo pipefail
source "$(dirname "$0")/../callgrind_window.sh"
out=$1 conns=$2 secs=$3; shift 3
[[ $1 == -- ]] && shift
mkdir -p "$out"
rm -f "$out"/callgrind.out*
export PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
args=()
for a in "$@"; do args+=("${a//\$PORT/$PORT}"); done
taskset -c 0 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/callgrind.out" \
  "${args[@]}" >"$out/server.log" 2>&1 &
vg=$!
trap 'kill $vg 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
  sleep 0.2
done
taskset -c 1 wrk -t1 -c"$conns" -d2s "http://127.0.0.1:$PORT/" >/dev/null
callgrind_control -i on $vg >/dev/null
taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" "http://127.0.0.1:$PORT/" >"$out/wrk.txt"
callgrind_window_close $vg
trap - EXIT
reqs=$(awk '/requests in/ {print $1}' "$out/wrk.txt")
ir=$(callgrind_window_total "$out")
echo "$ir $reqs $(( ir / reqs ))"
