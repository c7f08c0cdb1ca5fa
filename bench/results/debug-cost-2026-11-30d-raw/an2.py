#!/usr/bin/env python3
# Per-rep paired ratios (debug/release in the same rep) and pooled A+B medians.
import sys, statistics as st, math
from collections import defaultdict
order = "pair-64 pair-1024 rand-8-1k rand-1k-64k larson-2t xmalloc-2t frag realloc-str large python gcc".split()
def load(f):
    T = defaultdict(dict); R = defaultdict(list)
    for line in open(f):
        rep, w, m, ms, mal, res = line.rstrip("\n").split("\t")
        kv = dict(x.split("=", 1) for x in res.split())
        t = float(kv["wall_ms"]) if w in ("python", "gcc") else float(ms)
        T[w][rep, m] = t; R[w, m].append(int(kv["maxrss_kb"]))
    return T, R
for f in sys.argv[1:]:
    T, _ = load(f); print(f)
    for w in order:
        pr = [T[w][str(r), "1"] / T[w][str(r), "0"] for r in range(1, 6)]
        print(f"  {w:12s} paired ratio median {st.median(pr):.2f} (min {min(pr):.2f} max {max(pr):.2f})")
if len(sys.argv) < 3: sys.exit(0)  # 30d: one set only, no pooling
(TA, RA), (TB, RB) = load(sys.argv[1]), load(sys.argv[2])
tr = {}; rr = {}
for w in order:
    d = [v for (r, m), v in list(TA[w].items()) + list(TB[w].items()) if m == "1"]
    s = [v for (r, m), v in list(TA[w].items()) + list(TB[w].items()) if m == "0"]
    tr[w] = st.median(d) / st.median(s)
    rr[w] = st.median(RA[w, "1"] + RB[w, "1"]) / st.median(RA[w, "0"] + RB[w, "0"])
    print(f"pooled {w:12s} rel {st.median(s):8.1f} dbg {st.median(d):8.1f} ratio {tr[w]:.2f} rss {rr[w]:.2f}")
g = lambda d, ks: math.exp(sum(math.log(d[k]) for k in ks) / len(ks))
print(f"pooled geomean all {g(tr, order):.2f} py+gcc {g(tr, ['python','gcc']):.2f} rss {g(rr, order):.2f}")
