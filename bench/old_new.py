#!/usr/bin/env python3
"""Old against new: runs one Google Benchmark program from two builds, interleaved, and prints a
Markdown table of medians with each side's spread.

The rule it checks (issues 21 and 27): a row is *worse* when the new median is more than 3% above
the old one AND the new runs' best is above the old runs' worst (outside the spread). Only rows
both binaries have are compared.

Each repetition runs both binaries once, alternating which goes first, so a slow minute of a
shared machine lands on both. The metric of a row is, in order: the counter
`server_cpu_us_per_rt` (echo: server CPU per round trip), `cpu_ns_per_sleeper` (runtime
sleepers), `ns_per_timer` (timer expire: CPU time per timer fired), `p50_us` (lateness rows),
else CPU time per iteration.

--new-rename A=B compares a new row whose name has A with the old row named with B instead
(e.g. `--new-rename _metrics_off=`: the new build's rows without metrics against the old rows).

Usage (python3, standard library):
  old_new.py OLD_BUILD NEW_BUILD BENCH [--reps 5] [--filter REGEX] [--env K=V ...]
             [--new-rename A=B] [-- ARGS...]
  e.g. old_new.py /tmp/old/build/rel build/rel timer_bench --filter '^churn/' -- --benchmark_min_time=0.1
BENCH is the program's path under each build's bench/ directory.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
COUNTERS = ("server_cpu_us_per_rt", "cpu_ns_per_sleeper", "ns_per_timer", "p50_us")


def metric(b):
    for c in COUNTERS:
        if c in b:
            if c == "ns_per_timer":  # the counter is wall time; CPU time per timer instead
                n = int(b["name"].split("/")[2])
                return b["cpu_time"] * UNIT_NS[b["time_unit"]] / n, "cpu ns/timer"
            return float(b[c]), c
    return b["cpu_time"] * UNIT_NS[b["time_unit"]], "cpu ns"


def run(binary, flt, env, extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [binary, "--benchmark_out=" + out.name, "--benchmark_out_format=json"]
        if flt:
            cmd.append("--benchmark_filter=" + flt)
        subprocess.run(cmd + extra, check=True, env=env, stdout=subprocess.DEVNULL)
        data = json.load(open(out.name))
    rows = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" or "error_occurred" in b and b["error_occurred"]:
            continue
        rows[b["name"]] = metric(b)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("bench")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--filter", default="")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--new-rename", default="")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.extra = extra
    env = dict(os.environ)
    for kv in a.env:
        k, v = kv.split("=", 1)
        env[k] = v
    sides = {"old": os.path.join(a.old, "bench", a.bench), "new": os.path.join(a.new, "bench", a.bench)}
    results = {"old": {}, "new": {}}
    units = {}
    for rep in range(a.reps):
        order = ("old", "new") if rep % 2 == 0 else ("new", "old")
        for side in order:
            rows = run(sides[side], a.filter, env, a.extra)
            if side == "new" and a.new_rename:
                frm, to = a.new_rename.split("=", 1)
                rows.update({k.replace(frm, to): v for k, v in rows.items() if frm in k})
            for name, (value, unit) in rows.items():
                results[side].setdefault(name, []).append(value)
                units[name] = unit
        print(f"repetition {rep + 1} of {a.reps} done", file=sys.stderr)
    print(f"| row ({a.bench}) | metric | old median (min-max) | new median (min-max) | new / old | worse |")
    print("|---|---|---:|---:|---:|---|")
    worse_rows = 0
    for name in results["old"]:
        if name not in results["new"]:
            continue
        o, n = results["old"][name], results["new"][name]
        mo, mn = statistics.median(o), statistics.median(n)
        ratio = mn / mo if mo else float("nan")
        worse = ratio > 1.03 and min(n) > max(o)
        worse_rows += worse
        print(f"| {name} | {units[name]} | {mo:.4g} ({min(o):.4g}-{max(o):.4g}) | "
              f"{mn:.4g} ({min(n):.4g}-{max(n):.4g}) | {ratio:.3f} | {'**yes**' if worse else 'no'} |")
    print(f"\n{worse_rows} row(s) worse (> 3% and outside the spread), {a.reps} repetitions.")


if __name__ == "__main__":
    main()
