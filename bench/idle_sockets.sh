#!/usr/bin/env bash
# The idle-connection scenario on real sockets at the scale the descriptor limit allows: the
# server (examples/echo_server, one core, idle deadline per connection reset on every message)
# holds ~19,000 connections from a load client in a separate process: 2,000 that echo 64-byte
# messages back to back and 17,000 that connect and stay silent, to be kicked after the 2 s idle
# timeout. Run once on the wheel and once on the heap; prints the server's CPU time, the share
# spent inside the timer queue's advance() (--measure-timers), and how many were kicked.
# Usage: bash bench/idle_sockets.sh [build dir, default build/bench]   (Release build with examples)
# Needs a hard RLIMIT_NOFILE of 20,000 or more per process (client and server each hold ~19k).
set -euo pipefail
build=${1:-build/bench}
port=${PORT:-7310}
talkers=${TALKERS:-2000}
idle=${IDLE:-17000}
for kind in wheel heap; do
  out=$(mktemp)
  taskset -c 0 "$build/examples/echo_server" --cores=1 --port="$port" --mode=deadline \
    --idle-timeout-ms=2000 --timers="$kind" --measure-timers --no-pin > "$out" &
  server=$!
  sleep 0.5
  client=$(taskset -c 1 "$build/examples/load_client" --to=127.0.0.1:"$port" --connections="$talkers" \
    --idle="$idle" --size=64 --duration-ms=6000 --spread=8 --no-pin) || true  # failures are in its line
  kill -INT "$server"
  wait "$server" || true
  echo "== $kind: client: $client"
  sed -n '2,$p' "$out" | sed "s/^/== $kind: server: /"
  rm -f "$out"
  port=$((port + 1))
done
