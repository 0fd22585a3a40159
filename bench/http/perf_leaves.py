"""Samples per 1,000 requests by the function they fell in, for each server of a slices.py --perf run.

  python3 bench/http/perf_leaves.py OUT [ROWS]

At slices.py's 2 kHz one sample is 500 us of CPU: 1.0 sample per 1,000 requests is 0.5 us per
request."""
import subprocess, sys, collections, json
d = sys.argv[1]; meta = json.load(open(d + ".json"))
txt = subprocess.run(["perf", "script", "-i", d, "-F", "pid,ip,sym"], capture_output=True, text=True).stdout
c = {n: collections.Counter() for n in meta}; bypid = {m["pid"]: n for n, m in meta.items()}
for line in txt.splitlines():
    p = line.split(None, 2)
    if len(p) < 2: continue
    n = bypid.get(int(p[0]))
    if n is None: continue
    sym = p[2] if len(p) > 2 else "?"
    c[n][sym] += 1
names = list(meta)
per = {n: {k: v * 1000 / meta[n]["requests"] for k, v in c[n].items()} for n in names}
print("%-50s" % "total", *("%8.2f" % sum(per[n].values()) for n in names))
keys = set().union(*[set(per[n]) for n in names])
for k in sorted(keys, key=lambda k: -max(per[n].get(k, 0) for n in names))[:int(sys.argv[2]) if len(sys.argv) > 2 else 60]:
    print("%-50s" % k[:50], *("%8.2f" % per[n].get(k, 0) for n in names))
