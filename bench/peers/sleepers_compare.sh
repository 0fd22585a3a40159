#!/usr/bin/env bash
# sleepers_compare.sh: 1M sleeping coroutines expiring and resuming, cogwheel against tokio, in
# one run (issue 27 item 4). cogwheel's side is runtime_bench's `sleepers_expire/wheel/N` row;
# tokio's is tokio_sleepers/ (the same work: N tasks asleep at uniform 1..1000 ms deadlines on a
# paused clock, each woken, counted and re-armed for a day; the window opens once every task
# sleeps). Both report the loop thread's CPU time per sleeper (cpu_ns_per_sleeper, the figure
# compared: immune to other processes on a shared machine) and wall time per sleeper, each the
# mean of 3 iterations in one process. The two run alternately, REPS times, both on CPU 0
# (taskset); the table gives the medians and cogwheel / tokio.
#
# Usage: bench/peers/sleepers_compare.sh [BUILD_DIR]     (default build/bench; needs
#          cmake --build BUILD_DIR --target runtime_bench; builds tokio_sleepers with cargo into
#          BUILD_DIR/tokio_sleepers, about 20 s the first time, nothing after)
# Environment: N=1000000 REPS=5
#              BASELINE=path to another build's runtime_bench: a third row, the same run with that
#                binary (old and new code side by side)
#              CARGO=path to cargo (default: cargo on PATH, else ~/.cargo/bin/cargo)
#
# tokio's crates come from Debian's packaged registry (/usr/share/cargo/registry, apt-get install
# librust-tokio-dev librust-tokio+rt-dev librust-tokio+time-dev librust-libc-dev; the test-util
# feature needs no package of its own) offline and --locked to the committed Cargo.lock, else
# from crates.io, resolved afresh in a copy under BUILD_DIR. Without cargo or the crates, or
# when the build fails, tokio's row says "skipped (why)" and cogwheel's row is still measured.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build/bench}
n=${N:-1000000}
reps=${REPS:-5}
cpu=0

runtime_bench=$build/bench/runtime_bench
[ -x "$runtime_bench" ] || runtime_bench=$(find "$build" -type f -name runtime_bench -perm -u+x 2>/dev/null | head -n 1)
if [ -z "$runtime_bench" ]; then
  echo "sleepers_compare: runtime_bench not found under $build (cmake --build $build --target runtime_bench)" >&2
  exit 1
fi
if [ -n "${BASELINE:-}" ] && [ ! -x "$BASELINE" ]; then
  echo "sleepers_compare: BASELINE=$BASELINE is not an executable runtime_bench" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# tokio_sleepers: built here; $tokio_skip says why not.
tokio_sleepers=""
tokio_skip=""
# shellcheck source=cargo_peer.sh
. "$here/cargo_peer.sh"
build_tokio() {
  install_tokio_packages sleepers_compare
  cargo_peer_build sleepers_compare tokio_sleepers "$build" "$work"
  tokio_sleepers=$cargo_peer_bin
  tokio_skip=$cargo_peer_skip
}
build_tokio

# counter NAME TEXT: the value of NAME=value in TEXT.
counter() { grep -o "$1=[0-9.e+]*" <<<"$2" | head -n 1 | cut -d= -f2; }

# run_cogwheel LABEL BINARY: one runtime_bench process, one line in runs.tsv.
run_cogwheel() {
  local out
  out=$(timeout 600 taskset -c "$cpu" "$2" --benchmark_filter="^sleepers_expire/wheel/$n/" 2>&1) || true
  local c w
  c=$(counter cpu_ns_per_sleeper "$out")
  w=$(counter ns_per_sleeper "$(grep -o ' ns_per_sleeper=[0-9.e+]*' <<<"$out")")
  if [ -z "$c" ]; then
    echo "sleepers_compare: $1 gave no result (is $n among the row's sizes?):" >&2
    tail -n 3 <<<"$out" >&2
    printf '%s\tno result\n' "$1" >>"$work/runs.tsv"
    return
  fi
  printf '%s\t%s\t%s\n' "$1" "$c" "$w" >>"$work/runs.tsv"
}

run_tokio() {
  local label="tokio 1.24 current_thread (tokio_sleepers)"
  if [ -z "$tokio_sleepers" ]; then printf '%s\t%s\n' "$label" "$tokio_skip" >>"$work/runs.tsv"; return; fi
  local out
  out=$(timeout 600 taskset -c "$cpu" "$tokio_sleepers" --n="$n" --iterations=3 2>&1 | tail -n 1) || true
  local c w
  c=$(counter cpu_ns_per_sleeper "$out")
  w=$(counter ' ns_per_sleeper' "$out")
  if [ -z "$c" ]; then
    echo "sleepers_compare: tokio_sleepers gave no result: $out" >&2
    printf '%s\tno result\n' "$label" >>"$work/runs.tsv"
    return
  fi
  printf '%s\t%s\t%s\n' "$label" "$c" "$w" >>"$work/runs.tsv"
}

echo "sleepers_compare: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)," \
     "N=$n, $reps repetitions alternating, each the mean of 3 iterations, on CPU $cpu"
: >"$work/runs.tsv"
for rep in $(seq 1 "$reps"); do
  run_cogwheel "cogwheel sleepers_expire/wheel ($runtime_bench)" "$runtime_bench"
  run_tokio
  if [ -n "${BASELINE:-}" ]; then run_cogwheel "baseline sleepers_expire/wheel ($BASELINE)" "$BASELINE"; fi
done
echo "sleepers_compare: done $(date -u '+%H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo

awk -F'\t' -f "$here/median.awk" -f <(cat <<'AWK'
  {
    if (!($1 in seen)) { seen[$1] = 1; order[++rows] = $1 }
    if (NF < 3) { why[$1] = $2; next }
    cpu[$1] = cpu[$1] " " $2; wall[$1] = wall[$1] " " $3
    reps[$1] = reps[$1] (reps[$1] == "" ? "" : ", ") sprintf("%.0f", $2)
  }
  END {
    for (r = 1; r <= rows; r++) if (order[r] ~ /^tokio/ && cpu[order[r]] != "") tokio = median(cpu[order[r]])
    print "| runtime | CPU ns per sleeper (median) | per repetition | wall ns per sleeper (median) | CPU vs tokio |"
    print "|---|---:|---|---:|---:|"
    for (r = 1; r <= rows; r++) {
      k = order[r]
      if (cpu[k] == "") { printf "| %s | %s | | | |\n", k, why[k]; continue }
      c = median(cpu[k])
      printf "| %s | %.0f | %s | %.0f | %s |\n", k, c, reps[k], median(wall[k]), (tokio > 0 ? sprintf("%.3fx", c / tokio) : "n/a")
    }
  }
AWK
) "$work/runs.tsv"
