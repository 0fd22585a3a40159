#!/usr/bin/env python3
"""Memory per idle connection, three servers in one run: examples/http's http_server, nginx
(started here on a free port with a temporary directory and a generated config, as
bench/http/run.py does) and examples/echo_server --pooled.

Each server runs alone on CPU 0; its clients run in their own process on CPU 1. A round, for
each server in turn (the order alternates from round to round):
  1. start it; for the two HTTP servers, one second of `wrk -t1 -c50` (the warm-up every
     bench/http run has), then half a second of quiet;
  2. read Rss from /proc/<pid>/smaps_rollup, summed over the server's processes (nginx: master
     and worker): `before`;
  3. open N connections from another process and keep them open: for HTTP,
     bench/http/idle_clients.py (one `GET /` on each, the answer read, then idle: keep-alive);
     for echo, examples/load_client --idle=N (connections that never send);
  4. once the server holds them all (its descriptors counted) and one more second has passed
     (--settle-s), read Rss again: `held`. (held - before) / N is the user memory per idle
     connection.
Kernel socket memory (socket buffers, the struct sock) is not in a process's RSS and is left out
for every server alike.

Transparent huge pages are turned off for the servers (prctl PR_SET_THP_DISABLE in this process,
which every child inherits), unless --thp. Where the kernel's THP mode is `madvise` or `always`,
cogwheel's frame pool and buffer pool (MADV_HUGEPAGE) would otherwise grow Rss 2 MiB at a time,
and (held - before) / N would be that step divided by N: measured on such a machine at 2,000 /
5,000 / 10,000 / 19,000 idle connections, echo --pooled read 33 / 436 / 224 / 343 B. With 4 KiB
pages the figure is what the connections touch; with huge pages the same memory, rounded.

Usage: python3 bench/idle_memory.py --build=build/rel [--connections=10000] [--rounds=3]
           [--only=http,nginx,echo] [--http-flags="--park-after-ms=100"] [--settle-s=1] [--thp]
Builds nothing: cmake --build BUILD --target http_server echo_server load_client. Needs nginx
(Debian's nginx-light), wrk, taskset, 2 CPUs and a hard RLIMIT_NOFILE above N + 100.
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "http"))
import servers  # noqa: E402


def warm_up(port):
    subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c50", "-d1s", f"http://127.0.0.1:{port}/"],
                   capture_output=True, timeout=60)


def wait_held(pids, base_fds, n, settle, timeout=60):
    end = time.time() + timeout
    while time.time() < end and servers.fd_count(pids) - base_fds < n:
        time.sleep(0.1)
    time.sleep(settle)  # the last accepts settle into their first read (and park)
    return servers.fd_count(pids) - base_fds


class http_server(servers.cogwheel_server):
    extra = []  # --http-flags

    def command(self):
        return super().command() + self.extra


class echo_server(servers.server):
    name = "echo --pooled"
    binary = None

    def command(self):
        return ["taskset", "-c", "0", self.binary, f"--port={self.port}", "--cores=1", "--no-pin", "--pooled",
                "--mode=deadline", "--idle-timeout-ms=600000"]


def measure(kind, n, build, settle):
    with tempfile.TemporaryDirectory() as tmp:
        # keep-alive 10 min: nobody is kicked while held
        with kind(tmp, 13, (60000, 60000, 600000, 60000)) as srv:
            http = kind is not echo_server
            if http:
                warm_up(srv.port)
            time.sleep(0.5)
            pids = srv.pids()
            before, fds = servers.smaps_rss_kib(pids), servers.fd_count(pids)
            if http:
                cmd = ["python3", os.path.join(HERE, "http", "idle_clients.py"), str(srv.port), str(n)]
            else:
                cmd = [os.path.join(build, "examples", "load_client"), f"--to=127.0.0.1:{srv.port}", "--connections=0",
                       f"--idle={n}", "--spread=8", "--duration-ms=600000", "--no-pin"]
            holder = subprocess.Popen(["taskset", "-c", "1"] + cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True)
            try:
                if http:
                    line = holder.stdout.readline().strip()  # "held N": every answer read
                    if not line.startswith("held"):
                        raise RuntimeError(f"idle_clients.py: {line!r}")
                held = wait_held(pids, fds, n, settle)
                after = servers.smaps_rss_kib(srv.pids())
            finally:
                holder.terminate()
                holder.wait(timeout=60)
    return {"server": kind.name, "held": held, "before_kib": before, "held_kib": after,
            "bytes": (after - before) * 1024 / max(held, 1)}


PR_SET_THP_DISABLE = 41  # <linux/prctl.h>


def thp_mode():
    """The kernel's THP mode, the bracketed word of /sys/kernel/mm/transparent_hugepage/enabled."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            words = f.read().split()
        return next((w.strip("[]") for w in words if w.startswith("[")), "unknown")
    except OSError:
        return "not available"


def disable_thp():
    """Turns THP off for this process and the servers it starts (inherited across fork and exec)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        sys.exit(f"idle_memory: prctl(PR_SET_THP_DISABLE) failed: {os.strerror(ctypes.get_errno())} (--thp to measure with huge pages)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/rel")
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="http,nginx,echo")
    ap.add_argument("--http-flags", default="",
                    help="more flags for the HTTP example, space-separated (e.g. --park-after-ms=100)")
    ap.add_argument("--settle-s", type=float, default=1.0,
                    help="seconds between the last connection held and the Rss read (step 4)")
    ap.add_argument("--thp", action="store_true",
                    help="leave transparent huge pages on for the servers (Rss then grows 2 MiB at a time)")
    args = ap.parse_args()
    if not args.thp:
        disable_thp()
    http_server.extra = args.http_flags.split()
    servers.cogwheel_server.binary = os.path.abspath(os.path.join(args.build, "examples", "http", "http_server"))
    echo_server.binary = os.path.abspath(os.path.join(args.build, "examples", "echo_server"))
    kinds = {"http": http_server, "nginx": servers.nginx_server, "echo": echo_server}
    kinds = [kinds[k] for k in args.only.split(",")]
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"idle_memory: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load}, "
          f"{args.connections} connections, {args.rounds} rounds interleaved, medians"
          + (f", HTTP example with {args.http_flags}" if args.http_flags else "")
          + f", kernel THP mode {thp_mode()}, " + ("THP on for the servers" if args.thp else "THP off for the servers"))
    rows = {}
    for r in range(args.rounds):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            m = measure(kind, args.connections, args.build, args.settle_s)
            rows.setdefault(kind.name, []).append(m)
            print(f"  round {r} {m['server']:14} held {m['held']:6}  Rss {m['before_kib']} -> {m['held_kib']} KiB  "
                  f"{m['bytes']:.0f} B per connection", flush=True)
    print("\n| server | connections held | Rss before | Rss held | per idle connection (min..max) |")
    print("|---|---:|---:|---:|---:|")
    for name, ms in rows.items():
        b = [m["bytes"] for m in ms]
        print(f"| {name} | {statistics.median(m['held'] for m in ms):,.0f} | "
              f"{statistics.median(m['before_kib'] for m in ms) / 1024:.1f} MiB | "
              f"{statistics.median(m['held_kib'] for m in ms) / 1024:.1f} MiB | "
              f"{statistics.median(b):,.0f} B ({min(b):,.0f}..{max(b):,.0f}) |")


if __name__ == "__main__":
    main()
