#!/bin/bash
# 2026-12-04 (stop 33) driver: the 2026-12-04 task1.sh with only the paths changed (OLD=/tmp/dc-old 92de4ba,
# NEW=/tmp/dc-new c7da392; raw output under /work/main/bench/results/debug-cost-2026-12-04b-raw).
# 30e driver: 30d's task1.sh with two commits x two modes.
# 11 workloads x 4 configs (OLD/NEW x release/debug), 1 unrecorded warm-up + 5 reps.
# The order of the 4 configs rotates by (rep + workload) % 4.
# Commands run from the NEW worktree, so relative paths (bench programs, compile-30.c,
# alloc_heavy.py) are NEW's for both; libebb.so and measure are each config's own.
cd /tmp/dc-new || exit 1
RAW=/work/main/bench/results/debug-cost-2026-12-04b-raw
OUT=$RAW/${SET:-t1}.tsv
declare -A WT=([old]=/tmp/dc-old [new]=/tmp/dc-new)
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
