#!/usr/bin/env python3
"""Holds N idle keep-alive HTTP connections to 127.0.0.1:PORT: connects from source addresses
127.0.0.1..8 in turn (spreading ephemeral ports), sends one GET / on each, reads each answer,
prints "held N" and keeps them open until its stdin closes.

Usage: idle_clients.py PORT N
"""
import resource
import socket
import sys

port, n = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

request = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n"
socks = []
for i in range(n):
    s = socket.socket()
    s.bind((f"127.0.0.{1 + i % 8}", 0))
    try:
        s.connect(("127.0.0.1", port))
    except OSError as e:
        print(f"connect {i}: {e}", file=sys.stderr)
        s.close()
        break
    s.sendall(request)
    socks.append(s)
held = 0
for s in socks:
    s.settimeout(10)
    try:
        if s.recv(4096).startswith(b"HTTP/1.1 200"):
            held += 1
    except OSError:
        pass
print(f"held {held}", flush=True)
sys.stdin.read()
