#!/usr/bin/env python3
"""cogwheel's examples/http against nginx, side by side, with wrk and slowhttptest.

Servers on CPU 0 (taskset), clients on CPU 1. Runs are interleaved (the order of the two servers
alternates from one repetition to the next); the tables give medians with min..max.

  throughput: wrk -t1 -c{50,500} keep-alive, 13 B and 4 KiB bodies: requests/s and the server's
              CPU time per request (utime+stime of its processes over the run, /proc/<pid>/stat);
              with --bare-binary also the floor (bench/http/bare_uring_responder: the same bytes
              from plain liburing, no parser), measured the same way in the same run.
  slowloris / slowbody / slowread: slowhttptest -H / -B / -X against a 5 s timeout while wrk
              runs at -c50: wrk's drop, kicks and their lateness, descriptors and RSS before,
              at the peak and after.
  idle:       RSS per idle keep-alive connection at ~19,000 connections (idle_clients.py).

Usage: python3 bench/http/run.py --binary=build/bench-http/examples/http/http_server
           [--bare-binary=build/bench-http/bench/http/bare_uring_responder]
           [--duration=10] [--reps=3] [--only=throughput,slowloris,slowbody,slowread,idle]
           [--out=docs/results/http.json]
bench/http/run.sh builds the server and calls this.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

TIMEOUTS_DEFAULT = (60000, 60000, 75000, 60000)  # nginx's defaults: header, body, keepalive, send
TIMEOUTS_ATTACK = (5000, 5000, 75000, 5000)


def client(cmd):
    return ["taskset", "-c", "1"] + cmd


def wrk(url, conns, seconds):
    out = subprocess.run(client(["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", url]), capture_output=True, text=True,
                         timeout=seconds + 60).stdout
    m = re.search(r"(\d+) requests in", out)
    r = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m or not r:
        raise RuntimeError("wrk printed no result:\n" + out)
    errors = re.search(r"Socket errors: (.*)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"requests": int(m.group(1)), "rps": float(r.group(1)),
            "socket_errors": errors.group(1) if errors else "", "non2xx": int(non2xx.group(1)) if non2xx else 0}


def measured_wrk(srv, conns, seconds):
    """wrk against srv, with the server's CPU time over the run."""
    cpu0 = servers.cpu_seconds(srv.pids())
    w = wrk(srv.url(), conns, seconds)
    cpu = servers.cpu_seconds(srv.pids()) - cpu0
    w["cpu_us_per_request"] = cpu * 1e6 / max(w["requests"], 1)
    return w


def med(values):
    if not values:
        return "n/a"
    return statistics.median(values), min(values), max(values)


def fmt(values, digits=0):
    if not values:
        return "n/a"
    m, lo, hi = med(values)
    f = f"{{:,.{digits}f}}"
    if len(values) == 1:
        return f.format(m)
    return f"{f.format(m)} ({f.format(lo)}..{f.format(hi)})"


def throughput(args, results):
    kinds = [servers.cogwheel_server, servers.nginx_server]
    if servers.bare_server.binary:
        kinds.append(servers.bare_server)
    floor = servers.bare_server.binary is not None
    rows = {}
    for rep in range(args.reps):
        for body in (13, 4096):
            order = kinds if rep % 2 == 0 else kinds[::-1]
            for kind in order:
                with tempfile.TemporaryDirectory() as tmp, kind(tmp, body, TIMEOUTS_DEFAULT) as srv:
                    wrk(srv.url(), 50, 1)  # warm-up
                    for conns in (50, 500):
                        w = measured_wrk(srv, conns, args.duration)
                        rows.setdefault((kind.name, body, conns), []).append(w)
                        print(f"  rep {rep} {kind.name:8} body {body:5} -c{conns:<4} {w['rps']:>10,.0f} req/s "
                              f"{w['cpu_us_per_request']:.2f} us/req {w['socket_errors']}", flush=True)
    table = []
    for body in (13, 4096):
        for conns in (50, 500):
            c = rows[("cogwheel", body, conns)]
            n = rows[("nginx", body, conns)]
            crps, ncpu = [x["rps"] for x in c], [x["cpu_us_per_request"] for x in n]
            ccpu, nrps = [x["cpu_us_per_request"] for x in c], [x["rps"] for x in n]
            row = {"body": body, "conns": conns, "cogwheel_rps": crps, "nginx_rps": nrps,
                   "cogwheel_cpu_us": ccpu, "nginx_cpu_us": ncpu,
                   "rps_ratio": statistics.median(crps) / statistics.median(nrps),
                   "cpu_ratio": statistics.median(ccpu) / statistics.median(ncpu)}
            if floor:
                f = rows[("floor", body, conns)]
                row["floor_rps"] = [x["rps"] for x in f]
                row["floor_cpu_us"] = [x["cpu_us_per_request"] for x in f]
                row["floor_cpu_ratio"] = statistics.median(ccpu) / statistics.median(row["floor_cpu_us"])
            table.append(row)
    results["throughput"] = {"duration_s": args.duration, "reps": args.reps, "rows": table,
                             "raw": {f"{k[0]}/{k[1]}/{k[2]}": v for k, v in rows.items()}}
    head = "| body | wrk -c | cogwheel req/s | nginx req/s |"
    rule = "|---:|---:|---:|---:|"
    if floor:
        head += " floor req/s |"
        rule += "---:|"
    head += " cogwheel us CPU/req | nginx us CPU/req |"
    rule += "---:|---:|"
    if floor:
        head += " floor us CPU/req | CPU cogwheel/floor |"
        rule += "---:|---:|"
    print("\n" + head + " CPU cogwheel/nginx |")
    print(rule + "---:|")
    for r in table:
        line = f"| {r['body']} B | {r['conns']} | {fmt(r['cogwheel_rps'])} | {fmt(r['nginx_rps'])} |"
        if floor:
            line += f" {fmt(r['floor_rps'])} |"
        line += f" {fmt(r['cogwheel_cpu_us'], 2)} | {fmt(r['nginx_cpu_us'], 2)} |"
        if floor:
            line += f" {fmt(r['floor_cpu_us'], 2)} | {r['floor_cpu_ratio']:.2f}x |"
        print(line + f" {r['cpu_ratio']:.2f}x |")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--bare-binary", default="", help="bench/http/bare_uring_responder: the floor in the throughput part")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="throughput,slowloris,slowbody,slowread,idle")
    ap.add_argument("--out", default="")
    ap.add_argument("--merge", action="store_true", help="keep the other parts already in --out")
    ap.add_argument("--slow-connections", type=int, default=18000)
    ap.add_argument("--slow-rate", type=int, default=3600)
    ap.add_argument("--slow-length", type=int, default=20)
    ap.add_argument("--attack-wrk", type=int, default=8, help="seconds of each wrk run in the attack parts")
    ap.add_argument("--idle-connections", type=int, default=19000)
    args = ap.parse_args()
    servers.cogwheel_server.binary = os.path.abspath(args.binary)
    if args.bare_binary:
        servers.bare_server.binary = os.path.abspath(args.bare_binary)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    results = {}
    if args.merge and args.out and os.path.exists(args.out):
        with open(args.out) as f:
            results = json.load(f)  # the parts not run now are kept
    results.setdefault("date", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    results.setdefault("load_at_start", load)
    print(f"load average at start: {' '.join(load)}")
    parts = args.only.split(",")
    def stamp(part):
        results[part]["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        results[part]["load_at_start"] = load

    if "throughput" in parts:
        throughput(args, results)
        stamp("throughput")
    import attacks  # noqa: E402  (the slowhttptest and idle-connection parts)
    for part in ("slowloris", "slowbody", "slowread"):
        if part in parts:
            attacks.attack(part, args, results)
            stamp(part)
    if "idle" in parts:
        attacks.idle(args, results)
        stamp("idle")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
