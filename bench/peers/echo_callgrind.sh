#!/usr/bin/env bash
# echo_callgrind: user-space instructions per round trip of examples/echo_server under
# examples/load_client, by callgrind: instrumentation off through start-up and a 2 s warm-up run
# of the client, on for one client run, off, dumped; the total divided by the client's round
# trips. Deterministic enough to compare modes and builds on a shared machine where the CPU time
# per round trip of bench/peers/echo_compare.sh swings by 50% (bench/README.md, "Echo on epoll").
#
#   bash bench/peers/echo_callgrind.sh OUT_DIR LOAD_CLIENT SECONDS -- SERVER [ARGS...]
#
# e.g. COGWHEEL_BACKEND=epoll bash bench/peers/echo_callgrind.sh /tmp/cg build/rel/examples/load_client
#        5 -- build/rel/examples/echo_server --cores=1 --mode=timeout
# (the backend from the environment: valgrind would not follow an `env` into the server). SERVER gets --port=PORT appended. 1000 connections of 64 B messages (CONNECTIONS, SIZE), server
# on CPU 0, client on CPU 1. Prints "instructions round_trips per_round_trip". On epoll, valgrind
# knows no epoll_pwait2 (ENOSYS): the driver falls back to epoll_wait, as on kernels before 5.11.
set -euo pipefail
source "$(dirname "$0")/../callgrind_window.sh"
out=$1 client=$2 secs=$3; shift 3
[[ $1 == -- ]] && shift
conns=${CONNECTIONS:-1000} size=${SIZE:-64}
mkdir -p "$out"
rm -f "$out"/callgrind.out*
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c 0 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/callgrind.out" \
  "$@" --port="$port" >"$out/server.log" 2>&1 &
vg=$!
trap 'kill $vg 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1).close()" 2>/dev/null && break
  sleep 0.2
done
load() { taskset -c 1 "$client" --to="127.0.0.1:$port" --connections="$conns" --size="$size" --duration-ms="$1" --no-pin; }
load 2000 >/dev/null
callgrind_control -i on $vg >/dev/null
load $((secs * 1000)) >"$out/client.txt"
callgrind_window_close $vg
trap - EXIT
rts=$(sed -n 's/.*round_trips=\([0-9]*\).*/\1/p' "$out/client.txt")
ir=$(callgrind_window_total "$out")
echo "$ir $rts $(( ir / rts ))"
