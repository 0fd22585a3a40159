#!/usr/bin/env bash
# echo_compare: cogwheel's examples/echo_server (--mode=timeout, one core) against
# bench/peers/asio_echo_server (one thread; with use_awaitable, then with as_tuple tokens) and
# bench/peers/epoll_echo_server (bare level-triggered epoll, no timeouts: the baseline), each
# driven by examples/load_client in its own process over 127.0.0.1, for 64 B and 1 KiB messages.
# Prints a Markdown table: round trips per second, the server's CPU time per round trip (its
# process CPU time, as it prints at exit on SIGINT, divided by the client's round trips), and the
# client's p50/p99 latency.
#
# Usage: bench/peers/echo_compare.sh [BUILD_DIR]        (default build/bench; builds nothing:
#          cmake --build BUILD_DIR --target echo_server load_client asio_echo_server
#          epoll_echo_server)
# Environment: DURATION_MS=3000 CONNECTIONS=1000 PORT=7611 SIZES="64 1024"
#
# Placement: the server runs on CPU 0 and the client on CPU 1 (taskset; load_client --no-pin).
# CPU 0 is not a choice: echo_server pins its core 0 thread to CPU 0 itself.
# Every process is bounded in time (timeout) and everything listens and connects on loopback only
# (echo_server binds the wildcard address, but only 127.0.0.1 is connected to).
set -euo pipefail

build=${1:-build/bench}
duration_ms=${DURATION_MS:-3000}
connections=${CONNECTIONS:-1000}
port=${PORT:-7611}
sizes=${SIZES:-64 1024}
server_cpu=0
client_cpu=1

if [ "$(nproc --all)" -lt 2 ]; then
  echo "echo_compare: needs two CPUs (server on CPU 0, client on CPU 1)" >&2
  exit 1
fi

# The binary named $1 under the build directory: where the CMake and Meson layouts put it, else
# wherever it is.
find_bin() {
  local name=$1 p
  for p in "$build/examples/$name" "$build/bench/peers/$name"; do
    if [ -x "$p" ]; then echo "$p"; return; fi
  done
  find "$build" -type f -name "$name" -perm -u+x 2>/dev/null | head -n 1
}
echo_server=$(find_bin echo_server)
load_client=$(find_bin load_client)
asio_echo_server=$(find_bin asio_echo_server)
epoll_echo_server=$(find_bin epoll_echo_server)
for bin in echo_server load_client asio_echo_server epoll_echo_server; do
  if [ -z "${!bin}" ]; then
    echo "echo_compare: $bin not found under $build (cmake --build $build --target $bin)" >&2
    exit 1
  fi
done

work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# field NAME LINE: the value of NAME=value in load_client's result line.
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }

listening() { ss -Hltn "sport = :$1" | grep -q .; }

# A port nobody listens on, from $port up.
free_port() {
  while listening "$port"; do port=$((port + 1)); done
  echo "$port"
}

# run_one LABEL SIZE SERVER_COMMAND...: one server process, one client run against it, one row.
run_one() {
  local label=$1 size=$2
  shift 2
  local p
  p=$(free_port)
  # The server stops on SIGINT from us after the client is done; the timeout is a backstop.
  timeout -s INT $((duration_ms / 1000 + 60)) taskset -c "$server_cpu" "$@" --port="$p" \
    >"$work/server.out" 2>&1 &
  server_pid=$!
  local tries=0
  until listening "$p"; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ] || ! kill -0 "$server_pid" 2>/dev/null; then
      echo "echo_compare: $label did not start listening on port $p:" >&2
      cat "$work/server.out" >&2
      exit 1
    fi
    sleep 0.05
  done

  local client
  client=$(timeout $((duration_ms / 1000 + 60)) taskset -c "$client_cpu" "$load_client" \
    --to="127.0.0.1:$p" --connections="$connections" --size="$size" --duration-ms="$duration_ms" \
    --no-pin) || true
  kill -INT "$server_pid" 2>/dev/null || true
  wait "$server_pid" || true
  server_pid=""
  port=$((p + 1))  # the old port may linger in TIME_WAIT; never reuse it within a run

  local round_trips rt_per_s p50 p99 cpu
  round_trips=$(field round_trips "$client")
  rt_per_s=$(field rt_per_s "$client")
  p50=$(field p50_us "$client")
  p99=$(field p99_us "$client")
  cpu=$(sed -n 's/.*CPU \([0-9.]*\) s.*/\1/p' "$work/server.out")
  if [ -z "$round_trips" ] || [ -z "$cpu" ] || [ "$round_trips" = 0 ]; then
    echo "echo_compare: $label, $size B: no result. Client: $client" >&2
    cat "$work/server.out" >&2
    echo "| $label | $size | — | — | — | — |"
    return
  fi
  echo "$client" >>"$work/raw.txt"
  awk -v label="$label" -v size="$size" -v rps="$rt_per_s" -v rt="$round_trips" -v cpu="$cpu" \
      -v p50="$p50" -v p99="$p99" \
      'BEGIN { printf "| %s | %s | %d | %.2f | %.0f | %.0f |\n", label, size, rps, cpu * 1e6 / rt, p50, p99 }'
}

echo "echo_compare: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)," \
     "$connections connections, ${duration_ms} ms per run, server on CPU $server_cpu, client on CPU $client_cpu"
echo
echo "| server | size (B) | round trips/s | server CPU µs per round trip | client p50 µs | client p99 µs |"
echo "|---|---:|---:|---:|---:|---:|"
for size in $sizes; do
  run_one "cogwheel echo_server (timeout)" "$size" "$echo_server" --cores=1 --mode=timeout
  run_one "asio_echo_server (use_awaitable)" "$size" "$asio_echo_server" --tokens=use_awaitable
  run_one "asio_echo_server (as_tuple)" "$size" "$asio_echo_server" --tokens=as_tuple
  run_one "epoll_echo_server (no timeout)" "$size" "$epoll_echo_server"
done
