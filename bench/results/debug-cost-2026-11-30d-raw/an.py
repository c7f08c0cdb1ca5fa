#!/usr/bin/env python3
# Section 1 tables from a t1*.tsv (rep, workload, mode, ms, malloc=, measure line).
import sys, statistics as st, math
from collections import defaultdict
f = sys.argv[1]
order = "pair-64 pair-1024 rand-8-1k rand-1k-64k larson-2t xmalloc-2t frag realloc-str large python gcc".split()
T = defaultdict(list); R = defaultdict(list); other = []; steal = []; noisy = []; bad = []
for line in open(f):
    rep, w, m, ms, mal, res = line.rstrip("\n").split("\t")
    kv = dict(x.split("=", 1) for x in res.split())
    t = float(kv["wall_ms"]) if w in ("python", "gcc") else float(ms)
    T[w, m].append(t); R[w, m].append(int(kv["maxrss_kb"]) / 1024)
    o = float(kv["other_pct"]); other.append(o); steal.append(float(kv["steal_pct"]))
    if o > 25: noisy.append((rep, w, m, t, o))
    if kv["status"] != "exit:0" or (w != "gcc" and mal != "malloc=libebb.so"): bad.append(line)
def fmt(x):
    return f"{x:.0f}" if x >= 1000 else f"{x:.1f}"
def cell(v): return f"{fmt(st.median(v))} ({fmt(min(v))}–{fmt(max(v))})"
tr = {}; rr = {}
print("| workload | release median time ms | debug median time ms | time ratio | release peak RSS MiB | debug peak RSS MiB | RSS ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for w in order:
    a, b = T[w, "0"], T[w, "1"]; ra, rb = R[w, "0"], R[w, "1"]
    tr[w] = st.median(b) / st.median(a); rr[w] = st.median(rb) / st.median(ra)
    r = f"{tr[w]:.0f}×" if tr[w] >= 100 else f"{tr[w]:.1f}×"
    print(f"| {w} | {cell(a)} | {cell(b)} | **{r}** | {st.median(ra):.1f} ({min(ra):.1f}–{max(ra):.1f}) | {st.median(rb):.1f} ({min(rb):.1f}–{max(rb):.1f}) | {rr[w]:.2f} |")
    assert len(a) == 5 and len(b) == 5
g = lambda d, ks: math.exp(sum(math.log(d[k]) for k in ks) / len(ks))
print()
print("| geometric mean | time ratio | RSS ratio |\n|---|---:|---:|")
print(f"| all 11 workloads | {g(tr, order):.2f}× | {g(rr, order):.2f}× |")
print(f"| python + gcc only | {g(tr, ['python','gcc']):.2f}× | {g(rr, ['python','gcc']):.2f}× |")
print(f"| the 9 bench programs only | {g(tr, order[:9]):.2f}× | {g(rr, order[:9]):.2f}× |")
print()
print(f"runs={len(other)} other_pct median={st.median(other):.1f} max={max(other):.1f} noisy(>25)={len(noisy)}")
print(f"steal median={st.median(steal):.1f} max={max(steal):.1f}")
for n in noisy: print("  noisy:", n)
print("bad runs:", bad)
