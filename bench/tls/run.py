#!/usr/bin/env python3
"""HTTPS: cogwheel's examples/http (--tls-cert/--tls-key) against nginx, one worker each.

Same ECDSA P-256 certificate, TLS 1.3 with TLS_AES_128_GCM_SHA256 and X25519 on both (an
OPENSSL_CONF given to both servers and to wrk), the same 13-byte body. Every metric is measured
on both servers in one run, interleaved (each repetition starts them in the other order), and
reported as the median of --reps repetitions (min..max in parentheses):

  keepalive   wrk -t1 -c50 https keep-alive: requests/s, server CPU (utime+stime) per request
  handshake   wrk -t1 -c50 with "Connection: close": new full handshakes/s, CPU per handshake
              (session tickets and caches off on both servers: nothing resumes)
  idle        RSS per idle TLS connection (handshake done, no request) at --idle connections
  slowloris   --slow clients dribbling a ClientHello one byte a second: seconds from their
              start until the server cut them (header timeout 2 s on both), median and max
              (keep-alive and idle run with a 60 s header timeout, handshakes and slowloris
              with 2 s, on a server with resumption off)

Servers on CPU 0 (taskset); clients unpinned (on this shared machine a client pinned to CPU 1
ran at a tenth of its speed, starved by other pinned work). Usage:
  python3 bench/tls/run.py --server=build/rel/examples/http/http_server [--reps=5] [--duration=5]
"""
import argparse
import os
import random
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
BODY = "Hello, World!"

OPENSSL_CONF = """openssl_conf = conf
[conf]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
MinProtocol = TLSv1.3
Ciphersuites = TLS_AES_128_GCM_SHA256
Groups = X25519
"""


def free_port():
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for _ in range(200):
        port = random.randrange(max(1024, low - 20000), low)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port")


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def rss_kib(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


class server:
    def __init__(self, tmp, env, resumption, header_ms):
        self.tmp, self.env, self.resumption, self.header_ms = tmp, env, resumption, header_ms
        self.port = free_port()

    def __enter__(self):
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     cwd=self.tmp, env=self.env)
        end = time.time() + 20
        while time.time() < end:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.__exit__()
        raise RuntimeError(f"{self.name} did not start")

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return False

    def pids(self):
        p = [self.proc.pid]
        for c in children(self.proc.pid):  # taskset exec's; nginx forks its worker
            p += [c] + children(c)
        return p


class cogwheel_server(server):
    name = "cogwheel"
    binary = None

    def command(self):
        cmd = ["taskset", "-c", "0", self.binary, f"--port={self.port}", "--cores=1", "--no-pin",
               f"--tls-cert={self.tmp}/cert.pem", f"--tls-key={self.tmp}/key.pem", f"--header-timeout-ms={self.header_ms}"]
        return cmd + ([] if self.resumption else ["--tls-no-resumption"])


class nginx_server(server):
    name = "nginx"

    def command(self):
        conf = f"{self.tmp}/nginx-{self.port}.conf"
        resumption = "" if self.resumption else "ssl_session_tickets off;\n    ssl_session_cache off;\n"
        with open(conf, "w") as f:
            f.write(f"""daemon off;
worker_processes 1;
pid {self.tmp}/nginx-{self.port}.pid;
error_log {self.tmp}/error.log;
events {{ worker_connections 20000; }}
worker_rlimit_nofile 20000;
http {{
  access_log off;
  keepalive_requests 100000000;
  client_header_timeout {self.header_ms}ms;
  server {{
    listen 127.0.0.1:{self.port} ssl;
    ssl_certificate {self.tmp}/cert.pem;
    ssl_certificate_key {self.tmp}/key.pem;
    ssl_protocols TLSv1.3;
    ssl_ecdh_curve X25519;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    {resumption}
    location = / {{ return 200 "{BODY}"; }}
  }}
}}
""")
        return ["taskset", "-c", "0", "nginx", "-e", f"{self.tmp}/error.log", "-c", conf, "-p", self.tmp]


def wrk(srv, env, duration, close):
    cmd = ["wrk", "-t1", "-c50", f"-d{duration}s", f"https://127.0.0.1:{srv.port}/"]
    if close:
        cmd[2:2] = ["-H", "Connection: close"]
    before = cpu_seconds(srv.pids())
    out = subprocess.run(cmd, capture_output=True, text=True, env=env).stdout
    cpu = cpu_seconds(srv.pids()) - before
    requests = int(next(l for l in out.splitlines() if "requests in" in l).split()[0])
    return requests / duration, cpu * 1e6 / max(requests, 1)


def idle(srv, n):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    base = rss_kib(srv.pids())
    conns = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", srv.port))
        conns.append(ctx.wrap_socket(s, server_hostname="localhost"))
    time.sleep(0.5)
    per = (rss_kib(srv.pids()) - base) * 1024 / n
    for c in conns:
        c.close()
    time.sleep(0.5)
    return per


def slowloris(srv, n):
    """n clients each send a ClientHello's first bytes a byte a second; seconds until cut."""
    hello = bytes.fromhex("160301020001")
    socks = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(n)]
    start = time.time()
    cut = [None] * n
    for s in socks:
        s.setblocking(False)
    sent = 0
    while None in cut and time.time() - start < 15:
        if sent < len(hello) and time.time() - start >= sent:
            for i, s in enumerate(socks):
                if cut[i] is None:
                    try:
                        s.send(hello[sent:sent + 1])
                    except OSError:
                        cut[i] = time.time() - start
            sent += 1
        for i, s in enumerate(socks):
            if cut[i] is None:
                try:
                    if s.recv(64) == b"":
                        cut[i] = time.time() - start
                except BlockingIOError:
                    pass
                except OSError:
                    cut[i] = time.time() - start
        time.sleep(0.01)
    for s in socks:
        s.close()
    done = [c for c in cut if c is not None]
    return (statistics.median(done) if done else float("nan"), max(done) if done else float("nan"), len(done))


def fmt(values, digits=1):
    med = statistics.median(values)
    return f"{med:.{digits}f} ({min(values):.{digits}f}..{max(values):.{digits}f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--slow", type=int, default=1000)
    args = ap.parse_args()
    cogwheel_server.binary = os.path.abspath(args.server)
    tmp = tempfile.mkdtemp(prefix="cogwheel-bench-tls-")
    with open(f"{tmp}/openssl.cnf", "w") as f:
        f.write(OPENSSL_CONF)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", f"{tmp}/key.pem", "-out", f"{tmp}/cert.pem", "-subj", "/CN=localhost", "-days", "2"],
                   check=True, capture_output=True)
    env = dict(os.environ, OPENSSL_CONF=f"{tmp}/openssl.cnf")
    results = {k: {"cogwheel": [], "nginx": []} for k in ("rps", "cpu_req", "hs", "cpu_hs", "idle", "slow_med", "slow_max")}
    for rep in range(args.reps):
        order = [cogwheel_server, nginx_server] if rep % 2 == 0 else [nginx_server, cogwheel_server]
        for kind in order:
            # Header timeout 60 s: idle connections must outlive their opening (10,000 take seconds).
            with kind(tmp, env, True, 60000) as srv:
                rps, cpu = wrk(srv, env, args.duration, False)
                results["rps"][kind.name].append(rps)
                results["cpu_req"][kind.name].append(cpu)
                results["idle"][kind.name].append(idle(srv, args.idle))
            # Header timeout 2 s: the slowloris clients are cut by it.
            with kind(tmp, env, False, 2000) as srv:
                hs, cpu = wrk(srv, env, args.duration, True)
                results["hs"][kind.name].append(hs)
                results["cpu_hs"][kind.name].append(cpu)
                med, mx, _ = slowloris(srv, args.slow)
                results["slow_med"][kind.name].append(med)
                results["slow_max"][kind.name].append(mx)
        print(f"rep {rep + 1}/{args.reps}: " + ", ".join(f"{k}={v}" for k, v in results.items()), file=sys.stderr)
    rows = [("keep-alive requests/s", "rps", 0), ("server CPU us per request", "cpu_req", 2),
            ("full handshakes/s (Connection: close)", "hs", 0), ("server CPU us per handshake", "cpu_hs", 1),
            (f"RSS bytes per idle TLS connection ({args.idle})", "idle", 0),
            (f"slowloris handshake cut, median s ({args.slow})", "slow_med", 2),
            (f"slowloris handshake cut, max s ({args.slow})", "slow_max", 2)]
    print(f"| metric (median of {args.reps}, min..max) | cogwheel | nginx | cogwheel/nginx |")
    print("|---|---|---|---|")
    for title, key, d in rows:
        c, n = results[key]["cogwheel"], results[key]["nginx"]
        print(f"| {title} | {fmt(c, d)} | {fmt(n, d)} | {statistics.median(c) / statistics.median(n):.2f} |")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
