#!/usr/bin/env python3
"""Lines up timer_bench and timer_peers_bench results in one Markdown table: a row per operation
and N, a column per queue (wheel, heap, asio, libuv, libevent, pq_lazy), nanoseconds per
operation; for expire, nanoseconds per timer fired.

Reads Google Benchmark JSON files (--benchmark_out=FILE --benchmark_out_format=json). Names are
<operation>/<queue>/<N>[/suffix] (the real-clock peers' expire rows carry /iterations:K). With
--benchmark_repetitions the "median" aggregate is used, else the median of the runs. The metric is
CPU time per iteration (the benchmark thread's own time); for rows with an ns_per_timer counter
(expire) it is that counter. A cell is empty where a queue did not run at that N.

Usage: peer_table.py timer.json peers.json [more.json ...]     (python3, standard library)
"""
import argparse
import json
import statistics

UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
COLUMNS = ("wheel", "heap", "asio", "libuv", "libevent", "pq_lazy")


def parse_name(name):
    """(operation, queue, N) from 'op/queue/N[/suffix...]', or None."""
    parts = name.split("/")
    if len(parts) < 3 or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


def ns_per_op(entry):
    if "ns_per_timer" in entry:
        return float(entry["ns_per_timer"])
    return float(entry["cpu_time"]) * UNIT_NS[entry.get("time_unit", "ns")]


def collect(paths):
    """{(op, queue, n): ns}, the operations in first-seen order, and the keys that failed."""
    medians, runs, errors, ops = {}, {}, set(), []
    for path in paths:
        with open(path) as f:
            benchmarks = json.load(f)["benchmarks"]
        for b in benchmarks:
            key = parse_name(b.get("run_name", b["name"]))
            if key is None:
                continue
            if key[0] not in ops:
                ops.append(key[0])
            if b.get("error_occurred"):
                errors.add(key)
            elif b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == "median":
                    medians[key] = ns_per_op(b)
            else:
                runs.setdefault(key, []).append(ns_per_op(b))
    for key, values in runs.items():
        medians.setdefault(key, statistics.median(values))
    return medians, ops, errors


def fmt(ns):
    if ns is None:
        return ""
    if ns < 10:
        return f"{ns:.2f}"
    if ns < 100:
        return f"{ns:.1f}"
    return f"{ns:,.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="Google Benchmark JSON files")
    args = ap.parse_args()
    medians, ops, errors = collect(args.results)
    queues = [q for q in COLUMNS if any(k[1] == q for k in medians)]
    queues += sorted({k[1] for k in medians} - set(queues))
    print("| operation | N | " + " | ".join(queues) + " |")
    print("|---|---:|" + "---:|" * len(queues))
    for op in ops:
        for n in sorted({k[2] for k in medians if k[0] == op}):
            cells = []
            for q in queues:
                key = (op, q, n)
                cells.append("error" if key in errors else fmt(medians.get(key)))
            print(f"| {op} | {n:,} | " + " | ".join(cells) + " |")
    print()
    print("ns per operation (CPU time); expire: ns per timer fired. Lower is better.")


if __name__ == "__main__":
    main()
