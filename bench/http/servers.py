"""The HTTP servers of bench/http/run.py (cogwheel, nginx, and the bare io_uring floor) and what is read from /proc about them.

Each server is started on a free port with its own temporary directory, pinned to CPU 0, and
stopped (SIGTERM, then SIGKILL) when the context ends, also on failure.
"""
import os
import random
import socket
import subprocess
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    """A port below the ephemeral range: a port the kernel handed out to a client socket (wrk's,
    slowhttptest's thousands) may still be bound by it, and the server's bind would fail."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for _ in range(200):
        port = random.randrange(max(1024, low - 20000), low)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port below the ephemeral range")


def fixed_body(n):
    """The body examples/http/http_server answers (fixed_body() in http_server_response.cpp)."""
    text = "Hello, World!\n"
    return (text * (n // len(text) + 1))[:n]


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / CLK_TCK


def rss_kib(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def smaps_rss_kib(pids):
    """Rss from /proc/<pid>/smaps_rollup (the kernel's exact sum, where VmRSS may lag), over pids."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            total += sum(int(line.split()[1]) for line in f if line.startswith("Rss:"))
    return total


def fd_count(pids):
    return sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in pids)


def wait_listening(port, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


class server:
    name = "?"

    def __init__(self, tmp, body_bytes, timeouts_ms, log_kicks=False, send_buffer=0):
        self.send_buffer = send_buffer  # SO_SNDBUF per connection, 0: the kernel's autotuning
        self.tmp = tmp
        self.body_bytes = body_bytes
        self.timeouts = timeouts_ms  # header, body, keepalive, send
        self.log_kicks = log_kicks
        self.port = free_port()
        self.proc = None
        self.output = ""

    def __enter__(self):
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     cwd=self.tmp)
        try:
            wait_listening(self.port)
        except BaseException:
            self.__exit__(None, None, None)  # __exit__ does not run when __enter__ raises
            raise RuntimeError(f"{self.name} did not start: {self.output}")
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.output, _ = self.proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.output, _ = self.proc.communicate()
        return False

    def url(self, path="/"):
        return f"http://127.0.0.1:{self.port}{path}"

    def pids(self):
        children = []
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                children = [int(p) for p in f.read().split()]
        except OSError:
            pass
        return [self.proc.pid] + children


class cogwheel_server(server):
    name = "cogwheel"
    binary = None  # set by run.py

    def command(self):
        h, b, k, s = self.timeouts
        return ["taskset", "-c", "0", self.binary, f"--port={self.port}", "--cores=1", "--no-pin", "--stats",
                f"--body-bytes={self.body_bytes}", f"--header-timeout-ms={h}", f"--body-timeout-ms={b}",
                f"--keepalive-timeout-ms={k}", f"--send-timeout-ms={s}", f"--send-buffer-bytes={self.send_buffer}"]

    def stats(self):
        """Parsed from the --stats lines printed at exit: {key: number}."""
        out = {}
        for line in self.output.splitlines():
            if line.startswith("stats:"):
                for word in line.replace("(", " ").replace(")", " ").split():
                    if "=" in word:
                        k, v = word.split("=", 1)
                        out[k] = float(v)
        return out


class bare_server(server):
    """bench/http/bare_uring_responder: the floor, the same response bytes with no runtime and no
    parser (GET / only; the throughput part alone uses it)."""
    name = "floor"
    binary = None  # set by run.py

    def command(self):
        return ["taskset", "-c", "0", self.binary, f"--port={self.port}", f"--body-bytes={self.body_bytes}"]


class nginx_server(server):
    """nginx from Debian, one worker, no access log; the same body and the same four timeouts."""
    name = "nginx"

    def command(self):
        h, b, k, s = self.timeouts
        # nginx takes at most 4 KiB per parameter: a longer body is the concatenation of variables
        # (evaluated per request, an in-memory string like cogwheel's).
        text = fixed_body(self.body_bytes)
        pieces = [text[i:i + 1400] for i in range(0, len(text), 1400)]
        esc = [p.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") for p in pieces]
        if len(esc) == 1:
            sets, body = "", esc[0]
        else:
            sets = "".join(f'    set $body{i} "{p}";\n' for i, p in enumerate(esc))
            body = "".join(f"$body{i}" for i in range(len(esc)))
        temp = "".join(f"  {t}_temp_path {self.tmp}/{t};\n" for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        conf = f"""worker_processes 1;
worker_rlimit_nofile 20000;
pid {self.tmp}/nginx.pid;
error_log {self.tmp}/error.log {"info" if self.log_kicks else "warn"};
events {{ worker_connections 20000; }}
http {{
  access_log off;
{temp}  client_header_timeout {h}ms;
  client_body_timeout {b}ms;
  keepalive_timeout {k}ms;
  send_timeout {s}ms;
  keepalive_requests 100000000;
  client_max_body_size 1m;
  server {{
    listen 127.0.0.1:{self.port} reuseport backlog=4096{f" sndbuf={self.send_buffer}" if self.send_buffer else ""};
    location = / {{
{sets}      default_type text/plain;
      return 200 "{body}";
    }}
    # Reads the whole body (so client_body_timeout applies) before the dead upstream answers 502.
    location = /echo {{ proxy_pass http://127.0.0.1:9; }}
  }}
}}
"""
        with open(f"{self.tmp}/nginx.conf", "w") as f:
            f.write(conf)
        return ["taskset", "-c", "0", "nginx", "-p", self.tmp, "-c", f"{self.tmp}/nginx.conf", "-g", "daemon off;"]

    def kicks_logged(self):
        """Connections nginx closed for a timeout (error.log at level info)."""
        try:
            with open(f"{self.tmp}/error.log") as f:
                return sum("timed out" in line for line in f)
        except OSError:
            return 0
