#!/bin/bash
# Section 1 driver: 11 workloads x 2 modes, 1 warm-up + 5 interleaved reps.
cd /work/wt-dbg4 || exit 1
RAW=bench/results/debug-cost-2026-11-30d-raw
OUT=$RAW/${SET:-t1}.tsv
LIB=$PWD/build/libebb.so
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
run() { # rep i mode
	local rep=$1 i=$2 mode=$3 res=/tmp/dbg4-res.$$ so=/tmp/dbg4-out.$$
	env -u LD_PRELOAD EBB_DEBUG=$mode EBB_DEBUG_LEAKS=off LD_PRELOAD=$LIB \
		build/bench/measure -t 120 -o $res -- ${cmds[$i]} >$so 2>&1
	local ms mal
	ms=$(grep -o 'ms=[0-9.]*' $so | grep -v maxrss | head -1 | cut -d= -f2)
	mal=$(grep -o 'malloc=[^ ]*' $so | head -1)
	[ "$rep" = "0" ] && return
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "${names[$i]}" "$mode" "${ms:--}" "${mal:--}" "$(cat $res)" >> $OUT
	grep -qv 'ms=\|^$' $so && { echo "== rep $rep ${names[$i]} mode $mode" ; cat $so; } >> $RAW/stdout-extra-${SET:-t1}.txt
}
: > $OUT
echo "start $(date -u +%H:%M:%S) $(uptime)" > $RAW/uptime-${SET:-t1}.txt
for i in "${!names[@]}"; do run 0 $i 0; run 0 $i 1; done
echo "warm-up done $(date -u +%H:%M:%S) $(uptime)" >> $RAW/uptime-${SET:-t1}.txt
for rep in 1 2 3 4 5; do
	for i in "${!names[@]}"; do
		if (( (rep + i) % 2 == 1 )); then order="1 0"; else order="0 1"; fi
		for m in $order; do run $rep $i $m; done
	done
done
echo "end $(date -u +%H:%M:%S) $(uptime)" >> $RAW/uptime-${SET:-t1}.txt
