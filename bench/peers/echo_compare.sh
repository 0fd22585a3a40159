#!/usr/bin/env bash
# echo_compare: cogwheel's examples/echo_server (--mode=timeout, one core) on io_uring and on
# epoll (the same binary, COGWHEEL_BACKEND=epoll), tokio_echo (tokio current_thread runtime,
# tokio::time::timeout on every read), bench/peers/asio_echo_server (one thread; with
# use_awaitable, then with as_tuple tokens) and bench/peers/epoll_echo_server (bare
# level-triggered epoll, no timeouts: the baseline), each driven by examples/load_client in its
# own process over 127.0.0.1, for 64 B and 1 KiB messages.
#
# REPS repetitions, interleaved: repetition 1 runs every (size, server) once, then repetition 2
# does, and so on, so a noisy minute of the shared machine hits every server alike. Prints a
# Markdown table of medians over the repetitions: round trips per second, the server's CPU time
# per round trip (its process CPU time, as it prints at exit on SIGINT, divided by the client's
# round trips) with each repetition's value and the ratio to cogwheel on io_uring, and the
# client's p50/p99 latency. CPU per round trip is the figure to compare on a noisy 2-core machine.
#
# Usage: bench/peers/echo_compare.sh [BUILD_DIR]        (default build/bench; builds only
#          tokio_echo, with cargo into BUILD_DIR/tokio_echo, when cargo is present. The rest:
#          cmake --build BUILD_DIR --target echo_server load_client asio_echo_server
#          epoll_echo_server)
# Environment: DURATION_MS=3000 CONNECTIONS=1000 PORT=7611 SIZES="64 1024" REPS=3
#              SERVERS="uring epoll tokio asio_awaitable asio_tuple bare" (a subset, in order;
#                uring_plain and epoll_plain run cogwheel without timeouts: --mode=plain)
#              BASELINE=path to another build's echo_server: SERVERS may then name uring_base and
#                epoll_base, the same runs with that binary (old and new code side by side)
#              RAW=FILE also keeps every run's row (tab-separated) in FILE
#              CARGO=path to cargo (default: cargo on PATH, else ~/.cargo/bin/cargo)
#              SYSCALLS=1 also counts the server's system calls while the client runs (perf stat
#                on the syscall tracepoints, attached to the server process) and prints a second
#                table: system calls per round trip, in total and by call. The counting costs
#                the server CPU time, so take the first table's CPU figures from a run without it.
#
# tokio_echo's crates come from Debian's packaged registry (/usr/share/cargo/registry,
# apt-get install librust-tokio-dev librust-tokio+{rt,net,time,io-util,macros,signal}-dev
# librust-libc-dev) when it has tokio, offline and --locked to the committed Cargo.lock;
# otherwise from crates.io, resolved afresh in a copy under BUILD_DIR (the committed lock's
# checksums are Debian's). Run as root on Debian, the script installs Debian's cargo and those
# crates when missing. Without cargo, or when the build fails, its row says "skipped (why)".
#
# Each cogwheel row checks which backend the server really runs on (an io_uring descriptor in
# /proc/PID/fd or not) and prints "wrong backend" instead of numbers when it is not the one asked
# for, e.g. a build that ignores COGWHEEL_BACKEND.
#
# Placement: the server runs on CPU 0 and the client on CPU 1 (taskset; load_client --no-pin).
# CPU 0 is not a choice: echo_server pins its core 0 thread to CPU 0 itself.
# Every process is bounded in time (timeout) and everything listens and connects on loopback only
# (echo_server binds the wildcard address, but only 127.0.0.1 is connected to).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build/bench}
duration_ms=${DURATION_MS:-3000}
connections=${CONNECTIONS:-1000}
port=${PORT:-7611}
sizes=${SIZES:-64 1024}
reps=${REPS:-3}
servers=${SERVERS:-uring epoll tokio asio_awaitable asio_tuple bare}
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
for bin in echo_server load_client epoll_echo_server; do
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

# tokio_echo: built here (cargo is quick when nothing changed); $tokio_skip says why not.
tokio_echo=""
tokio_skip=""
# shellcheck source=cargo_peer.sh
. "$here/cargo_peer.sh"
build_tokio() {
  install_tokio_packages echo_compare
  cargo_peer_build echo_compare tokio_echo "$build" "$work"
  tokio_echo=$cargo_peer_bin
  tokio_skip=$cargo_peer_skip
}
case " $servers " in *" tokio "*) build_tokio ;; esac

# field NAME LINE: the value of NAME=value in load_client's result line.
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }

listening() { ss -Hltn "sport = :$1" | grep -q .; }

# A port nobody listens on, from $port up.
free_port() {
  while listening "$port"; do port=$((port + 1)); done
  echo "$port"
}

# The process listening on port $1 (the server itself, below timeout, taskset and env).
listener_pid() { ss -Hltnp "sport = :$1" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n 1; }

# The backend of the process listening on port $1: io_uring if it holds an io_uring instance,
# else epoll if it holds an epoll instance.
backend_of() {
  local pid
  pid=$(listener_pid "$1")
  [ -n "$pid" ] || { echo unknown; return; }
  local fds
  fds=$(ls -l "/proc/$pid/fd" 2>/dev/null)
  if grep -q 'io_uring' <<<"$fds"; then echo io_uring
  elif grep -q 'eventpoll' <<<"$fds"; then echo epoll
  else echo unknown; fi
}

# run_one LABEL SIZE WANT_BACKEND SERVER_COMMAND...: one server process, one client run against
# it, one tab-separated line in $work/runs.tsv (label, size, rt/s, CPU us per rt, p50, p99), or
# a line with the reason in place of the numbers. WANT_BACKEND "-" checks nothing.
run_one() {
  local label=$1 size=$2 want=$3
  shift 3
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
  local got=-
  [ "$want" = - ] || got=$(backend_of "$p")

  local client="" perf_pid=""
  if [ -n "${SYSCALLS:-}" ] && [ "$got" = "$want" ]; then
    perf stat -x, -e "$perf_events" -p "$(listener_pid "$p")" -o "$work/perf.txt" &
    perf_pid=$!
  fi
  if [ "$got" = "$want" ]; then
    client=$(timeout $((duration_ms / 1000 + 60)) taskset -c "$client_cpu" "$load_client" \
      --to="127.0.0.1:$p" --connections="$connections" --size="$size" \
      --duration-ms="$duration_ms" --no-pin) || true
  fi
  if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
  kill -INT "$server_pid" 2>/dev/null || true
  wait "$server_pid" || true
  server_pid=""
  port=$((p + 1))  # the old port may linger in TIME_WAIT; never reuse it within a run

  if [ "$got" != "$want" ]; then
    echo "echo_compare: $label asked for $want but runs on $got" >&2
    printf '%s\t%s\twrong backend (%s)\n' "$label" "$size" "$got" >>"$work/runs.tsv"
    return
  fi
  local round_trips rt_per_s p50 p99 cpu
  round_trips=$(field round_trips "$client")
  rt_per_s=$(field rt_per_s "$client")
  p50=$(field p50_us "$client")
  p99=$(field p99_us "$client")
  cpu=$(sed -n 's/.*CPU \([0-9.]*\) s.*/\1/p' "$work/server.out")
  if [ -z "$round_trips" ] || [ -z "$cpu" ] || [ "$round_trips" = 0 ]; then
    echo "echo_compare: $label, $size B: no result. Client: $client" >&2
    cat "$work/server.out" >&2
    printf '%s\t%s\tno result\n' "$label" "$size" >>"$work/runs.tsv"
    return
  fi
  awk -v OFS='\t' -v label="$label" -v size="$size" -v rps="$rt_per_s" -v rt="$round_trips" \
      -v cpu="$cpu" -v p50="$p50" -v p99="$p99" \
      'BEGIN { print label, size, rps, sprintf("%.3f", cpu * 1e6 / rt), p50, p99 }' >>"$work/runs.tsv"
  if [ -n "$perf_pid" ]; then
    # perf's CSV lines are count,unit,event,...: the total and each call's count per round trip.
    awk -F, -v OFS='\t' -v label="$label" -v size="$size" -v rt="$round_trips" '
      $3 == "raw_syscalls:sys_enter" { total = $1 }
      $3 ~ /^syscalls:sys_enter_/ && $1 + 0 > 0 {
        name = substr($3, 20); by[name] = $1; named += $1; names[++n] = name
      }
      END {
        line = ""
        for (i = 1; i <= n; i++) line = line sprintf("%s%s %.3f", i > 1 ? ", " : "", names[i], by[names[i]] / rt)
        if (total > named) line = line sprintf("%sother %.3f", n ? ", " : "", (total - named) / rt)
        print label, size, sprintf("%.3f", total / rt), line
      }' "$work/perf.txt" >>"$work/syscalls.tsv"
  fi
}

# skip_row LABEL SIZE WHY
skip_row() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$work/runs.tsv"; }

# run_server KEY SIZE: one run of the server named KEY (see SERVERS).
run_server() {
  local size=$2
  case $1 in
    uring) run_one "cogwheel echo_server, io_uring (timeout)" "$size" io_uring \
             env COGWHEEL_BACKEND=io_uring "$echo_server" --cores=1 --mode=timeout ;;
    epoll) run_one "cogwheel echo_server, epoll (timeout)" "$size" epoll \
             env COGWHEEL_BACKEND=epoll "$echo_server" --cores=1 --mode=timeout ;;
    uring_plain) run_one "cogwheel echo_server, io_uring (no timeout)" "$size" io_uring \
             env COGWHEEL_BACKEND=io_uring "$echo_server" --cores=1 --mode=plain ;;
    epoll_plain) run_one "cogwheel echo_server, epoll (no timeout)" "$size" epoll \
             env COGWHEEL_BACKEND=epoll "$echo_server" --cores=1 --mode=plain ;;
    uring_base) run_one "baseline echo_server, io_uring (timeout)" "$size" io_uring \
             env COGWHEEL_BACKEND=io_uring "$BASELINE" --cores=1 --mode=timeout ;;
    epoll_base) run_one "baseline echo_server, epoll (timeout)" "$size" epoll \
             env COGWHEEL_BACKEND=epoll "$BASELINE" --cores=1 --mode=timeout ;;
    tokio)
      if [ -n "$tokio_echo" ]; then
        run_one "tokio_echo (time::timeout)" "$size" - "$tokio_echo"
      else
        skip_row "tokio_echo (time::timeout)" "$size" "$tokio_skip"
      fi ;;
    asio_awaitable | asio_tuple)
      local tokens=use_awaitable
      [ "$1" = asio_tuple ] && tokens=as_tuple
      if [ -n "$asio_echo_server" ]; then
        run_one "asio_echo_server ($tokens)" "$size" - "$asio_echo_server" --tokens=$tokens
      else
        skip_row "asio_echo_server ($tokens)" "$size" "skipped (no asio_echo_server: libasio-dev)"
      fi ;;
    bare) run_one "epoll_echo_server (no timeout)" "$size" - "$epoll_echo_server" ;;
    *) echo "echo_compare: unknown server $1 in SERVERS" >&2; exit 2 ;;
  esac
}

# The calls an echo server makes per round trip on one of the five designs measured here.
perf_events=raw_syscalls:sys_enter
for call in read write recvfrom sendto recvmsg sendmsg readv writev epoll_wait epoll_pwait \
            epoll_pwait2 epoll_ctl io_uring_enter timerfd_settime futex accept4 clock_gettime; do
  perf_events+=,syscalls:sys_enter_$call
done
if [ -n "${SYSCALLS:-}" ] && ! perf stat -e "$perf_events" -- true >/dev/null 2>&1; then
  echo "echo_compare: SYSCALLS=1 needs perf with the syscall tracepoints (perf stat -e $perf_events)" >&2
  exit 1
fi

echo "echo_compare: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)," \
     "$connections connections, ${duration_ms} ms per run, $reps repetitions interleaved," \
     "server on CPU $server_cpu, client on CPU $client_cpu"
: >"$work/runs.tsv"
: >"$work/syscalls.tsv"
for rep in $(seq 1 "$reps"); do
  for size in $sizes; do
    for key in $servers; do run_server "$key" "$size"; done
  done
done
echo "echo_compare: done $(date -u '+%H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "${RAW:-}" ] || cp "$work/runs.tsv" "$RAW"
echo

# Medians per (label, size) in first-seen order; ratio of the median CPU to cogwheel io_uring's.
awk -F'\t' -f "$here/median.awk" -f <(cat <<'AWK'
  {
    k = $1 SUBSEP $2
    if (!(k in seen)) { seen[k] = 1; order[++rows] = k; label[k] = $1; size[k] = $2 }
    if (NF < 6) { why[k] = $3; next }
    rps[k] = rps[k] " " $3; cpu[k] = cpu[k] " " $4; p50[k] = p50[k] " " $5; p99[k] = p99[k] " " $6
    reps[k] = reps[k] (reps[k] == "" ? "" : ", ") sprintf("%.2f", $4)
  }
  END {
    print "| server | size (B) | round trips/s | server CPU µs per round trip | per repetition | vs cogwheel io_uring | client p50 µs | client p99 µs |"
    print "|---|---:|---:|---:|---|---:|---:|---:|"
    for (r = 1; r <= rows; r++) {
      k = order[r]
      if (cpu[k] != "" && label[k] ~ /io_uring/) base[size[k]] = median(cpu[k])
    }
    for (r = 1; r <= rows; r++) {
      k = order[r]
      if (cpu[k] == "") { printf "| %s | %s | %s | | | | | |\n", label[k], size[k], why[k]; continue }
      c = median(cpu[k])
      ratio = base[size[k]] > 0 ? sprintf("%.2fx", c / base[size[k]]) : ""
      printf "| %s | %s | %d | %.2f | %s | %s | %.0f | %.0f |\n", label[k], size[k], median(rps[k]), c, reps[k], ratio, median(p50[k]), median(p99[k])
    }
  }
AWK
) "$work/runs.tsv"

if [ -s "$work/syscalls.tsv" ]; then
  echo
  echo "System calls per round trip (perf stat on the server's syscall tracepoints during the client's run; each repetition):"
  echo
  echo "| server | size (B) | syscalls per round trip | by call |"
  echo "|---|---:|---:|---|"
  awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' "$work/syscalls.tsv"
fi
