#!/usr/bin/env python3
"""Two builds of examples/http and the floor, interleaved in one run: CPU per request under wrk.

Each repetition runs every (body, -c) cell against old, new and the floor (bare_uring_responder),
rotating the order; prints the medians and new/old, old/floor and new/floor. Same set-up as
run.py's throughput part (server on CPU 0, wrk -t1 on CPU 1, nginx's default timeouts).

Usage: python3 bench/http/old_new.py OLD_http_server NEW_http_server bare_uring_responder
           [--duration=5] [--reps=3]
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402
import servers  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("floor")
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    a.old, a.new, a.floor = (os.path.abspath(p) for p in (a.old, a.new, a.floor))  # servers run in a temp dir
    print("load average at start:", open("/proc/loadavg").read().split()[:3])
    kinds = [("old", servers.cogwheel_server, a.old), ("new", servers.cogwheel_server, a.new),
             ("floor", servers.bare_server, a.floor)]
    cells = [(b, c) for b in (13, 4096) for c in (50, 500)]
    got = {}
    for rep in range(a.reps):
        order = kinds[rep % 3:] + kinds[:rep % 3]
        for body, conns in cells:
            for name, kind, binary in order:
                kind.binary = binary
                with tempfile.TemporaryDirectory() as tmp, kind(tmp, body, run.TIMEOUTS_DEFAULT) as srv:
                    run.wrk(srv.url(), conns, 1)  # warm-up
                    m = run.measured_wrk(srv, conns, a.duration)
                got.setdefault((name, body, conns), []).append(m)
                print(f"  rep {rep} {name:5} body {body:5} -c{conns:<4} {m['rps']:>9,.0f} req/s "
                      f"{m['cpu_us_per_request']:.2f} us/req", flush=True)
    print("\n| body | -c | old us/req | new us/req | floor us/req | new/old | old/floor | new/floor "
          "| old req/s | new req/s | floor req/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for body, conns in cells:
        us = {n: statistics.median(m["cpu_us_per_request"] for m in got[(n, body, conns)]) for n, _, _ in kinds}
        rps = {n: statistics.median(m["rps"] for m in got[(n, body, conns)]) for n, _, _ in kinds}
        print(f"| {body} | {conns} | {us['old']:.2f} | {us['new']:.2f} | {us['floor']:.2f} | "
              f"{us['new'] / us['old']:.2f}x | {us['old'] / us['floor']:.2f}x | {us['new'] / us['floor']:.2f}x | "
              f"{rps['old']:,.0f} | {rps['new']:,.0f} | {rps['floor']:,.0f} |")
    print("load average at end:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
