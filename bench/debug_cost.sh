#!/bin/bash
# bench/debug_cost.sh — debug mode's cost against release, two ebb commits side by side.
#
#   bash bench/debug_cost.sh OLD_WORKTREE NEW_WORKTREE RAW_DIR
#
# Each worktree is a checkout with `make lib bench-build` done and
# build/bench/compile-30.c made (python3 bench/programs/gen_c.py 30 >
# build/bench/compile-30.c). The 11 workloads of bench/debug_workloads.sh x 4
# configurations (OLD/NEW x release/debug), one unrecorded warm-up rep and 5
# timed reps; the order of the 4 configurations rotates by (rep + workload) % 4. Commands run from the NEW
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
# shellcheck source=bench/debug_workloads.sh
source "$(dirname "${BASH_SOURCE[0]}")/debug_workloads.sh"
for w in "$OLD" "$NEW"; do
	for f in "${debug_workload_files[@]}"; do
		[ -e "$w/$f" ] || { echo "$0: $w/$f is missing: build it (make lib bench-build; compile-30.c from bench/programs/gen_c.py 30)" >&2; exit 2; }
	done
done
OUT_NAME=${SET:-t1}
[ ! -e "$3/$OUT_NAME.tsv" ] || { echo "$0: $3/$OUT_NAME.tsv exists: choose another RAW_DIR or SET" >&2; exit 2; }
mkdir -p "$3" && RAW=$(cd "$3" && pwd) || exit 2
cd "$NEW" || exit 1
OUT=$RAW/$OUT_NAME.tsv
declare -A WT=([old]=$OLD [new]=$NEW)
configs=("old 0" "old 1" "new 0" "new 1")
run() { # rep i ver mode
	local w=${WT[$3]}
	debug_workload_run "$OUT" "$RAW/stdout-extra-$OUT_NAME.txt" "$1" "$2" "$3" "$4" \
		"$w/build/bench/measure" -- EBB_DEBUG="$4" EBB_DEBUG_LEAKS=off LD_PRELOAD="$w/build/libebb.so"
}
: > $OUT
echo "start $(date -u +%H:%M:%S) $(uptime)" > $RAW/uptime-$OUT_NAME.txt
for rep in 0 1 2 3 4 5; do
	[ $rep = 1 ] && echo "warm-up done $(date -u +%H:%M:%S) $(uptime)" >> $RAW/uptime-$OUT_NAME.txt
	for i in "${!names[@]}"; do
		k=$(( (rep + i) % 4 ))
		for j in 0 1 2 3; do run $rep $i ${configs[$(( (k + j) % 4 ))]}; done
	done
done
echo "end $(date -u +%H:%M:%S) $(uptime)" >> $RAW/uptime-$OUT_NAME.txt
