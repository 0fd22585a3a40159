#!/usr/bin/env bash
# pooled_reads: what reads from a shared pool (examples/echo_server --pooled, i.e.
# tcp_stream::read_pooled() on io_uring provided buffers) save and cost, each figure with and
# without --pooled in the same run, rounds interleaved, medians reported.
#
# 1. Memory per idle connection: echo_server (one core, idle deadline 10 min, so nobody is
#    kicked) is started and its RSS read (baseline); then examples/load_client, in its own
#    process, opens IDLE connections that never send (--idle, spread over 127.0.0.1..8); once
#    the server holds them all its RSS is read again. (loaded - baseline) / connections is the
#    user-space memory per idle connection: coroutine frame, stream, deadline, buffer if any.
#    Kernel socket memory is not in RSS and is the same either way.
# 2. Echo CPU per round trip: the same server (--mode=deadline, the idle-kick pattern) against
#    load_client with CONNECTIONS talking connections, 64 B and 1 KiB messages: the server's
#    process CPU time (printed at exit) divided by the client's round trips.
#
# Usage: bash bench/pooled_reads.sh [BUILD_DIR]      (default build/bench; builds nothing:
#          cmake --build BUILD_DIR --target echo_server load_client)
# Environment: IDLE=19000 ROUNDS=3 CONNECTIONS=1000 DURATION_MS=3000 SIZES="64 1024" PORT=7711
#              PARTS="memory echo" (either alone runs only that part)
# Needs 2 CPUs (server on CPU 0, client on CPU 1) and a hard RLIMIT_NOFILE above IDLE + 100 in
# each process (the client and the server each hold one descriptor per connection).
set -euo pipefail

build=${1:-build/bench}
idle=${IDLE:-19000}
rounds=${ROUNDS:-3}
connections=${CONNECTIONS:-1000}
duration_ms=${DURATION_MS:-3000}
sizes=${SIZES:-64 1024}
port=${PORT:-7711}
parts=${PARTS:-memory echo}

find_bin() {
  local p
  for p in "$build/examples/$1" "$build/$1"; do
    if [ -x "$p" ]; then echo "$p"; return; fi
  done
  find "$build" -type f -name "$1" -perm -u+x 2>/dev/null | head -n 1
}
echo_server=$(find_bin echo_server)
load_client=$(find_bin load_client)
for bin in echo_server load_client; do
  if [ -z "${!bin}" ]; then
    echo "pooled_reads: $bin not found under $build (cmake --build $build --target $bin)" >&2
    exit 1
  fi
done

work=$(mktemp -d)
server_pid=""
client_pid=""
cleanup() {
  if [ -n "$client_pid" ]; then kill -TERM "$client_pid" 2>/dev/null || true; fi
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

listening() { ss -Hltn "sport = :$1" | grep -q .; }
free_port() {
  while listening "$port"; do port=$((port + 1)); done
  echo "$port"
}
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }
rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }
open_fds() { ls "/proc/$1/fd" | wc -l; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# start_server ARGS...: echo_server on CPU 0 on a fresh port; sets server_pid and $p.
start_server() {
  p=$(free_port)
  taskset -c 0 "$echo_server" --cores=1 --no-pin --port="$p" "$@" >"$work/server.out" 2>&1 &
  server_pid=$!
  local tries=0
  until listening "$p"; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ] || ! kill -0 "$server_pid" 2>/dev/null; then
      echo "pooled_reads: echo_server $* did not start:" >&2
      cat "$work/server.out" >&2
      exit 1
    fi
    sleep 0.05
  done
}
stop_server() {
  kill -INT "$server_pid" 2>/dev/null || true
  wait "$server_pid" || true
  server_pid=""
  port=$((p + 1))  # never reuse a port within a run (TIME_WAIT)
}

# both_ways NAME COMMAND...: COMMAND and COMMAND --pooled in turn, $rounds times each; their
# result lines go to $work/NAME_plain and $work/NAME_pooled (and to stderr, as the log).
both_ways() {
  local name=$1 r
  shift
  for r in $(seq 1 "$rounds"); do
    "$@" | tee -a "$work/${name}_plain" | sed "s/^/  $name round $r, buffer in the frame: /" >&2
    "$@" --pooled | tee -a "$work/${name}_pooled" | sed "s/^/  $name round $r, --pooled: /" >&2
  done
}

# memory_round FLAGS...: prints "bytes_per_connection connections baseline_kib loaded_kib".
memory_round() {
  start_server --mode=deadline --idle-timeout-ms=600000 "$@"
  sleep 0.3
  local base base_fds
  base=$(rss_kib "$server_pid")
  base_fds=$(open_fds "$server_pid")
  taskset -c 1 "$load_client" --to="127.0.0.1:$p" --connections=0 --idle="$idle" --spread=8 \
    --duration-ms=60000 --no-pin >"$work/client.out" 2>&1 &
  client_pid=$!
  local held=0 tries=0
  while [ "$held" -lt "$idle" ] && [ "$tries" -lt 300 ]; do
    sleep 0.1
    held=$(($(open_fds "$server_pid") - base_fds))
    tries=$((tries + 1))
  done
  sleep 1  # let the last accepts settle into their first read
  held=$(($(open_fds "$server_pid") - base_fds))
  local loaded
  loaded=$(rss_kib "$server_pid")
  kill -TERM "$client_pid" 2>/dev/null || true
  wait "$client_pid" 2>/dev/null || true
  client_pid=""
  stop_server
  if [ "$held" -lt "$idle" ]; then
    echo "pooled_reads: echo_server $*: the server holds only $held of $idle connections" >&2
  fi
  awk -v l="$loaded" -v b="$base" -v n="$held" 'BEGIN { printf "%.0f %d %d %d\n", (l - b) * 1024 / n, n, b, l }'
}

# echo_round SIZE FLAGS...: prints "server_cpu_us_per_rt rt_per_s".
echo_round() {
  local size=$1
  shift
  start_server --mode=deadline "$@"
  local client
  client=$(timeout $((duration_ms / 1000 + 60)) taskset -c 1 "$load_client" --to="127.0.0.1:$p" \
    --connections="$connections" --size="$size" --duration-ms="$duration_ms" --no-pin) || true
  stop_server
  local rt cpu
  rt=$(field round_trips "$client")
  cpu=$(sed -n 's/.*CPU \([0-9.]*\) s.*/\1/p' "$work/server.out")
  if [ -z "$rt" ] || [ -z "$cpu" ] || [ "$rt" = 0 ]; then
    echo "pooled_reads: echo $size B $*: no result. Client: $client" >&2
    cat "$work/server.out" >&2
    return
  fi
  awk -v cpu="$cpu" -v rt="$rt" -v rps="$(field rt_per_s "$client")" 'BEGIN { printf "%.3f %d\n", cpu * 1e6 / rt, rps }'
}

echo "pooled_reads: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)," \
     "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $rounds rounds interleaved, medians"
if [[ " $parts " == *" memory "* ]]; then
echo
echo "## Memory per idle connection ($idle connections that never send)"
echo
echo "  (log: bytes per connection, connections, baseline KiB, loaded KiB)" >&2
both_ways mem memory_round
plain_b=$(cut -d' ' -f1 "$work/mem_plain" | median)
pooled_b=$(cut -d' ' -f1 "$work/mem_pooled" | median)
echo "| echo_server | connections held | server RSS per idle connection | per million idle connections |"
echo "|---|---:|---:|---:|"
for m in plain pooled; do
  f=$work/mem_$m
  b=$(cut -d' ' -f1 "$f" | median)
  n=$(cut -d' ' -f2 "$f" | median)
  label=$([ "$m" = plain ] && echo "4 KiB buffer in each connection's frame" || echo "--pooled (shared per-core pool)")
  awk -v label="$label" -v b="$b" -v n="$n" 'BEGIN { printf "| %s | %d | %.0f B | %.2f GiB |\n", label, n, b, b * 1e6 / 1073741824 }'
done
awk -v a="$plain_b" -v b="$pooled_b" 'BEGIN { printf "\npooled / plain: %.3f\n", b / a }'
fi
[[ " $parts " == *" echo "* ]] || exit 0

echo
echo "## Echo CPU per round trip ($connections connections, mode=deadline, ${duration_ms} ms per round)"
echo
echo "| size (B) | server CPU µs per round trip: buffer in frame | --pooled | pooled / plain | round trips/s: buffer in frame | --pooled |"
echo "|---:|---:|---:|---:|---:|---:|"
echo "  (log: server CPU us per round trip, round trips/s)" >&2
for size in $sizes; do
  both_ways "echo_$size" echo_round "$size"
  a=$(cut -d' ' -f1 "$work/echo_${size}_plain" | median)
  b=$(cut -d' ' -f1 "$work/echo_${size}_pooled" | median)
  ra=$(cut -d' ' -f2 "$work/echo_${size}_plain" | median)
  rb=$(cut -d' ' -f2 "$work/echo_${size}_pooled" | median)
  awk -v s="$size" -v a="$a" -v b="$b" -v ra="$ra" -v rb="$rb" \
    'BEGIN { printf "| %s | %.2f | %.2f | %.3f | %.0f | %.0f |\n", s, a, b, b / a, ra, rb }'
done
