#!/usr/bin/env bash
# idle_backends: examples/idle_demo (timing wheel) on cogwheel's io_uring backend and on its epoll
# backend (the same binary, COGWHEEL_BACKEND=io_uring|epoll), REPS runs each, interleaved
# (io_uring, epoll, io_uring, epoll, ...). Prints one Markdown row per run and the median row per
# backend: kicks (must equal the silent connections, with 0 wrongly kicked), kick lateness
# p50/p99/max against the deadline, server core CPU, loop iterations and timers fired.
# A run whose process does not hold the backend asked for (an io_uring descriptor in
# /proc/PID/fd, or an epoll one and no io_uring) is reported as "wrong backend".
#
# Usage: bench/peers/idle_backends.sh [BUILD_DIR] [idle_demo flags...]   (default build/bench;
#          builds nothing: cmake --build BUILD_DIR --target idle_demo)
# Environment: REPS=3, RAW=FILE also keeps every run's idle_demo output in FILE.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build/bench}
shift || true
reps=${REPS:-3}
demo=$build/examples/idle_demo
[ -x "$demo" ] || demo=$(find "$build" -type f -name idle_demo -perm -u+x 2>/dev/null | head -n 1)
if [ -z "$demo" ]; then
  echo "idle_backends: idle_demo not found under $build (cmake --build $build --target idle_demo)" >&2
  exit 1
fi

work=$(mktemp -d)
demo_pid=""
cleanup() {
  if [ -n "$demo_pid" ]; then kill -TERM "$demo_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# row LABEL FILE: the wheel column of idle_demo's row LABEL.
row() { sed -n "s/^$1  *//p" "$2" | awk '{ print $1 }'; }

keys=(connected "silent (should be kicked)" kicked "wrongly kicked (must be 0)" "kick lateness p50 (ms)"
      "kick lateness p99 (ms)" "kick lateness max (ms)" "server core CPU (s)" "server loop iterations"
      "server timers fired")

echo "idle_backends: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)," \
     "$reps runs per backend interleaved, idle_demo --timers=wheel $*"
: >"$work/runs.tsv"
for rep in $(seq 1 "$reps"); do
  for backend in io_uring epoll; do
    out=$work/$backend.$rep.txt
    COGWHEEL_BACKEND=$backend timeout 300 "$demo" --timers=wheel "$@" >"$out" 2>"$work/err.txt" &
    demo_pid=$!
    sleep 1  # connecting; the loop and its backend exist by now (in timeout's child)
    fds=$(for pid in $demo_pid $(pgrep -P "$demo_pid"); do ls -l "/proc/$pid/fd" 2>/dev/null; done || true)
    got=unknown
    if grep -q io_uring <<<"$fds"; then got=io_uring; elif grep -q eventpoll <<<"$fds"; then got=epoll; fi
    rc=0
    wait "$demo_pid" || rc=$?
    demo_pid=""
    [ -z "${RAW:-}" ] || { echo "== $backend run $rep (exit $rc)"; cat "$out"; } >>"$RAW"
    if [ "$got" != "$backend" ]; then
      echo "idle_backends: asked for $backend, runs on $got" >&2
      printf '%s\t%s\twrong backend (%s)\n' "$backend" "$rep" "$got" >>"$work/runs.tsv"
      continue
    fi
    line="$backend"$'\t'"$rep"
    for k in "${keys[@]}"; do line+=$'\t'$(row "$k" "$out"); done
    grep -q '^every silent connection was kicked' "$out" && line+=$'\tyes' || line+=$'\tNO'
    printf '%s\n' "$line" >>"$work/runs.tsv"
  done
done
echo "idle_backends: done $(date -u '+%H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo

awk -F'\t' -f "$here/median.awk" -f <(cat <<'AWK'
  BEGIN {
    print "| backend | run | connected | silent | kicked | wrongly kicked | lateness p50 ms | p99 ms | max ms | server CPU s | loop iterations | timers fired | all right |"
    print "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
  }
  NF < 13 { printf "| %s | %s | %s |||||||||||\n", $1, $2, $3; next }
  {
    printf "| %s | %s |", $1, $2
    for (i = 3; i <= 12; i++) { printf " %s |", $i; v[$1, i] = v[$1, i] " " $i }
    printf " %s |\n", $13
    seen[$1] = 1
  }
  END {
    split("io_uring epoll", order, " ")
    for (b = 1; b <= 2; b++) {
      if (!(order[b] in seen)) continue
      printf "| **%s** | median |", order[b]
      for (i = 3; i <= 12; i++) printf (i >= 7 && i <= 10 ? " %.3f |" : " %d |"), median(v[order[b], i])
      printf " |\n"
    }
  }
AWK
) "$work/runs.tsv"
