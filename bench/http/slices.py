#!/usr/bin/env python3
"""CPU per request of HTTP servers that all stay up, driven in turn (bench/http/README.md, "Session 13").

  python3 bench/http/slices.py [--pairs=20] [--secs=2] [--conns=50] [--perf=OUT] NAME='COMMAND {port}' ...

Every server starts at once, pinned to CPU 0; wrk -t1 (CPU 1) drives each in turn for --secs,
--pairs rounds, the order reversed every other round, so a slow minute of a shared machine lands
on all of them. Per server: utime+stime from /proc over its slices divided by wrk's requests,
and against the last server the ratio overall and the median of the per-round ratios. --perf
records cpu-clock samples (2 kHz, with the interrupted registers) of all the servers into OUT,
and OUT.json says which pid is which: bench/http/perf_leaves.py OUT prints them per request."""
import argparse, os, re, shlex, socket, statistics, subprocess, time
ap = argparse.ArgumentParser()
ap.add_argument("servers", nargs="+")
ap.add_argument("--pairs", type=int, default=20)
ap.add_argument("--secs", type=int, default=1)
ap.add_argument("--conns", type=int, default=50)
ap.add_argument("--perf", default="")
a = ap.parse_args()
tck = os.sysconf("SC_CLK_TCK")
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tck
def wrk(port, secs):
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", f"-c{a.conns}", f"-d{secs}s", f"http://127.0.0.1:{port}/"], capture_output=True, text=True).stdout
    m = re.search(r"(\d+) requests in", out)
    if not m:
        raise RuntimeError(f"wrk against port {port} printed no result:\n{out}")
    return int(m.group(1))
procs = []
for s in a.servers:
    name, cmd = s.split("=", 1)
    port = free_port()
    p = subprocess.Popen(["taskset", "-c", "0"] + shlex.split(cmd.format(port=port)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append((name, port, p))
time.sleep(0.5)
for name, port, p in procs:
    for _ in range(50):
        try:
            wrk(port, 1); break
        except Exception:
            time.sleep(0.1)
print("load average at start:", open("/proc/loadavg").read().split()[:3], flush=True)
res = {n: [] for n, _, _ in procs}
perf = None
if a.perf:
    perf = subprocess.Popen(["perf", "record", "-q", "-F", "2000", "-e", "cpu-clock", "-I", "-p", ",".join(str(p.pid) for _, _, p in procs), "-o", a.perf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
try:
    for i in range(a.pairs):
        order = procs if i % 2 == 0 else procs[::-1]
        for name, port, p in order:
            c0 = cpu(p.pid); n = wrk(port, a.secs); c1 = cpu(p.pid)
            res[name].append((c1 - c0, n))
finally:
    if perf:
        perf.send_signal(2); perf.wait()
    for _, _, p in procs: p.kill()
names = [n for n, _, _ in procs]
if a.perf:
    import json
    json.dump({n: {"pid": p.pid, "requests": sum(y for _, y in res[n])} for n, _, p in procs}, open(a.perf + ".json", "w"))
base = names[-1]
for n in names:
    c = sum(x for x, _ in res[n]); r = sum(y for _, y in res[n])
    per = [x * 1e6 / y for x, y in res[n]]
    line = f"{n:10} {c * 1e6 / r:6.3f} us/req overall, median slice {statistics.median(per):6.3f}, req/s {r / (a.pairs * a.secs):,.0f}"
    if n != base:
        ratios = [ (x / y) / (bx / by) for (x, y), (bx, by) in zip(res[n], res[base])]
        q = statistics.quantiles(ratios, n=4)
        line += f"  /{base}: overall {(c / r) / (sum(x for x, _ in res[base]) / sum(y for _, y in res[base])):.3f}x, paired median {statistics.median(ratios):.3f}x (IQR {q[0]:.3f}-{q[2]:.3f})"
    print(line)
print("load average at end:", open("/proc/loadavg").read().split()[:3])
