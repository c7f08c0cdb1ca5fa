#!/bin/bash
# bench/debug_cost.sh — debug mode's cost against release, two ebb commits side by side.
#
#   bash bench/debug_cost.sh OLD_WORKTREE NEW_WORKTREE RAW_DIR
#
# Each worktree is a checkout with `make lib bench-build` done and
# build/bench/compile-30.c made (python3 bench/programs/gen_c.py 30 >
# build/bench/compile-30.c). 11 workloads x 4 configurations (OLD/NEW x
# release/debug), one unrecorded warm-up rep and 5 timed reps; the order of the
# 4 configurations rotates by (rep + workload) % 4. Commands run from the NEW
# worktree, so relative paths (bench programs, compile-30.c, alloc_heavy.py)
# are NEW's for both; libebb.so and measure are each configuration's own.
# Writes RAW_DIR/t1.tsv (rep, workload, ver, mode, ms, malloc=, measure's
# line), RAW_DIR/uptime-t1.txt and any unexpected output in
# RAW_DIR/stdout-extra-t1.txt; bench/debug_cost_report.py RAW_DIR/t1.tsv
# prints the tables. The runs of 2026-11-30 to 2026-12-04 used copies of this
# script in their raw directories.
#
# SET (default t1) names the output files, so that a second run into the same
# RAW_DIR can sit beside the first; an existing RAW_DIR/$SET.tsv is never
# overwritten.
usage() { echo "usage: $0 OLD_WORKTREE NEW_WORKTREE RAW_DIR  (see the comment at its top)" >&2; exit 2; }
[ $# -eq 3 ] || usage
OLD=$(cd "$1" && pwd) || usage
NEW=$(cd "$2" && pwd) || usage
[ "$OLD" != "$NEW" ] || { echo "$0: OLD and NEW are the same worktree" >&2; exit 2; }
for w in "$OLD" "$NEW"; do
	for f in build/libebb.so build/bench/measure build/bench/compile-30.c build/bench/bench_core \
		build/bench/bench_larson build/bench/bench_xmalloc build/bench/bench_frag \
		build/bench/bench_realloc build/bench/bench_large; do
		[ -e "$w/$f" ] || { echo "$0: $w/$f is missing: build it (make lib bench-build; compile-30.c from bench/programs/gen_c.py 30)" >&2; exit 2; }
	done
done
OUT_NAME=${SET:-t1}
[ ! -e "$3/$OUT_NAME.tsv" ] || { echo "$0: $3/$OUT_NAME.tsv exists: choose another RAW_DIR or SET" >&2; exit 2; }
mkdir -p "$3" && RAW=$(cd "$3" && pwd) || exit 2
cd "$NEW" || exit 1
OUT=$RAW/$OUT_NAME.tsv
declare -A WT=([old]=$OLD [new]=$NEW)
names=(pair-64 pair-1024 rand-8-1k rand-1k-64k larson-2t xmalloc-2t frag realloc-str large python gcc)
cmds=(
"build/bench/bench_core pair 64 1000000"
"build/bench/bench_core pair 1024 1000000"
"build/bench/bench_core rand 8 1024 1000000"
"build/bench/bench_core rand 1024 65536 100000"
"build/bench/bench_larson 2 1000000"
"build/bench/bench_xmalloc 1 1000000"
"build/bench/bench_frag 12"
"build/bench/bench_realloc str 500000"
"build/bench/bench_large 600"
"env PYTHONMALLOC=malloc /usr/bin/python3 bench/programs/alloc_heavy.py 1"
"gcc -O2 -c build/bench/compile-30.c -o /dev/null"
)
configs=("old 0" "old 1" "new 0" "new 1")
run() { # rep i ver mode
	local rep=$1 i=$2 ver=$3 mode=$4 res=/tmp/dcost-res.$$ so=/tmp/dcost-out.$$
	local w=${WT[$ver]}
	env -u LD_PRELOAD EBB_DEBUG=$mode EBB_DEBUG_LEAKS=off LD_PRELOAD=$w/build/libebb.so \
		$w/build/bench/measure -t 120 -o $res -- ${cmds[$i]} >$so 2>&1
	local ms mal
	ms=$(grep -o 'ms=[0-9.]*' $so | grep -v maxrss | head -1 | cut -d= -f2)
	mal=$(grep -o 'malloc=[^ ]*' $so | head -1)
	[ "$rep" = "0" ] && return
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "${names[$i]}" "$ver" "$mode" "${ms:--}" "${mal:--}" "$(cat $res)" >> $OUT
	grep -qv 'ms=\|^$' $so && { echo "== rep $rep ${names[$i]} $ver mode $mode" ; cat $so; } >> $RAW/stdout-extra-${SET:-t1}.txt
}
: > $OUT
echo "start $(date -u +%H:%M:%S) $(uptime)" > $RAW/uptime-${SET:-t1}.txt
for rep in 0 1 2 3 4 5; do
	[ $rep = 1 ] && echo "warm-up done $(date -u +%H:%M:%S) $(uptime)" >> $RAW/uptime-${SET:-t1}.txt
	for i in "${!names[@]}"; do
		k=$(( (rep + i) % 4 ))
		for j in 0 1 2 3; do run $rep $i ${configs[$(( (k + j) % 4 ))]}; done
	done
done
echo "end $(date -u +%H:%M:%S) $(uptime)" >> $RAW/uptime-${SET:-t1}.txt
rm -f /tmp/dcost-res.$$ /tmp/dcost-out.$$
