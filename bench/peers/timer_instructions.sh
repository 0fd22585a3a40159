#!/usr/bin/env bash
# Instructions per operation of cogwheel's wheel and ratas (when built) on timer_bench's churn,
# schedule_cancel and expire workloads, counted by callgrind around the measured loop only
# (timer_instructions.cpp). Deterministic: the one comparison that a shared, noisy machine
# without hardware counters cannot blur.
#   bash bench/peers/timer_instructions.sh BUILD_DIR [N...]     (default N: 1000 100000 1000000)
#   QUEUES="wheel striped8 linked ratas" bash bench/peers/timer_instructions.sh ...
#     (columns; default "wheel ratas"; the last column is the first queue over ratas)
set -euo pipefail
build=${1:?usage: timer_instructions.sh BUILD_DIR [N...]}
shift
sizes=("${@:-1000}")
[ $# -eq 0 ] && sizes=(1000 100000 1000000)
bin=$build/bench/peers/timer_instructions
[ -x "$bin" ] || { echo "no $bin (build target timer_instructions)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "skipped: valgrind not installed (Debian: valgrind)"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

count() {  # queue workload n ops -> instructions inside measured_<workload>, or "-"
  local out=$tmp/cg.out
  if ! valgrind --tool=callgrind --collect-atstart=no --toggle-collect="*measured_$2*" \
      --callgrind-out-file="$out" "$bin" "$1" "$2" "$3" "$4" >/dev/null 2>"$tmp/err"; then
    echo "-"
    return
  fi
  callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

queues=(${QUEUES:-wheel ratas})
head='| workload | N | per |'
rule='|---|---:|---|'
for q in "${queues[@]}"; do head+=" $q |"; rule+='---:|'; done
printf '%s %s / ratas |\n%s---:|\n' "$head" "${queues[0]}" "$rule"
for n in "${sizes[@]}"; do
  for w in churn schedule_cancel expire; do
    if [ "$w" = expire ]; then ops=2; per=timer; else ops=200000; per=op; fi
    row=()
    ratas=-
    for q in "${queues[@]}"; do
      c=$(count "$q" "$w" "$n" "$ops")
      if [ "$c" = "-" ]; then row+=("-"); continue; fi
      if [ "$w" = expire ]; then v=$(awk -v c="$c" -v o="$ops" -v n="$n" 'BEGIN {printf "%.1f", c / o / n}')
      else v=$(awk -v c="$c" -v o="$ops" 'BEGIN {printf "%.1f", c / o}'); fi
      row+=("$v")
      [ "$q" = ratas ] && ratas=$v
    done
    ratio=$(awk -v a="${row[0]}" -v b="$ratas" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2fx", a / b}')
    line="| $w | $n | $per |"
    for v in "${row[@]}"; do line+=" $v |"; done
    printf '%s %s |\n' "$line" "$ratio"
  done
done
