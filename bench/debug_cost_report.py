#!/usr/bin/env python3
# bench/debug_cost_report.py — the tables of a bench/debug_cost.sh run:
#   python3 bench/debug_cost_report.py RAW_DIR/t1.tsv
# t1.tsv: rep, workload, ver, mode, ms, malloc=, measure's line.
# Derived from 30d's an.py: time = program's ms= for bench programs, measure's wall_ms
# for python and gcc; peak RSS = maxrss_kb; ratios are ratios of medians.
import sys, statistics as st, math
from collections import defaultdict
import os
if len(sys.argv) != 2 or not os.path.isfile(sys.argv[1]):
    sys.exit("usage: debug_cost_report.py RAW_DIR/t1.tsv  (a file bench/debug_cost.sh wrote)")
f = sys.argv[1]
order = "pair-64 pair-1024 rand-8-1k rand-1k-64k larson-2t xmalloc-2t frag realloc-str large python gcc".split()
T = defaultdict(list); R = defaultdict(list); P = defaultdict(dict)
other = []; steal = []; noisy = []; bad = []
for line in open(f):
    rep, w, v, m, ms, mal, res = line.rstrip("\n").split("\t")
    kv = dict(x.split("=", 1) for x in res.split())
    t = float(kv["wall_ms"]) if w in ("python", "gcc") else float(ms)
    T[w, v, m].append(t); R[w, v, m].append(int(kv["maxrss_kb"]) / 1024); P[w][rep, v, m] = t
    o = float(kv["other_pct"]); other.append(o); steal.append(float(kv["steal_pct"]))
    if o > 25: noisy.append((rep, w, v, m, t, o, float(kv["steal_pct"])))
    if kv["status"] != "exit:0" or (w != "gcc" and mal != "malloc=libebb.so"): bad.append(line)
def fmt(x): return f"{x:.0f}" if x >= 1000 else f"{x:.1f}"
def cell(v): return f"{fmt(st.median(v))} ({fmt(min(v))}–{fmt(max(v))})"
def rx(r): return f"{r:.0f}×" if r >= 100 else f"{r:.1f}×" if r >= 10 else f"{r:.2f}×"
med = lambda w, v, m: st.median(T[w, v, m])
ro = {}; rn = {}; nd = {}; nr = {}; rss = {}
print("Time, ms: median (min–max) of 5")
print()
print("| workload | OLD release | OLD debug | NEW release | NEW debug | OLD debug/release | NEW debug/release | NEW debug / OLD debug | NEW release / OLD release (control) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for w in order:
    for v in ("old", "new"):
        for m in "01": assert len(T[w, v, m]) == 5, (w, v, m)
    ro[w] = med(w, "old", "1") / med(w, "old", "0")
    rn[w] = med(w, "new", "1") / med(w, "new", "0")
    nd[w] = med(w, "new", "1") / med(w, "old", "1")
    nr[w] = med(w, "new", "0") / med(w, "old", "0")
    print(f"| {w} | {cell(T[w,'old','0'])} | {cell(T[w,'old','1'])} | {cell(T[w,'new','0'])} | {cell(T[w,'new','1'])} "
          f"| {rx(ro[w])} | **{rx(rn[w])}** | **{nd[w]:.3f}** | {nr[w]:.3f} |")
g = lambda d, ks: math.exp(sum(math.log(d[k]) for k in ks) / len(ks))
print()
print("| geometric mean | OLD debug/release | NEW debug/release | NEW debug / OLD debug | NEW release / OLD release |")
print("|---|---:|---:|---:|---:|")
for lab, ks in (("all 11 workloads", order), ("python + gcc only", ["python", "gcc"]), ("the 9 bench programs only", order[:9])):
    print(f"| {lab} | {g(ro, ks):.2f}× | **{g(rn, ks):.2f}×** | **{g(nd, ks):.3f}** | {g(nr, ks):.3f} |")
print()
print("Peak RSS, MiB: median (min–max) of 5")
print()
print("| workload | OLD release | NEW release | OLD debug | NEW debug | NEW debug / OLD debug | OLD debug/release | NEW debug/release |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
rro = {}; rrn = {}; rnd = {}
def rc(v): return f"{st.median(v):.1f} ({min(v):.1f}–{max(v):.1f})"
for w in order:
    a = lambda v, m: st.median(R[w, v, m])
    rro[w] = a("old", "1") / a("old", "0"); rrn[w] = a("new", "1") / a("new", "0"); rnd[w] = a("new", "1") / a("old", "1")
    print(f"| {w} | {rc(R[w,'old','0'])} | {rc(R[w,'new','0'])} | {rc(R[w,'old','1'])} | {rc(R[w,'new','1'])} | {rnd[w]:.3f} | {rro[w]:.2f} | {rrn[w]:.2f} |")
print()
print("| geometric mean | NEW debug / OLD debug RSS | OLD RSS ratio | NEW RSS ratio |\n|---|---:|---:|---:|")
for lab, ks in (("all 11", order), ("python + gcc", ["python", "gcc"]), ("9 bench programs", order[:9])):
    print(f"| {lab} | {g(rnd, ks):.3f} | {g(rro, ks):.2f}× | {g(rrn, ks):.2f}× |")
print()
print("Paired (same rep) NEW debug / OLD debug and per-commit debug/release: median (min–max)")
print()
print("| workload | NEW dbg / OLD dbg | OLD dbg/rel | NEW dbg/rel | NEW rel / OLD rel |\n|---|---:|---:|---:|---:|")
def pr(w, a, b):
    x = [P[w][str(r), *a] / P[w][str(r), *b] for r in range(1, 6)]
    d = 3 if a[1] == b[1] else 2 if st.median(x) < 5 else 1  # NEW/OLD: 3 decimals; dbg/rel: 2 or 1
    return f"{st.median(x):.{d}f} ({min(x):.{d}f}–{max(x):.{d}f})"
for w in order:
    print(f"| {w} | {pr(w, ('new','1'), ('old','1'))} | {pr(w, ('old','1'), ('old','0'))} | {pr(w, ('new','1'), ('new','0'))} | {pr(w, ('new','0'), ('old','0'))} |")
print()
print(f"runs={len(other)} other_pct median={st.median(other):.1f} max={max(other):.1f} noisy(>25)={len(noisy)}")
print(f"steal median={st.median(steal):.1f} max={max(steal):.1f} runs with steal>3.2: {sum(s > 3.2 for s in steal)}")
for n in noisy: print("  noisy (rep, workload, ver, mode, ms, other_pct, steal_pct):", n)
print("bad runs:", bad)
