#!/usr/bin/env python3
"""Prints timer_bench results as a Markdown table: one row per operation and N, with the wheel's
and the heap's nanoseconds per operation and the heap/wheel ratio (above 1: the wheel is faster).

Reads Google Benchmark JSON (--benchmark_format=json or --benchmark_out=FILE). Benchmark names are
<operation>/<queue>/<N>[/...]. With --benchmark_repetitions the "median" aggregate is used; without
aggregates, the median of the individual runs. ns/op is CPU time per iteration by default (the
benchmark thread's own time: on a shared machine, time spent descheduled does not count), real
time with --metric real_time; for benchmarks that report an "ns_per_timer" counter (expire: one
iteration fires N timers) it is time per iteration / N. Benchmarks on queues other than wheel and
heap (the node_touch floor) go in a second table.

Usage: pair_table.py RESULTS.json [--metric cpu_time|real_time]     (python3, standard library)
"""
import argparse
import json
import statistics
import sys

UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
PAIR = ("wheel", "heap")


def parse_name(name):
    """(operation, queue, N) from 'op/queue/N[/suffix...]', or None."""
    parts = name.split("/")
    if len(parts) < 3 or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


def ns_per_op(entry, metric, n):
    """Per iteration, or per timer where an iteration fires n timers (it reports ns_per_timer)."""
    ns = float(entry[metric]) * UNIT_NS[entry.get("time_unit", "ns")]
    return ns / n if "ns_per_timer" in entry else ns


def collect(benchmarks, metric):
    """{(op, queue, n): ns} plus the repetition count seen and the keys that reported errors."""
    medians, runs, errors, reps = {}, {}, set(), 1
    for b in benchmarks:
        key = parse_name(b.get("run_name", b["name"]))
        if key is None:
            continue
        if b.get("error_occurred"):
            errors.add(key)
            continue
        reps = max(reps, int(b.get("repetitions", 1)))
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[key] = ns_per_op(b, metric, key[2])
        else:
            runs.setdefault(key, []).append(ns_per_op(b, metric, key[2]))
    for key, values in runs.items():
        medians.setdefault(key, statistics.median(values))
    return medians, errors, reps


def fmt(ns):
    if ns is None:
        return "—"
    if ns < 10:
        return f"{ns:.2f}"
    if ns < 100:
        return f"{ns:.1f}"
    return f"{ns:,.0f}"


def ordered(keys, pick):
    """Operations in first-seen order, N ascending within each."""
    ops = []
    for op, _, _ in keys:
        if op not in ops:
            ops.append(op)
    return [(op, n) for op in ops for n in sorted({k[2] for k in keys if k[0] == op and pick(k)})]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="Google Benchmark JSON file, or - for stdin")
    ap.add_argument("--metric", choices=("cpu_time", "real_time"), default="cpu_time")
    args = ap.parse_args()
    data = json.load(sys.stdin if args.results == "-" else open(args.results, encoding="utf-8"))
    medians, errors, reps = collect(data.get("benchmarks", []), args.metric)
    keys = list(medians) + list(errors)
    what = f"median of {reps} repetitions" if reps > 1 else "single run"
    print(f"ns per operation ({args.metric}, {what}; expire: per timer fired)\n")
    print("| operation | N | wheel ns/op | heap ns/op | heap/wheel |")
    print("|---|---:|---:|---:|---:|")
    for op, n in ordered(keys, lambda k: k[1] in PAIR):
        wheel, heap = medians.get((op, "wheel", n)), medians.get((op, "heap", n))
        ratio = f"{heap / wheel:.2f}x" if wheel and heap else "—"
        print(f"| {op} | {n:,} | {fmt(wheel)} | {fmt(heap)} | {ratio} |")
    others = ordered(keys, lambda k: k[1] not in PAIR)
    if others:
        print("\n| reference | N | ns/op |")
        print("|---|---:|---:|")
        for op, n in others:
            for kind in sorted({k[1] for k in keys if k[0] == op and k[2] == n}):
                print(f"| {op}/{kind} | {n:,} | {fmt(medians.get((op, kind, n)))} |")
    if errors:
        names = ", ".join(f"{op}/{kind}/{n}" for op, kind, n in sorted(errors))
        print(f"\nbenchmarks that reported an error (not in the table): {names}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
