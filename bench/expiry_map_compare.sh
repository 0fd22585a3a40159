#!/usr/bin/env bash
# expiry_map_compare.sh: expiry_map against tokio-util's DelayQueue (with a HashMap key index, as
# its documentation shows) and against std::unordered_map + cogwheel's timer_heap, in one run:
# insert, move later, move earlier, expire all and erase of N u64 -> u64 keys, and memory per key
# beyond key and value (RSS growth over the insert). cogwheel's side is bench/expiry_map_bench
# (a paused-clock runtime on the wheel; its heap twin as a further column); tokio's is
# bench/peers/tokio_delay_queue (a paused current-thread runtime). Each program runs in a fresh
# process per repetition, alternating; the table gives medians of ns per key and the ratios.
# The machine is shared and noisy: only ratios within one run compare.
#
# Usage: bench/expiry_map_compare.sh [BUILD_DIR]     (default build/rel; builds expiry_map_bench
#          there and tokio_delay_queue with cargo into BUILD_DIR/tokio_delay_queue)
# Environment: SIZES="10000 1000000 10000000" REPS=5 (10^7 keys take a few GiB and minutes)
#
# tokio's crates come from Debian's packaged registry (apt-get install librust-tokio-util-dev
# librust-tokio-dev librust-tokio+rt-dev librust-tokio+time-dev), offline and --locked to the
# committed Cargo.lock, as the other tokio peers (peers/cargo_peer.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build/rel}
sizes=${SIZES:-10000 1000000 10000000}
reps=${REPS:-5}

cmake --build "$build" --target expiry_map_bench >/dev/null
bench=$(find "$build" -type f -name expiry_map_bench -perm -u+x | head -n 1)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=peers/cargo_peer.sh
. "$here/peers/cargo_peer.sh"
install_tokio_packages expiry_map_compare
if [ "$(id -u)" = 0 ] && ! compgen -G "/usr/share/cargo/registry/tokio-util-0.7*" >/dev/null; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq librust-tokio-util-dev; } >/dev/null 2>&1 ||
    echo "expiry_map_compare: could not install librust-tokio-util-dev" >&2
fi
cargo_peer_build expiry_map_compare tokio_delay_queue "$build" "$work"
tokio=$cargo_peer_bin
[ -n "$tokio" ] || echo "expiry_map_compare: tokio $cargo_peer_skip" >&2

# The raw rows stay in the build directory (ROWS=that file re-renders the table without running).
out=$build/expiry_map_compare.rows
if [ -n "${ROWS:-}" ]; then out=$ROWS; sizes=""; else : >"$out"; fi
for n in $sizes; do
  for ((r = 0; r < reps; r++)); do
    "$bench" "$n" 1 --only=cogwheel | sed 's/^cogwheel /wheel /' >>"$out"
    "$bench" "$n" 1 --only=cogwheel --heap | sed 's/^cogwheel /heap /' >>"$out"
    "$bench" "$n" 1 --only=umap_heap >>"$out"
    [ -z "$tokio" ] || "$tokio" "$n" 1 | sed 's/^/tokio /' >>"$out"
  done
done

echo "expiry_map vs tokio-util DelayQueue + HashMap vs unordered_map + timer_heap: ns per key (memory: bytes per key beyond key and value), medians of $reps"
cat >"$work/table.awk" <<'AWK'
  { v[$1 " " $2 " " $3] = v[$1 " " $2 " " $3] " " $4; if (!($2 " " $3 in seen)) { seen[$2 " " $3] = 1; order[++rows] = $2 " " $3 } }
  function med(who, key) { return (who " " key) in v ? median(v[who " " key]) : "" }
  function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%.3fx", a / b) }
  END {
    printf "%-14s %10s %12s %12s %12s %12s %14s %14s\n", "row", "keys", "expiry_map", "(heap twin)", "tokio-util", "umap+heap", "vs tokio-util", "vs umap+heap"
    for (i = 1; i <= rows; i++) {
      split(order[i], k, " ")
      w = med("wheel", order[i]); h = med("heap", order[i]); t = med("tokio", order[i]); u = med("umap_heap", order[i])
      printf "%-14s %10s %12s %12s %12s %12s %14s %14s\n", k[1], k[2], w, h, (t == "" ? "-" : t), u, ratio(w, t), ratio(w, u)
    }
  }
AWK
awk -f "$here/peers/median.awk" -f "$work/table.awk" "$out"
