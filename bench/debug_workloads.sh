# bench/debug_workloads.sh — sourced by bench/debug_cost.sh and
# bench/debug_vs_asan.sh: the eleven workloads debug mode's cost is measured
# on, as commands run from a worktree with `make lib bench-build` done and
# build/bench/compile-30.c made (python3 bench/programs/gen_c.py 30 >
# build/bench/compile-30.c).
#
# The reports take a bench program's own ms= as its time, and measure's
# wall_ms for python and gcc.
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
# The files each worktree must have.
debug_workload_files=(build/libebb.so build/bench/measure build/bench/compile-30.c
	build/bench/bench_core build/bench/bench_larson build/bench/bench_xmalloc
	build/bench/bench_frag build/bench/bench_realloc build/bench/bench_large)

# debug_workload_run OUT EXTRA REP I VER MODE MEASURE -- ENV...: runs workload I
# under `env -u LD_PRELOAD ENV...` through MEASURE and appends to OUT a line
# of rep, workload, VER, MODE, the program's ms=, its malloc= and measure's
# line; output other than the ms= line goes to EXTRA. Rep 0 (the warm-up) is
# run and not recorded.
debug_workload_run() {
	local out=$1 extra=$2 rep=$3 i=$4 ver=$5 mode=$6 measure=$7
	shift 8
	local res so ms mal
	res=$(mktemp) && so=$(mktemp) || return 1
	env -u LD_PRELOAD "$@" "$measure" -t 120 -o "$res" -- ${cmds[$i]} >"$so" 2>&1
	ms=$(grep -o 'ms=[0-9.]*' "$so" | grep -v maxrss | head -1 | cut -d= -f2)
	mal=$(grep -o 'malloc=[^ ]*' "$so" | head -1)
	if [ "$rep" != 0 ]; then
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "${names[$i]}" "$ver" "$mode" "${ms:--}" \
			"${mal:--}" "$(cat "$res")" >>"$out"
		grep -qv 'ms=\|^$' "$so" && { echo "== rep $rep ${names[$i]} $ver mode $mode"; cat "$so"; } >>"$extra"
	fi
	rm -f "$res" "$so"
}
