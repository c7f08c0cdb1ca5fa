#!/usr/bin/env python3
# bench/debug_vs_asan_report.py — the tables of a bench/debug_vs_asan.sh run:
#   python3 bench/debug_vs_asan_report.py RAW_DIR/t1.tsv
# Time = the program's ms= for bench programs, measure's wall_ms for python and
# gcc; peak RSS = maxrss_kb; ratios are ratios of medians.
import math
import os
import statistics as st
import sys
from collections import defaultdict

if len(sys.argv) != 2 or not os.path.isfile(sys.argv[1]):
    sys.exit("usage: debug_vs_asan_report.py RAW_DIR/t1.tsv  (a file bench/debug_vs_asan.sh wrote)")
order = "pair-64 pair-1024 rand-8-1k rand-1k-64k larson-2t xmalloc-2t frag realloc-str large python gcc".split()
cfgs = [("glibc", "-"), ("asan", "-"), ("ebb", "0"), ("ebb", "1")]
want = {"asan": "malloc=libclang_rt.asan-x86_64.so", "ebb": "malloc=libebb.so"}
T = defaultdict(list); R = defaultdict(list); noisy = 0; bad = []; n = 0
for line in open(sys.argv[1]):
    rep, w, c, m, ms, mal, res = line.rstrip("\n").split("\t")
    kv = dict(x.split("=", 1) for x in res.split())
    T[w, c, m].append(float(kv["wall_ms"]) if w in ("python", "gcc") else float(ms))
    R[w, c, m].append(int(kv["maxrss_kb"]) / 1024)
    n += 1
    noisy += float(kv["other_pct"]) > 25
    if kv["status"] != "exit:0" or (w != "gcc" and c in want and mal != want[c]):
        bad.append(line.rstrip())
fmt = lambda x: f"{x:.0f}" if x >= 1000 else f"{x:.1f}"
cell = lambda v: f"{fmt(st.median(v))} ({fmt(min(v))}–{fmt(max(v))})"
rx = lambda r: f"{r:.0f}×" if r >= 100 else f"{r:.1f}×" if r >= 10 else f"{r:.2f}×"
med = lambda d, w, c, m: st.median(d[w, c, m])
geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
for name, d, unit in (("Time, ms", T, "time"), ("Peak RSS, MiB", R, "rss")):
    print(f"{name}: median (min–max) of 5\n")
    print("| workload | glibc | ASan | ebb release | ebb debug | ebb debug / ebb release | ASan / glibc | ebb debug / ASan |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ratios = defaultdict(list)
    for w in order:
        for c, m in cfgs:
            assert len(d[w, c, m]) == 5, (w, c, m, len(d[w, c, m]))
        a = med(d, w, "ebb", "1") / med(d, w, "ebb", "0")
        b = med(d, w, "asan", "-") / med(d, w, "glibc", "-")
        e = med(d, w, "ebb", "1") / med(d, w, "asan", "-")
        for k, v in (("a", a), ("b", b), ("e", e)):
            ratios[k].append(v)
        print(f"| {w} | " + " | ".join(cell(d[w, c, m]) for c, m in cfgs) + f" | {rx(a)} | {rx(b)} | {e:.2f} |")
    print(f"| geometric mean, all 11 | | | | | {rx(geo(ratios['a']))} | {rx(geo(ratios['b']))} | {geo(ratios['e']):.2f} |")
    print(f"| geometric mean, python + gcc | | | | | {rx(geo(ratios['a'][-2:]))} | {rx(geo(ratios['b'][-2:]))} | {geo(ratios['e'][-2:]):.2f} |")
    print()
print(f"{n} runs; {noisy} noisy (other processes above 25% of a CPU).")
if bad:
    print("Runs that failed or ran another allocator:")
    for line in bad:
        print("    " + line)
