#!/usr/bin/env python3
"""Draws docs/http.png from bench/http/run.py's JSON: requests/s and server CPU per request for
cogwheel, nginx and the bare io_uring floor when measured (medians, min..max as error bars), and RSS per idle keep-alive connection.

Usage: python3 bench/http/plot.py docs/results/http.json docs/http.png   (python3-matplotlib)
"""
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"cogwheel": "#1f77b4", "nginx": "#2ca02c", "floor": "#7f7f7f"}


def bars(ax, rows, key, ylabel, title):
    labels = [f"{r['body']} B\n-c{r['conns']}" for r in rows]
    names = [n for n in ("cogwheel", "nginx", "floor") if f"{n}_{key}" in rows[0]]
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [r[f"{name}_{key}"] for r in rows]
        mid = [statistics.median(v) for v in values]
        err = [[m - min(v) for m, v in zip(mid, values)], [max(v) - m for m, v in zip(mid, values)]]
        xs = [x + (i - (len(names) - 1) / 2) * width for x in range(len(rows))]
        ax.bar(xs, mid, width, yerr=err, capsize=3, label=name, color=COLORS[name])
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()


def main():
    data = json.load(open(sys.argv[1]))
    out = sys.argv[2]
    panels = 2 + ("idle" in data)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4.2))
    rows = data["throughput"]["rows"]
    bars(axes[0], rows, "rps", "requests/s", "wrk -t1 keep-alive (higher is better)")
    bars(axes[1], rows, "cpu_us", "server CPU us per request", "CPU per request (lower is better)")
    if "idle" in data:
        ax = axes[2]
        idle = data["idle"]["rows"]
        ax.bar([r["server"] for r in idle], [r["bytes_per_connection"] for r in idle],
               color=[COLORS[r["server"]] for r in idle])
        held = max(r["held"] for r in idle)
        ax.set_ylabel("RSS bytes per connection")
        ax.set_title(f"idle keep-alive, {held:,} connections")
    fig.suptitle(f"HTTP: cogwheel examples/http vs nginx 1.22, one server core ({data['date']})")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
