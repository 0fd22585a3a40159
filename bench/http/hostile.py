#!/usr/bin/env python3
"""Hostile clients against examples/http's http_server on loopback, one line per attack: what
the server held (RSS, descriptors) and whether it answered, closed or stopped reading as it
should. Starts the server itself (--cores=1, short timeouts) and stops it at the end.

Usage: python3 bench/http/hostile.py BUILD_DIR [--only=a,b] [--connections=19000]

Attacks:
  pipeline    100 connections pipeline GET / without reading a byte (client SO_RCVBUF 64 KiB,
              server --send-buffer-bytes=65536): the server must stop reading once its answers
              back up, holding a bounded amount per connection.
  bursts      --connections connections opened in bursts of 1,000 (one GET / each), held, then
              all closed (FIN), then the same closed with RST: every descriptor must come back.
  halfclose   a whole request then shutdown(SHUT_WR): the answer, then the close; part of a head
              then SHUT_WR: closed at once, no answer.
  rst         200 times POST /echo of 1 MiB, read 16 KiB of the answer, reset the connection.
  expect      Expect: 100-continue, then silence: 100 Continue, then the body timeout (2 s).
  chunks      a 64 KiB body in 1-byte chunks (echoed whole); a chunk of 9,000 bytes of extension (400).
  limits      a head of exactly 8,192 bytes (answered) and one of 8,193 (431).
  fdfull      the server under prlimit --nofile=1024, 1,500 clients: accept backs off at EMFILE,
              and the clients left waiting are answered once the first ones leave.
"""
import argparse
import os
import resource
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import servers  # noqa: E402

GET = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"


def raise_nofile():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class server:
    def __init__(self, build, extra, prefix=()):
        self.port = servers.free_port()
        exe = os.path.join(build, "examples", "http", "http_server")
        self.proc = subprocess.Popen(list(prefix) + [exe, f"--port={self.port}", "--cores=1", "--no-pin", "--header-timeout-ms=2000",
                                      "--body-timeout-ms=2000", "--keepalive-timeout-ms=5000",
                                      "--send-timeout-ms=3000", "--stats"] + extra,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        servers.wait_listening(self.port)

    def rss(self):
        return servers.smaps_rss_kib([self.proc.pid])

    def fds(self):
        return servers.fd_count([self.proc.pid])

    def stop(self):
        """Stops the server (once) and returns its --stats lines."""
        if not hasattr(self, "stats"):
            self.proc.terminate()
            out, _ = self.proc.communicate(timeout=10)
            self.stats = [line for line in out.splitlines() if line.startswith("stats:")]
        return self.stats

    def stat(self, name):
        """One --stats counter (stops the server)."""
        for line in self.stop():
            for field in line.split():
                if field.startswith(name + "="):
                    return int(field.split("=")[1])
        return None

    def connect(self, rcvbuf=None, src=None):
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if src:
            s.bind((src, 0))
        s.connect(("127.0.0.1", self.port))
        return s


def read_until_closed(s, limit=10.0):
    s.settimeout(limit)
    got = b""
    start = time.time()
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return got, time.time() - start, "eof"
            got += b
    except socket.timeout:
        return got, time.time() - start, "open"
    except ConnectionResetError:
        return got, time.time() - start, "reset"


def status_of(data):
    return int(data[9:12]) if data.startswith(b"HTTP/1.1 ") else None


def pipeline(srv, args):
    conns, cap = 100, 2 * 1024 * 1024
    rss0, fds0 = srv.rss(), srv.fds()
    socks = [srv.connect(rcvbuf=65536) for _ in range(conns)]
    batch = GET * 2000
    accepted = []
    for s in socks:
        s.setblocking(False)
    sent = [0] * conns
    stalled = [False] * conns
    last = [time.time()] * conns
    while not all(stalled):
        for i, s in enumerate(socks):
            if stalled[i]:
                continue
            try:
                n = s.send(batch)
                sent[i] += n
                last[i] = time.time()
                if sent[i] >= cap:
                    stalled[i] = True
            except BlockingIOError:
                if time.time() - last[i] > 0.5:
                    stalled[i] = True
        time.sleep(0.001)
    rss1, fds1 = srv.rss(), srv.fds()
    accepted = sorted(sent)
    for s in socks:
        s.close()
    time.sleep(1)
    fds2 = srv.fds()
    # What the sockets took is mostly the kernel's buffering (both ends autotuned on loopback);
    # what the server read shows in the requests it answered.
    answered = srv.stat("requests") // conns
    print(f"pipeline: {conns} connections never reading: the sockets took {accepted[0]:,}..{accepted[-1]:,} B of "
          f"requests each, the server answered {answered:,} requests each ({answered * len(GET):,} B; "
          f"{'stopped reading' if answered * len(GET) < accepted[0] // 4 else 'KEPT READING'}); server RSS {rss0} -> "
          f"{rss1} KiB ({(rss1 - rss0) * 1024 // conns:,} B per connection), descriptors {fds0} -> {fds1} -> {fds2} "
          f"after close", flush=True)


def bursts(srv, args):
    raise_nofile()
    fds0 = srv.fds()
    for how in ("FIN", "RST"):
        socks, bad = [], 0
        t0 = time.time()
        for start in range(0, args.connections, 1000):
            burst = []
            for i in range(start, min(start + 1000, args.connections)):
                try:
                    s = srv.connect(src=f"127.0.0.{1 + i % 8}")
                except OSError as e:
                    print(f"bursts: connect {i}: {e}", flush=True)
                    break
                s.sendall(GET)
                burst.append(s)
            for s in burst:
                s.settimeout(10)
                try:
                    if status_of(s.recv(4096)) != 200:
                        bad += 1
                except OSError:
                    bad += 1
            socks += burst
        held = srv.fds()
        for s in socks:
            if how == "RST":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        deadline = time.time() + 20
        while srv.fds() > fds0 and time.time() < deadline:
            time.sleep(0.1)
        print(f"bursts ({how}): {len(socks):,} connections in bursts of 1,000, {bad} without a 200, server descriptors "
              f"{fds0} -> {held:,} held -> {srv.fds()} {time.time() - t0:.1f} s after the first connect", flush=True)


def halfclose(srv, args):
    s = srv.connect()
    s.sendall(GET)
    s.shutdown(socket.SHUT_WR)
    got, took, how = read_until_closed(s)
    s.close()
    s = srv.connect()
    s.sendall(b"GET / HTTP/1.1\r\nHost: h\r\nX-Half: ")
    s.shutdown(socket.SHUT_WR)
    got2, took2, how2 = read_until_closed(s)
    s.close()
    print(f"halfclose: whole request then SHUT_WR: status {status_of(got)}, then {how} after {took * 1000:.0f} ms; "
          f"half a head then SHUT_WR: {len(got2)} B back, {how2} after {took2 * 1000:.0f} ms", flush=True)


def rst(srv, args):
    fds0, rss0 = srv.fds(), srv.rss()
    body = b"x" * (1024 * 1024)
    req = b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    for _ in range(200):
        s = srv.connect()
        s.sendall(req)
        s.settimeout(10)
        n = 0
        while n < 16384:
            b = s.recv(16384)
            if not b:
                break
            n += len(b)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    deadline = time.time() + 5
    while srv.fds() > fds0 and time.time() < deadline:
        time.sleep(0.05)
    fds1, rss1 = srv.fds(), srv.rss()
    s = srv.connect()
    s.sendall(GET)
    s.settimeout(5)
    answer = status_of(s.recv(4096))
    s.close()
    print(f"rst: 200 resets during a 1 MiB answer: descriptors {fds0} -> {fds1}, RSS {rss0} -> {rss1} KiB, "
          f"next GET / answered {answer}", flush=True)


def expect(srv, args):
    s = srv.connect()
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")
    s.settimeout(5)
    first = s.recv(4096)
    got, took, how = read_until_closed(s)
    s.close()
    print(f"expect: {first.strip()!r}, then silence: {how} after {took:.2f} s ({len(got)} B more)", flush=True)


def chunks(srv, args):
    body = b"".join(b"1\r\n" + bytes([97 + i % 26]) + b"\r\n" for i in range(65536)) + b"0\r\n\r\n"
    s = srv.connect()
    t0 = time.time()
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + body)
    got, _, _ = read_until_closed(s)
    s.close()
    ok = got.endswith(bytes(97 + i % 26 for i in range(65536)))
    s = srv.connect()
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;" + b"e" * 9000 + b"\r\nx\r\n0\r\n\r\n")
    got2, _, how2 = read_until_closed(s)
    s.close()
    print(f"chunks: 64 KiB in 1-byte chunks ({len(body):,} B on the wire): status {status_of(got)}, body echoed "
          f"{'whole' if ok else 'WRONG'} in {time.time() - t0:.2f} s; 9,000 B of extension: status {status_of(got2)}, "
          f"then {how2}", flush=True)


def limits(srv, args):
    out = []
    for total in (8192, 8193):
        head = b"GET / HTTP/1.1\r\nHost: h\r\nX-Pad: "
        pad = total - len(head) - 4
        s = srv.connect()
        s.sendall(head + b"p" * pad + b"\r\n\r\n")
        s.settimeout(5)
        out.append(f"{total} B head: {status_of(s.recv(4096))}")
        s.close()
    print("limits: " + ", ".join(out), flush=True)


def fdfull(srv, args):
    """The server's descriptor table full (prlimit 1,024): accept fails with EMFILE and backs off;
    once answered clients leave, the waiting ones are served."""
    socks = []
    for i in range(1500):
        s = srv.connect()
        s.sendall(GET)
        socks.append(s)
    answered, waiting = [], []
    for s in socks:
        s.settimeout(0.5 if not waiting else 0.01)
        try:
            (answered if status_of(s.recv(4096)) == 200 else waiting).append(s)
        except OSError:
            waiting.append(s)
    full = srv.fds()
    for s in answered:
        s.close()
    late = 0
    for s in waiting:
        s.settimeout(10)
        try:
            late += status_of(s.recv(4096)) == 200
        except OSError:
            pass
        s.close()
    print(f"fdfull: 1,500 clients against 1,024 descriptors: {len(answered)} answered at once (server at {full} "
          f"descriptors), {len(waiting)} waiting; once the answered ones left, {late} of them answered", flush=True)


ATTACKS = {"pipeline": (pipeline, ["--send-buffer-bytes=65536"]), "bursts": (bursts, []),
           "halfclose": (halfclose, []), "rst": (rst, []), "expect": (expect, []), "chunks": (chunks, []),
           "limits": (limits, []), "fdfull": (fdfull, [])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--only", default=",".join(ATTACKS))
    ap.add_argument("--connections", type=int, default=19000)
    args = ap.parse_args()
    for name in args.only.split(","):
        fn, extra = ATTACKS[name]
        srv = server(args.build, extra, ["prlimit", "--nofile=1024:1024"] if name == "fdfull" else ())
        try:
            fn(srv, args)
        finally:
            for line in srv.stop():
                print("  " + line, flush=True)


if __name__ == "__main__":
    main()
