#!/usr/bin/env bash
# What one HTTP server asks of the kernel per request, under wrk: SQEs by opcode, io_uring_enter
# calls, poll arms, io-wq punts, short writes, and the server's CPU per request (utime+stime).
# Tracepoints only (no hardware counters needed); perf must be allowed to trace (root).
#
# Usage: bash bench/http/kernel_counts.sh PORT CONNECTIONS SECONDS -- SERVER COMMAND...
#   e.g. bash bench/http/kernel_counts.sh 18080 50 4 -- build/rel/examples/http/http_server \
#          --port=18080 --cores=1 --no-pin --body-bytes=4096
#        bash bench/http/kernel_counts.sh 18081 50 4 -- build/rel/bench/http/bare_uring_responder \
#          --port=18081 --body-bytes=4096
# The server runs on CPU 0, wrk on CPU 1; one warm-up second of wrk opens the connections first.
set -euo pipefail
port=$1 conns=$2 secs=$3
shift 4
tmp=$(mktemp -d)
taskset -c 0 "$@" >"$tmp/server.log" 2>&1 &
server=$!
disown "$server"  # killed at the end: no job notice
trap 'kill -KILL $server 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 50); do wrk -t1 -c1 -d1s "http://127.0.0.1:$port/" >/dev/null 2>&1 && break; sleep 0.1; done
wrk -t1 -c"$conns" -d1s "http://127.0.0.1:$port/" >/dev/null 2>&1
cpu0=$(awk '{print $14 + $15}' "/proc/$server/stat")
taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" "http://127.0.0.1:$port/" >"$tmp/wrk.txt" 2>&1 &
client=$!
perf record -q -e io_uring:io_uring_submit_req -e syscalls:sys_enter_io_uring_enter \
  -e io_uring:io_uring_poll_arm -e io_uring:io_uring_queue_async_work -e io_uring:io_uring_short_write \
  -p "$server" -o "$tmp/perf.data" -- sleep "$secs" 2>/dev/null
wait "$client"
cpu1=$(awk '{print $14 + $15}' "/proc/$server/stat")
requests=$(grep -oE '^ +[0-9]+ requests' "$tmp/wrk.txt" | grep -oE '[0-9]+')
echo "requests/s $((requests / secs)), CPU us/request $(echo "scale=2; ($cpu1 - $cpu0) * 1000000 / $(getconf CLK_TCK) / $requests" | bc)"
# Per request: each event, and SQEs by opcode.
perf script -i "$tmp/perf.data" -F event,trace 2>/dev/null |
  awk -v n="$requests" '{ e = $1; sub(/:$/, "", e); c[e]++
                          if (e ~ /submit_req/) for (i = 2; i < NF; i++) if ($i == "opcode") { o = $(i + 1); sub(/,$/, "", o); op[o]++ } }
                        END { for (e in c) printf "%-40s %.3f\n", e, c[e] / n
                              for (o in op) printf "  SQE %-34s %.3f\n", o, op[o] / n }' | sort
