#!/usr/bin/env python3
"""The table of bench/peers/timer_targets.sh: issue 27's timer rows beside their peers.

Reads DIR/timer<r>.json, DIR/peers<r>.json and DIR/idle<r>.json (Google Benchmark JSON of one
repetition each) and prints, per row, the median over repetitions (min-max), the peer's, the
ratio of the medians, the range of the per-repetition ratios (each from one alternation), the
target and whether the median ratio meets it.

    python3 bench/peers/timer_targets.py DIR
"""
import glob
import json
import os
import re
import statistics
import sys


def load(pattern):
    """{(file index, name): {metric: value}} for every benchmark of the files matching pattern."""
    runs = {}
    for path in sorted(glob.glob(pattern)):
        rep = int(re.search(r"(\d+)\.json$", path).group(1))
        try:
            data = json.load(open(path))
        except (json.JSONDecodeError, OSError):
            continue
        for b in data.get("benchmarks", []):
            name = re.sub(r"/(iterations|manual_time|real_time).*$", "", b["name"])
            values = {k: v for k, v in b.items() if isinstance(v, (int, float))}
            runs.setdefault(name, {})[rep] = values
    return runs


def series(runs, name, metric):
    """{rep: value} of one metric of one benchmark."""
    return {rep: v[metric] for rep, v in runs.get(name, {}).items() if metric in v}


def fmt(values):
    if not values:
        return "-"
    v = list(values.values())
    return f"{statistics.median(v):,.2f} ({min(v):,.2f}-{max(v):,.2f})"


def row(item, what, ours, peer_name, peer, target, limit):
    """One table line: ours/peer are {rep: value}; limit is the largest ratio that meets it."""
    if not ours or not peer:
        print(f"| {item} | {what} | {fmt(ours)} | {peer_name} | {fmt(peer)} | - | - | {target} | - |")
        return
    ratio = statistics.median(ours.values()) / statistics.median(peer.values())
    paired = [ours[r] / peer[r] for r in ours if r in peer and peer[r] != 0]
    spread = f"{min(paired):.2f}-{max(paired):.2f}" if paired else "-"
    verdict = "" if limit == float("inf") else "met" if ratio <= limit else "not met"
    print(f"| {item} | {what} | {fmt(ours)} | {peer_name} | {fmt(peer)} | {ratio:.2f}x | {spread} | {target} | {verdict} |")


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    timer = load(os.path.join(d, "timer*.json"))
    peers = load(os.path.join(d, "peers*.json"))
    idle = load(os.path.join(d, "idle*.json"))
    print("| item | row | cogwheel | peer | peer's | ratio of medians | per-repetition ratios | target | |")
    print("|---|---|---:|---|---:|---:|---:|---|---|")
    row("1", "idle pattern, longest advance (us, thread CPU, median of 5 runs' maxima)",
        series(timer, "idle_max/wheel/1000000", "max_us"), "heap twin",
        series(timer, "idle_max/heap/1000000", "max_us"), "<= heap", 1.0)
    row("1", "idle pattern, mean advance (ns)", series(timer, "idle_max/wheel/1000000", "mean_advance_ns"),
        "heap twin", series(timer, "idle_max/heap/1000000", "mean_advance_ns"), "(reported)", float("inf"))
    for n in ("1000", "100000", "1000000", "10000000"):
        ours = series(timer, f"churn/wheel/{n}", "cpu_time")
        row("2", f"churn, ns per op, N={int(n):,}", ours, "ratas", series(peers, f"churn/ratas/{n}", "cpu_time"),
            "<= ratas", 1.0)
        row("2", f"churn, ns per op, N={int(n):,}", ours, "linked wheel",
            series(timer, f"churn/linked/{n}", "cpu_time"), "<= 1.2x linked", 1.2)
    for n in ("1000", "1000000"):
        row("3", f"expire, ns per timer, N={int(n):,}", series(timer, f"expire/wheel/{n}", "ns_per_timer"), "ratas",
            series(peers, f"expire/ratas/{n}", "ns_per_timer"), "<= ratas" if n == "1000" else "<= 0.33x ratas",
            1.0 if n == "1000" else 0.33)
    row("3", "reschedule_later, ns per op, N=10,000,000", series(timer, "reschedule_later/wheel/10000000", "cpu_time"),
        "ratas", series(peers, "reschedule_later/ratas/10000000", "cpu_time"), "<= ratas", 1.0)
    bytes_1e6 = series(timer, "churn/wheel/1000000", "bytes_per_timer")
    row("3", "bytes per pending timer, N=1,000,000", bytes_1e6, "32 B", {r: 32.0 for r in bytes_1e6},
        "<= 32 B", 1.0)
    row("8", "timer work per heartbeat, 1M idle connections (ns)",
        series(idle, "idle/wheel/1000000", "timer_ns_per_heartbeat"), "miss floor (one random node of 1M)",
        series(idle, "miss_floor/1000000", "cpu_time"), "<= 1.3x floor", 1.3)
    row("8", "timer work per heartbeat, 1M idle connections (ns)",
        series(idle, "idle/wheel/1000000", "timer_ns_per_heartbeat"), "heap twin",
        series(idle, "idle/heap/1000000", "timer_ns_per_heartbeat"), "(reported)", float("inf"))


if __name__ == "__main__":
    main()
