#!/usr/bin/env python3
# claim_cachegrind.py: redis-server's instructions and simulated cache misses per job, under
# callgrind --cache-sim=yes, for the delay queue's claim script (main's key layout; each claim's
# records acknowledged in two halves riding on the next two claims, as the lookahead worker's
# 100 ms batches split a record) against delay_queue_bench's 100 ms poller's script on a plain
# layout of its own (id in a sorted set, payload in a hash). PENDING far-future jobs in each,
# DUE jobs due now, claimed LIMIT (150) at a time, lookahead 0; one warm-up claim and poll,
# then the polls and the claims measured apart (callgrind_control dumps).
#   python3 bench/redis/claim_cachegrind.py [--scripts=redis/src/delay_queue_scripts.hpp]
#       [--port=17001] [--ll=262144,8,64: the simulated last level, default the host's]
#       [--split=1: the share of records acknowledged in two halves; the others go whole on the
#        next claim, as a worker that holds a record's acknowledgements until it is done sends them]
# The scripts are read by compiling a two-line dumper of the header with g++ (so a header of
# another commit, `git show REV:redis/src/delay_queue_scripts.hpp > f`, compares two versions).
# Environment: PENDING (100000), DUE (6000), LIMIT (150: jobs per claim and per poll).
# Needs valgrind, redis-server, g++. Takes about 2 minutes (100,000 pending).
import glob, os, re, socket, subprocess, sys, tempfile, time
opts = dict(a[2:].split('=', 1) for a in sys.argv[1:] if a.startswith('--') and '=' in a)
header = os.path.abspath(opts.get('scripts', 'redis/src/delay_queue_scripts.hpp'))
port, ll = int(opts.get('port', 17001)), opts.get('ll', '')
split = float(opts.get('split', 1))
PENDING, DUE, LIMIT = int(os.environ.get('PENDING', 100000)), int(os.environ.get('DUE', 6000)), int(os.environ.get('LIMIT', 150))
work = tempfile.mkdtemp(prefix='claim_cachegrind.')
with open(f'{work}/dump.cpp', 'w') as f:
    f.write(f'#include <cstdio>\n#include "{header}"\nusing namespace cogwheel::redis::detail;\n'
            'static void w(const char* n, const char* s) { FILE* f = std::fopen(n, "w"); std::fputs(s, f); std::fclose(f); }\n'
            'int main() { w("schedule.lua", schedule_lua); w("claim.lua", claim_lua); }\n')
subprocess.run(['g++', '-std=c++20', f'{work}/dump.cpp', '-o', f'{work}/dump'], check=True)
subprocess.run([f'{work}/dump'], cwd=work, check=True)
out = f'{work}/callgrind.out'
cmd = ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--cache-sim=yes', f'--callgrind-out-file={out}']
if ll: cmd.append(f'--LL={ll}')
cmd += ['redis-server', '--port', str(port), '--save', '', '--appendonly', 'no', '--dir', work]
srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(out + '.log', 'w'))
for _ in range(200):
    try:
        s = socket.create_connection(('127.0.0.1', port)); break
    except OSError: time.sleep(0.2)
f = s.makefile('rb')
def enc(*a):
    b = [b'*%d\r\n' % len(a)]
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        b.append(b'$%d\r\n%s\r\n' % (len(x), x))
    return b''.join(b)
def read():
    l = f.readline()
    t, r = l[:1], l[1:-2]
    if t == b'+': return r
    if t == b'-': raise RuntimeError(r)
    if t == b':': return int(r)
    if t == b'$':
        n = int(r)
        if n < 0: return None
        d = f.read(n + 2); return d[:-2]
    if t == b'*':
        n = int(r)
        return None if n < 0 else [read() for _ in range(n)]
def call(*a):
    s.sendall(enc(*a)); return read()
def pipe(cmds):
    for i in range(0, len(cmds), 1000):
        s.sendall(b''.join(enc(*c) for c in cmds[i:i + 1000]))
        for _ in cmds[i:i + 1000]: read()
lua = lambda n: open(f'{work}/{n}.lua', 'rb').read()
sched, claim = call('SCRIPT', 'LOAD', lua('schedule')), call('SCRIPT', 'LOAD', lua('claim'))
psched = call('SCRIPT', 'LOAD', b"if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end\nredis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])\nreturn 1")
# The poller's script, as delay_queue_bench runs it.
bench_cpp = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'delay_queue_bench.cpp')).read()
poll = call('SCRIPT', 'LOAD', re.search(r'poll_claim_lua = R"\((.*?)\)";', bench_cpp, re.S).group(1).encode())
# KEYS as the queue passes them; a header of a version before takes the first 8 (its payload
# hash the third).
qk = ['{q}:due', '{q}:inflight', '{q}:job', '{q}:attempts', '{q}:claims', '{q}:dead', '{q}:reason', '{q}:token', '{q}:payload']
pk = ['{poll}:due', '{poll}:payload']
now = int(time.time() * 1000)
far = now + 86400000
pipe([('EVALSHA', sched, len(qk), *qk, 'pending:%d' % i, 'payload', far + i, '{q}:wake', 'at') for i in range(PENDING)])
pipe([('EVALSHA', psched, 2, *pk, 'pending:%d' % i, 'payload', far + i) for i in range(PENDING)])
pipe([('EVALSHA', sched, len(qk), *qk, 'l:%d' % i, 'payload', now - 60000 + i * 5, '{q}:wake', 'at') for i in range(DUE)])
pipe([('EVALSHA', psched, 2, *pk, 'p:%d' % i, 'payload', now - 60000 + i * 5) for i in range(DUE)])
ctl = lambda *a: subprocess.run(['callgrind_control', *a, str(srv.pid)], stdout=subprocess.DEVNULL, check=True)
ctl('-i', 'on')
pending_acks = []  # list of (token, first, last) groups per future claim
def do_claim(acks):
    args = [60000, LIMIT, 0, 25, 1048576, 1048576, 128]
    by = {}
    for t, a, b in acks: by.setdefault(t, []).append((a, b))
    for t in sorted(by):
        args += [t, len(by[t])]
        for a, b in by[t]: args += [a, b]
    r = call('EVALSHA', claim, len(qk), *qk, *args)
    n, first = len(r[11]), r[9]  # r[11]: one entry per job claimed (either layout's reply)
    halves1, halves2 = [], []
    for rec in range((n + 127) // 128 if n else 0):
        size = min(128, n - rec * 128)
        global records
        records += 1  # split the records whose count crosses a multiple of 1 / split
        h = (size + 1) // 2 if int(records * split) != int((records - 1) * split) else size
        halves1.append((first + rec, 1, h))
        if size > h: halves2.append((first + rec, h + 1, size))
    return n, halves1, halves2
queue = [[], []]
records = 0
def step():
    acks = queue.pop(0)
    n, h1, h2 = do_claim(acks)
    queue[0] += h1
    queue.append(h2)
    return n
step(); call('EVALSHA', poll, 2, *pk, LIMIT)
ctl('-z')
polled = 0
while True:
    r = call('EVALSHA', poll, 2, *pk, LIMIT)
    if not r: break
    polled += len(r) // 3
ctl('-d', 'poll')
claimed, claims = 0, 0
while True:
    n = step(); claims += 1; claimed += n
    if n == 0 and not queue[0] and not queue[1]: break
ctl('-d', 'lookahead')
ctl('-i', 'off')
left = call('ZCARD', qk[0]), call('ZCARD', qk[1]), call('HLEN', qk[2]), call('HLEN', '{poll}:payload')
print(header, 'split', split, ll or 'LL: the host\'s', 'polled', polled, 'claimed', claimed, 'claims', claims, 'left (pending, inflight, payloads, poll payloads)', left)
srv.terminate(); srv.wait()
for fn in sorted(glob.glob(out + '*')):
    if fn.endswith('.log'): continue
    txt = open(fn).read()
    trig = re.search(r'^desc: Trigger: (.*)$', txt, re.M)
    ev = re.search(r'^events: (.*)$', txt, re.M).group(1).split()
    summ = re.search(r'^summary: (.*)$', txt, re.M) or re.search(r'^totals: (.*)$', txt, re.M)
    vals = [int(x) for x in summ.group(1).split()]
    d = dict(zip(ev, vals))
    jobs = polled if 'poll' in trig.group(1) else claimed if 'lookahead' in trig.group(1) else 0
    if not jobs: continue
    # Less serverCron (its allocator statistics, about 5 LL misses per job here): it runs 10
    # times a second whatever the scripts do, so its share follows the run's length under
    # valgrind (and the machine's load), not the script.
    cron = subprocess.run(['callgrind_annotate', '--inclusive=yes', fn], capture_output=True, text=True).stdout
    m = re.search(r'^(.*)\?\?\?:serverCron ', cron, re.M)
    if m:
        c = [int(x.replace(',', '')) for x in re.findall(r'([\d,]+) \(\s*[\d.]+%\)', m.group(1))]
        for k, v in zip(ev, c): d[k] -= v
    print(f"  {trig.group(1):40s} per job: Ir {d['Ir']/jobs:8.0f}  D1 misses (r+w) {(d['D1mr']+d['D1mw'])/jobs:6.1f}  LL misses (r+w) {(d['DLmr']+d['DLmw'])/jobs:6.2f}  I1mr {d['I1mr']/jobs:5.1f}"
          + ('' if m else '  (serverCron not found: included)'))
