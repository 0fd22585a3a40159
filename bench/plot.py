#!/usr/bin/env python3
"""Turns Google Benchmark JSON from this repo's benchmarks into PNG plots under docs/.

  timer_ns_per_op.png  ns/op against pending timers, log-log, one panel per operation: the
                       wheel, the heap and every peer found (rows named <operation>/<queue>/<N>)
  timer_idle.png       the idle-connection pattern (timer_bench's idle_max rows): longest and
                       mean advance() per queue
  echo.png             echo round trips/s and server CPU per round trip per mode and size
                       (rows named echo/<mode>/<size>/<connections>)

Usage: /usr/bin/python3 bench/plot.py [--timer timer.json ...] [--echo echo.json] [--out docs]
                                      [--title-note "2026-11-22, AMD EPYC 2 vCPU"]
Several --timer files are merged (timer_bench and bench/peers' timer_peers_bench). Uses
medians when the JSON holds repetitions; CPU time by default. Needs Debian's python3-matplotlib.
"""
import argparse
import json
import os
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = re.compile(r"^(?P<op>[a-z_]+)/(?P<queue>[a-z_0-9]+)/(?P<n>\d+)(?:/.*)?$")


def rows(paths):
    """(name, benchmark dict) of medians if there are aggregates, else of plain runs."""
    out = {}
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        bms = data.get("benchmarks", [])
        has_median = any(b.get("aggregate_name") == "median" for b in bms)
        for b in bms:
            if has_median and b.get("aggregate_name") != "median":
                continue
            if not has_median and b.get("run_type") == "aggregate":
                continue
            out[b.get("run_name", b["name"])] = b
    return out


def ns(b, metric):
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
    if "ns_per_timer" in b:  # expire: per timer fired
        return b["ns_per_timer"]
    return b[metric] * scale


def plot_timers(paths, out, metric, note):
    series = defaultdict(lambda: defaultdict(dict))  # op -> queue -> n -> ns
    for name, b in rows(paths).items():
        m = NAME.match(name)
        if not m or m["op"] in ("node_touch",):
            continue
        series[m["op"]][m["queue"]][int(m["n"])] = ns(b, metric)
    ops = [op for op in ("churn", "schedule_cancel", "reschedule_later", "expire", "next_deadline") if op in series]
    if not ops:
        return None
    cols = min(3, len(ops))
    rows_n = (len(ops) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(5 * cols, 4 * rows_n), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(ops):]:
        ax.axis("off")
    for ax, op in zip(flat, ops):
        for queue, points in sorted(series[op].items()):
            xs = sorted(points)
            style = "-o" if queue in ("wheel", "heap") else "--."
            ax.plot(xs, [points[x] for x in xs], style, label=queue, linewidth=2 if queue == "wheel" else 1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(op + (" (per timer fired)" if op == "expire" else ""))
        ax.set_xlabel("pending timers")
        ax.set_ylabel("ns/op (%s)" % metric.replace("_time", ""))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("cogwheel timer queues" + (" - " + note if note else ""))
    fig.tight_layout()
    path = os.path.join(out, "timer_ns_per_op.png")
    fig.savefig(path, dpi=110)
    return path


def plot_idle(paths, out, note):
    """idle_max/<queue>/<N>: the longest advance() (each step's least CPU time over the runs)
    and the mean advance(), one bar per queue, log scale."""
    found = {}
    for name, b in rows(paths).items():
        m = NAME.match(name)
        if m and m["op"] == "idle_max" and "max_filtered_us" in b:
            found[m["queue"]] = (b["max_filtered_us"], b["mean_advance_ns"] * 1e-3, int(m["n"]))
    if not found:
        return None
    queues = sorted(found)
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = range(len(queues))
    ax.bar([x - 0.2 for x in xs], [found[q][0] for q in queues], 0.4, label="longest advance()")
    ax.bar([x + 0.2 for x in xs], [found[q][1] for q in queues], 0.4, label="mean advance()")
    ax.set_xticks(list(xs), queues)
    ax.set_yscale("log")
    ax.set_ylabel("us (CPU, longest; wall, mean)")
    n = found[queues[0]][2]
    ax.set_title("idle pattern, %d connections, 60 s" % n + (" - " + note if note else ""))
    ax.grid(True, which="both", axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "timer_idle.png")
    fig.savefig(path, dpi=110)
    return path


def plot_echo(path_in, out, note):
    data = defaultdict(dict)  # (mode) -> size -> bench
    for name, b in rows([path_in]).items():
        m = re.match(r"^echo/(?P<mode>\w+)/(?P<size>\d+)/(?P<conns>\d+)", name)
        if m:
            data[m["mode"]][int(m["size"])] = b
    if not data:
        return None
    modes = sorted(data)
    sizes = sorted({s for d in data.values() for s in d})
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        xs = [j + i * width for j in range(len(sizes))]
        a1.bar(xs, [data[mode].get(s, {}).get("rt_per_s", 0) / 1e3 for s in sizes], width, label=mode)
        a2.bar(xs, [data[mode].get(s, {}).get("server_cpu_us_per_rt", 0) for s in sizes], width, label=mode)
    for ax, label in ((a1, "round trips/s (thousands)"), (a2, "server CPU us per round trip")):
        ax.set_xticks([j + width * (len(modes) - 1) / 2 for j in range(len(sizes))])
        ax.set_xticklabels(["%d B" % s for s in sizes])
        ax.set_ylabel(label)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("echo, 1 server core + 1 client core, 1000 connections" + (" - " + note if note else ""))
    fig.tight_layout()
    path = os.path.join(out, "echo.png")
    fig.savefig(path, dpi=110)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timer", action="append", default=[])
    p.add_argument("--echo")
    p.add_argument("--out", default="docs")
    p.add_argument("--metric", default="cpu_time", choices=["cpu_time", "real_time"])
    p.add_argument("--title-note", default="")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    made = []
    if a.timer:
        made.append(plot_timers(a.timer, a.out, a.metric, a.title_note))
        made.append(plot_idle(a.timer, a.out, a.title_note))
    if a.echo:
        made.append(plot_echo(a.echo, a.out, a.title_note))
    made = [m for m in made if m]
    if not made:
        sys.exit("nothing to plot: give --timer and/or --echo JSON")
    print("\n".join(made))


if __name__ == "__main__":
    main()
