#!/usr/bin/env python3
"""Draws the timer lateness histograms of the wheel and the heap side by side.

Input: the CSV idle_demo writes with --lateness-csv (bucket bounds in ns, one count column per
timer kind: the server core's cogwheel::histogram). Output: docs/timer_lateness.png.

Usage: build/rel/examples/idle_demo --lateness-csv=/tmp/lateness.csv
       /usr/bin/python3 bench/plot_lateness.py /tmp/lateness.csv [--out docs] [--title-note "..."]
Needs Debian's python3-matplotlib.
"""
import argparse
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--out", default="docs")
    ap.add_argument("--title-note", default="")
    args = ap.parse_args()
    with open(args.csv) as f:
        rows = list(csv.DictReader(f))
    kinds = [k for k in rows[0].keys() if k not in ("lower_ns", "upper_ns")]
    fig, axes = plt.subplots(1, len(kinds), figsize=(6 * len(kinds), 4), sharey=True, squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        lows = [int(r["lower_ns"]) / 1e3 for r in rows]
        widths = [(int(r["upper_ns"]) + 1 - int(r["lower_ns"])) / 1e3 for r in rows]
        counts = [int(r[kind]) for r in rows]
        total = sum(counts) or 1
        share = [100.0 * c / total for c in counts]
        ax.bar(lows, share, width=widths, align="edge", color="#3b6ea8" if kind == "wheel" else "#c0504d")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("lateness: fire time - deadline tick (us, log)")
        ax.set_title(f"{kind}: {sum(counts)} timers")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("share of timers (%)")
    title = "timer lateness on idle_demo's server core"
    if args.title_note:
        title += f" ({args.title_note})"
    fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "timer_lateness.png")
    fig.savefig(path, dpi=110)
    print(path)


if __name__ == "__main__":
    main()
