#!/usr/bin/env bash
# real_peaks.sh — peak RSS and time of two real programs under each allocator:
# sqlite3 :memory: (300,000 rows of mixed text and blobs, two indexes, a few
# queries, an update and a delete) and jq over a generated 91 MiB JSON array
# (300,000 objects). docs/memory-return.md, "real programs' peaks against
# glibc", has the figures and what explains them.
#
#   bash bench/programs/real_peaks.sh [REPS]      (default 5; needs sqlite3, jq)
#   EBB_LIB=path/to/libebb.so   another ebb build (default build/libebb.so)
#   ALLOCS="glibc ebb ..."      a subset of: glibc ebb mimalloc jemalloc tcmalloc
#
# Prints one line per run (allocator, workload, peak RSS in KiB from
# /usr/bin/time's %M, elapsed s), then medians. Runs alternate allocators
# within each repetition.
set -euo pipefail
REPS=${1:-5}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
EBB_LIB=${EBB_LIB:-$ROOT/build/libebb.so}
export -n EBB_LIB # ebb warns of EBB_ variables it does not know
ALLOCS=${ALLOCS:-glibc ebb mimalloc jemalloc tcmalloc}
LIBDIR=/usr/lib/x86_64-linux-gnu
PYTHON=/usr/bin/python3
for tool in sqlite3 jq /usr/bin/time "$PYTHON"; do
	command -v "$tool" >/dev/null || { echo "real_peaks.sh: $tool is needed (apt-get install -y sqlite3 jq time python3)" >&2; exit 2; }
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/sq.sql" <<'SQL'
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, val REAL, data BLOB, note TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<300000)
INSERT INTO t SELECT x, 'name-'||hex(randomblob(8+x%20)), random()/1e9, randomblob(20+x%200),
  substr('lorem ipsum dolor sit amet consectetur adipiscing elit', 1+x%30) FROM c;
CREATE INDEX ti ON t(name);
CREATE INDEX tv ON t(val);
SELECT count(*), sum(length(data)) FROM t WHERE name LIKE 'name-A%';
SELECT note, count(*), avg(val) FROM t GROUP BY note ORDER BY 2 DESC LIMIT 3;
SELECT a.id FROM t a JOIN t b ON a.id=b.id+1 WHERE a.val>b.val ORDER BY a.name LIMIT 1 OFFSET 1000;
UPDATE t SET note = note || '-upd' WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
SELECT count(*) FROM t;
SQL
"$PYTHON" - "$WORK/big.json" <<'PY'
import json, random, sys
random.seed(1)
with open(sys.argv[1], 'w') as out:
    out.write('[')
    for i in range(300000):
        if i:
            out.write(',')
        out.write(json.dumps({
            "id": i, "name": "user%d" % random.randrange(10**6),
            "tags": [random.choice("abcdefgh") * random.randrange(1, 12) for _ in range(random.randrange(0, 6))],
            "score": random.random() * 100, "active": random.random() < 0.5,
            "addr": {"city": "c%d" % random.randrange(1000), "zip": "%05d" % random.randrange(100000),
                     "geo": [random.random(), random.random()]},
            "bio": "x" * random.randrange(0, 200)}))
    out.write(']')
PY

preload() {
	case $1 in
	glibc) echo "" ;;
	ebb) echo "$EBB_LIB" ;;
	mimalloc) echo "$LIBDIR/libmimalloc.so.2" ;;
	jemalloc) echo "$LIBDIR/libjemalloc.so.2" ;;
	tcmalloc) echo "$LIBDIR/libtcmalloc_minimal.so.4" ;;
	esac
}
run() { # allocator workload
	local lib; lib=$(preload "$1")
	case $2 in
	sqlite) LD_PRELOAD=$lib /usr/bin/time -f "%M %e" -o "$WORK/t" sqlite3 :memory: <"$WORK/sq.sql" >/dev/null ;;
	jq) LD_PRELOAD=$lib /usr/bin/time -f "%M %e" -o "$WORK/t" \
		jq -c '[.[]|select(.active)|{id,name,n:(.tags|length)}]|length' <"$WORK/big.json" >/dev/null ;;
	esac
	echo "$1 $2 $(cat "$WORK/t")"
}
for ((r = 0; r < REPS; r++)); do
	for w in sqlite jq; do
		for a in $ALLOCS; do run "$a" "$w"; done
	done
done | tee "$WORK/runs"
echo "medians: allocator workload peak_kb seconds"
"$PYTHON" - "$WORK/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    a, w, kb, s = line.split()
    runs.setdefault((w, a), []).append((int(kb), float(s)))
for (w, a), xs in sorted(runs.items()):
    print(a, w, int(statistics.median(x[0] for x in xs)), round(statistics.median(x[1] for x in xs), 2))
PY
