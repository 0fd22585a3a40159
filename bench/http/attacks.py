"""The slowhttptest parts (slowloris, slow body, slow read) and the idle-connection part of
bench/http/run.py. Each runs once per server, cogwheel first then nginx, each on a fresh
server with the attack timeouts (header, body and send 5 s)."""
import os
import re
import subprocess
import tempfile
import threading
import time

import servers
from run import TIMEOUTS_ATTACK, client, fmt, wrk

HERE = os.path.dirname(os.path.abspath(__file__))

# slowhttptest: mode flag, path, body bytes of the server, SO_SNDBUF, extra flags. The follow-up
# interval (-i, -n) is longer than the 5 s timeout, so every connection must be cut by the server.
# Slow read: on loopback the kernel's autotuning gives each connection more than a megabyte of
# send buffer, which would swallow the responses and stall no write; both servers get a 64 KiB
# SO_SNDBUF (nginx: listen ... sndbuf=) and answer 4 pipelined 64 KiB bodies.
MODES = {
    "slowloris": ("-H", "/", 13, 0, ["-i", "2"]),                    # a header line every 2 s: only
                                                                     # the whole-head rule cuts it
    "slowbody": ("-B", "/echo", 13, 0, ["-i", "10", "-s", "8192"]),  # a body piece every 10 s
    "slowread": ("-X", "/", 65536, 65536, ["-k", "4", "-n", "10", "-w", "1", "-y", "16", "-z", "32"]),
}


def slowhttptest(mode, srv, args):
    flag, path, _, _, extra = MODES[mode]
    cmd = " ".join(["slowhttptest", flag, "-c", str(args.slow_connections), "-r", str(args.slow_rate),
                    "-l", str(args.slow_length), "-p", "3", "-u", srv.url(path)] + extra)
    # Its own descriptor limit must hold every connection.
    return subprocess.Popen(client(["bash", "-c", f"ulimit -n 20000 && exec {cmd}"]), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def closed_by_server(out):
    """The last "closed:" count slowhttptest printed (connections the server closed)."""
    found = re.findall(r"closed:\s*(?:\x1b\[[0-9;]*m)*\s*(\d+)", out)
    return int(found[-1]) if found else None


class sampler(threading.Thread):
    """Peak descriptors and RSS of the server's processes, sampled every 0.2 s."""

    def __init__(self, srv):
        super().__init__(daemon=True)
        self.srv, self.stop, self.peak_fds, self.peak_rss = srv, False, 0, 0

    def run(self):
        while not self.stop:
            pids = self.srv.pids()
            self.peak_fds = max(self.peak_fds, servers.fd_count(pids))
            self.peak_rss = max(self.peak_rss, servers.rss_kib(pids))
            time.sleep(0.2)


def attack(mode, args, results):
    _, _, body, sndbuf, _ = MODES[mode]
    rows = []
    for kind in (servers.cogwheel_server, servers.nginx_server):
        with tempfile.TemporaryDirectory() as tmp:
            srv = kind(tmp, body, TIMEOUTS_ATTACK, log_kicks=True, send_buffer=sndbuf)
            with srv:
                wrk(srv.url(), 50, 2)  # warm-up
                base = wrk(srv.url(), 50, args.attack_wrk)
                pids = srv.pids()
                fds0, rss0 = servers.fd_count(pids), servers.rss_kib(pids)
                s = sampler(srv)
                s.start()
                slow = slowhttptest(mode, srv, args)
                time.sleep(args.slow_connections / args.slow_rate / 2)  # halfway through the ramp
                during = wrk(srv.url(), 50, args.attack_wrk)
                slow_out, _ = slow.communicate(timeout=args.slow_length + 120)
                time.sleep(TIMEOUTS_ATTACK[0] / 1000 + 3)  # the last connections' timeouts, and some
                s.stop = True
                s.join()
                pids = srv.pids()
                fds1, rss1 = servers.fd_count(pids), servers.rss_kib(pids)
            row = {"server": kind.name, "wrk_rps_before": base["rps"], "wrk_rps_during": during["rps"],
                   "drop_pct": 100 * (1 - during["rps"] / base["rps"]), "wrk_errors_during": during["socket_errors"],
                   "fds_before": fds0, "fds_peak": s.peak_fds, "fds_after": fds1,
                   "rss_kib_before": rss0, "rss_kib_peak": s.peak_rss, "rss_kib_after": rss1,
                   "slowhttptest_tail": slow_out.strip().splitlines()[-12:],
                   "slowhttptest_closed": closed_by_server(slow_out)}
            if kind is servers.cogwheel_server:
                st = srv.stats()
                row.update({"kicks": st.get("kicks", 0), "header_timeouts": st.get("header_timeouts", 0),
                            "body_timeouts": st.get("body_timeouts", 0), "send_timeouts": st.get("send_timeouts", 0),
                            "lateness_us_p50": st.get("p50"), "lateness_us_p99": st.get("p99"),
                            "lateness_us_max": st.get("max")})
            else:
                row["kicks"] = srv.kicks_logged()
            rows.append(row)
            print(f"  {mode} {kind.name:8}: wrk {row['wrk_rps_before']:,.0f} -> {row['wrk_rps_during']:,.0f} req/s "
                  f"({row['drop_pct']:.1f}% drop), kicks {row['kicks']:.0f}, closed {row['slowhttptest_closed']}, fds {fds0}/{s.peak_fds}/{fds1}, "
                  f"RSS KiB {rss0}/{s.peak_rss}/{rss1}, lateness p50/p99/max us "
                  f"{row.get('lateness_us_p50')}/{row.get('lateness_us_p99')}/{row.get('lateness_us_max')}",
                  flush=True)
            print("    slowhttptest: " + " | ".join(x.strip() for x in row["slowhttptest_tail"][-4:]), flush=True)
    results[mode] = {"slow_connections": args.slow_connections, "slow_rate": args.slow_rate,
                     "wrk_seconds": args.attack_wrk, "rows": rows}


def idle(args, results):
    rows = []
    n = args.idle_connections
    for kind in (servers.cogwheel_server, servers.nginx_server):
        with tempfile.TemporaryDirectory() as tmp:
            srv = kind(tmp, 13, (60000, 60000, 600000, 60000))
            with srv:
                wrk(srv.url(), 50, 1)  # the same warm-up as every other run
                time.sleep(0.5)
                pids = srv.pids()
                rss0, fds0 = servers.rss_kib(pids), servers.fd_count(pids)
                holder = subprocess.Popen(client(["python3", os.path.join(HERE, "idle_clients.py"), str(srv.port),
                                                  str(n)]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                line = holder.stdout.readline().strip()  # "held N" once every connection has its answer
                time.sleep(1)
                pids = srv.pids()
                rss1, fds1 = servers.rss_kib(pids), servers.fd_count(pids)
                holder.stdin.close()
                holder.wait(timeout=60)
            held = int(line.split()[1]) if line.startswith("held") else 0
            row = {"server": kind.name, "held": held, "rss_kib_before": rss0, "rss_kib_held": rss1,
                   "fds_before": fds0, "fds_held": fds1,
                   "bytes_per_connection": (rss1 - rss0) * 1024 / max(held, 1)}
            rows.append(row)
            print(f"  idle {kind.name:8}: {held} connections held, RSS {rss0} -> {rss1} KiB, "
                  f"{row['bytes_per_connection']:.0f} B per connection", flush=True)
    results["idle"] = {"rows": rows}


__all__ = ["attack", "idle", "fmt"]
