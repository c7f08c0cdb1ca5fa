"""Turns the runs of bench/run.sh into the suite's report and charts.

    python3 bench/report.py RUNS.tsv RUNS.meta OUT

RUNS.tsv has one line per run (rep, workload, allocator, time_ms, wall_ms,
maxrss_kb, end_rss_kb, other_pct, status); RUNS.meta describes the machine,
the allocators and the workloads ("key<TAB>value" lines, see bench/run.sh).
Writes OUT.md (also printed on stdout) and, when gnuplot is installed,
OUT-time.svg and OUT-rss.svg.

Every ratio is the allocator's median over ebb's median for the same workload:
above 1.00, ebb is faster (or smaller). A summary ratio is the geometric mean
of the per-workload ratios, over the workloads where both allocators have at
least one successful run.
"""
import csv
import math
import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict

BASE = "ebb"
# Colours of the charts' bars, one per peer (ebb is the line at 1).
COLOURS = {"glibc": "#7f7f7f", "mimalloc": "#1f77b4", "jemalloc": "#2ca02c",
           "tcmalloc": "#d62728"}


def read_meta(path):
    meta = defaultdict(list)
    with open(path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            meta[key].append(value)
    return meta


def read_runs(path):
    """{(workload, allocator): [run dict, ...]} and the run list."""
    cells = defaultdict(list)
    with open(path) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            cells[(row["workload"], row["allocator"])].append(row)
    return cells


def num(s):
    return None if s in ("", "-", None) else float(s)


class Cell:
    """The runs of one (workload, allocator): medians and counts."""

    def __init__(self, runs, noisy_pct):
        ok = [r for r in runs if r["status"] == "ok"]
        self.runs = len(runs)
        self.ok = len(ok)
        self.noisy = sum(1 for r in ok if (num(r["other_pct"]) or 0) > noisy_pct)
        times = [num(r["time_ms"]) for r in ok]
        self.time = statistics.median(times) if ok else None
        self.tmin = min(times) if ok else None
        self.tmax = max(times) if ok else None
        self.rss = statistics.median([num(r["maxrss_kb"]) for r in ok]) if ok else None
        ends = [num(r["end_rss_kb"]) for r in ok if num(r["end_rss_kb"]) is not None]
        self.end = statistics.median(ends) if ends else None
        self.failures = [r["status"] for r in runs if r["status"] != "ok"]


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def geomean(values):
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def fmt(v, spec=".2f", none="n/a"):
    return none if v is None else format(v, spec)


def mib(kb):
    return None if kb is None else kb / 1024


class Report:
    def __init__(self, runs_path, meta_path):
        self.meta = read_meta(meta_path)
        self.noisy_pct = float(self.meta.get("noisy_pct", ["25"])[0])
        raw = read_runs(runs_path)
        self.workloads = [w.split("\t") for w in self.meta["workload"]]  # label, group, desc, cmd
        self.labels = [w[0] for w in self.workloads]
        seen = []
        for (_, a) in raw:
            if a not in seen:
                seen.append(a)
        # Report order: ebb, glibc, then the peers as the runner listed them.
        order = [a.split(":")[0] for a in self.meta["allocator"]]
        self.allocs = [a for a in order if a in seen] + [a for a in seen if a not in order]
        self.peers = [a for a in self.allocs if a != BASE]
        self.cell = {k: Cell(v, self.noisy_pct) for k, v in raw.items()}

    def get(self, w, a):
        return self.cell.get((w, a))

    def time_ratio(self, w, a):
        c, b = self.get(w, a), self.get(w, BASE)
        return ratio(c.time, b.time) if c and b else None

    def rss_ratio(self, w, a):
        c, b = self.get(w, a), self.get(w, BASE)
        return ratio(c.rss, b.rss) if c and b else None

    # ----------------------------------------------------------- sections

    def summary(self):
        out = ["## Summary", "",
               f"Geometric mean, over the workloads, of each allocator's median relative to {BASE}'s "
               f"(above 1.00: {BASE} is faster, resp. smaller):", "",
               "| allocator | time vs ebb | peak RSS vs ebb | workloads |", "|---|---:|---:|---:|"]
        lines = []
        for a in self.peers:
            t = [self.time_ratio(w, a) for w in self.labels]
            r = [self.rss_ratio(w, a) for w in self.labels]
            n = sum(1 for v in t if v is not None)
            gt, gr = geomean(t), geomean(r)
            out.append(f"| {a} | {fmt(gt)} | {fmt(gr)} | {n} |")
            lines.append(f"- **{a}**: time {fmt(gt)}x ebb's, peak RSS {fmt(gr)}x ebb's "
                         f"(geometric means over {n} workloads)")
        return out + [""] + lines + [""]

    def losses(self):
        """Where ebb is slower or bigger than the best peer, worst first."""
        out = ["## Where ebb is slower or bigger than the best peer", "",
               "Every workload where some peer's median beats ebb's; the factor is ebb's median over "
               "the best peer's. On this shared machine, factors below about 1.05 (time) are "
               "within the noise; RSS is steadier.", ""]
        for title, attr, unit, conv, fmt_v in (
                ("Time", "time", "ms", lambda v: v, ".1f"),
                ("Peak RSS", "rss", "MiB", mib, ".1f"),
                ("RSS at the end (frag: after the last round; seeds: after the idle wait)", "end",
                 "MiB", mib, ".1f")):
            rows = []
            for w in self.labels:
                e = self.get(w, BASE)
                if e is None or getattr(e, attr) is None:
                    continue
                best = None
                for a in self.peers:
                    c = self.get(w, a)
                    if c is None or getattr(c, attr) is None:
                        continue
                    if best is None or getattr(c, attr) < getattr(best[1], attr):
                        best = (a, c)
                if best is None or getattr(best[1], attr) >= getattr(e, attr):
                    continue
                ev, bv = getattr(e, attr), getattr(best[1], attr)
                rows.append((ev / bv if bv > 0 else math.inf, w, ev, best[0], bv))
            out.append(f"**{title}**" + ("" if rows else ": ebb is the best or equal on every workload"))
            out.append("")
            for factor, w, ev, a, bv in sorted(rows, reverse=True):
                out.append(f"- {w}: ebb {format(conv(ev), fmt_v)} {unit}, best is {a} "
                           f"{format(conv(bv), fmt_v)} {unit}: ebb is {factor:.2f}x")
            out.append("")
        return out

    def matrix(self, title, fn, explain):
        out = [f"## {title}", "", explain, ""]
        out.append("| workload | " + " | ".join(self.allocs) + " |")
        out.append("|---|" + "---:|" * len(self.allocs))
        for w in self.labels:
            out.append(f"| {w} | " + " | ".join(fmt(fn(w, a)) for a in self.allocs) + " |")
        return out + [""]

    def per_workload(self):
        out = ["## Per workload", "",
               "Median time (ms) and its min–max over the repetitions; peak RSS (MiB, median); "
               "end RSS where the workload measures one; runs that succeeded out of those made, "
               f"and (in brackets) how many were noisy (others above {self.noisy_pct:.0f}% of a CPU).", ""]
        for label, group, desc, cmd in self.workloads:
            out += [f"### {label}", "", f"{desc} — `{cmd}`", "",
                    "| allocator | time ms | min–max ms | vs ebb | peak RSS MiB | vs ebb | end RSS MiB | runs (noisy) |",
                    "|---|---:|---:|---:|---:|---:|---:|---:|"]
            for a in self.allocs:
                c = self.get(label, a)
                if c is None:
                    continue
                if c.ok == 0:
                    out.append(f"| {a} | failed | | | | | | 0/{c.runs} |")
                    continue
                out.append(f"| {a} | {c.time:.1f} | {c.tmin:.1f}–{c.tmax:.1f} | "
                           f"{fmt(self.time_ratio(label, a))} | {mib(c.rss):.1f} | "
                           f"{fmt(self.rss_ratio(label, a))} | {fmt(mib(c.end), '.1f', '-')} | "
                           f"{c.ok}/{c.runs} ({c.noisy}) |")
            out.append("")
        return out

    def failures(self):
        rows = [f"- {w}, {a}: {s}" for (w, a), c in self.cell.items() for s in c.failures]
        if not rows:
            return []
        return [f"## Failed runs ({len(rows)})", ""] + rows + [""]

    def header(self, charts):
        m = self.meta
        out = [f"# {m['title'][0]}", ""]
        out.append(f"- mode: {m['mode'][0]}")
        out.append(f"- noise: {m['noise'][0]}")
        out += [f"- {x}" for x in m["machine"]]
        out.append("- time: each workload program's own timing of its work (process start and exit, "
                   "and the seeds' idle wait, excluded); python, gcc, clang: the process's wall time. "
                   "Peak RSS: the process's maximum resident set (wait4 ru_maxrss; for gcc the largest of "
                   "the driver, cc1 and as)")
        out.append("- allocators:")
        out += [f"  - {a}" for a in m["allocator"]]
        out.append("")
        if charts:
            out += ["Median time and peak RSS of each allocator relative to ebb, per workload "
                    "(log scale; a bar to the right of 1 means ebb is faster / smaller):", ""]
            out += [f"![time relative to ebb]({os.path.basename(charts[0])})", "",
                    f"![peak RSS relative to ebb]({os.path.basename(charts[1])})", ""]
        return out

    def markdown(self, charts):
        out = self.header(charts) + self.summary() + self.losses()
        out += self.matrix("Time relative to ebb", self.time_ratio,
                           "Median time / ebb's median time, per workload: above 1.00, ebb is faster.")
        out += self.matrix("Peak RSS relative to ebb", self.rss_ratio,
                           "Median peak RSS / ebb's, per workload: above 1.00, ebb uses less memory.")
        out += self.per_workload() + self.failures()
        return "\n".join(out)

    # ------------------------------------------------------------- charts

    def chart(self, path, fn, title):
        """A horizontal bar chart, one group of bars (the peers) per workload,
        each bar drawn from 1 (ebb) to the peer's ratio, on a log axis."""
        group = len(self.peers) + 1.5
        data = path + ".dat"
        values = []
        with open(data, "w") as f:
            for j, a in enumerate(self.peers):
                f.write(f"# {a}\n")
                for i, w in enumerate(self.labels):
                    r = fn(w, a)
                    if r is None:
                        continue
                    values.append(r)
                    y = i * group + j
                    f.write(f"{r:.4f} {y} 1 {r:.4f} {y - 0.42} {y + 0.42}\n")
                f.write("\n\n")
        if not values:
            return False
        lo = max(min(min(values), 1) / 1.25, 1 / 64)
        hi = min(max(max(values), 1) * 1.25, 64)
        ytics = ", ".join(f'"{w}" {i * group + (len(self.peers) - 1) / 2:.2f}'
                          for i, w in enumerate(self.labels))
        height = 140 + int(len(self.labels) * group * 9)
        plots = ", ".join(
            f"'{data}' index {j} using 1:2:3:4:5:6 with boxxyerrorbars "
            f"fillstyle solid 0.85 noborder lc rgb '{COLOURS.get(a, '#9467bd')}' title '{a}'"
            for j, a in enumerate(self.peers))
        script = f"""
set terminal svg size 900,{height} font 'sans,11' background rgb 'white'
set output '{path}'
set title "{title}" noenhanced
set logscale x 2
set xrange [{lo}:{hi}]
set format x "%gx"
set grid xtics lc rgb '#dddddd'
set yrange [{len(self.labels) * group - 0.5}:-1]
set ytics ({ytics}) noenhanced scale 0
set key outside top center horizontal
set arrow from 1, graph 0 to 1, graph 1 nohead lc rgb 'black' lw 1.5
set xlabel "allocator's median / ebb's median (log scale; the black line, 1, is ebb)"
plot {plots}
"""
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True)
        finally:
            os.remove(data)
        return True


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: report.py RUNS.tsv RUNS.meta OUT")
    runs, meta, out = sys.argv[1:]
    rep = Report(runs, meta)
    charts = None
    if shutil.which("gnuplot") is None:
        print("report.py: gnuplot not installed, no charts (apt-get install -y gnuplot-nox)",
              file=sys.stderr)
    else:
        time_svg, rss_svg = out + "-time.svg", out + "-rss.svg"
        ok = rep.chart(time_svg, rep.time_ratio,
                       "Median time relative to ebb (right of 1: ebb is faster)")
        ok = rep.chart(rss_svg, rep.rss_ratio,
                       "Peak RSS relative to ebb (right of 1: ebb uses less)") and ok
        charts = (time_svg, rss_svg) if ok else None
    text = rep.markdown(charts)
    with open(out + ".md", "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
