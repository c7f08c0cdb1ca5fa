#!/usr/bin/env bash
# bench/callgrind.sh — instructions executed per malloc/free pair on the
# single-thread hot paths, counted by callgrind: a repeatable measure of
# fast-path work, immune to machine noise.
#
#   bash bench/callgrind.sh          (or `make bench-callgrind`)
#
# For each allocator (default: ebb and mimalloc) and each case (default: pair
# 64, pair 1024, rand 8 1024), runs `bench_core CASE 200000` under
# `valgrind --tool=callgrind` with the allocator preloaded, collecting only
# inside the case's timed loop, bench_pair_loop or bench_rand_loop (prefill,
# start-up and exit are not counted). Reports per pair: the Ir spent in
# the allocator (everything the loop calls: malloc, free and what they call),
# split into malloc and free, and the loop's own Ir (the harness: the same for
# every allocator). Instruction counts are not time (no cache misses, no
# branch mispredictions, no atomics cost), but they move only when code does.
#
# Environment:
#   CG_ALLOCATORS="ebb mimalloc"   any of: ebb glibc mimalloc jemalloc tcmalloc
#   CG_CASES="pair 64,pair 1024,rand 8 1024"   bench_core cases, comma-separated
#   CG_N=200000                    pairs per run
#   BENCH_BUILD, EBB_LIB, BENCH_SKIP_MISSING   as for bench/run.sh (bench/lib.sh)
#
# Output: a markdown table on stdout and in bench/results/callgrind-<date>.md.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init callgrind.sh
bench_need_build
BIN=$BENCH_BUILD/bench_core
ALLOCATORS=${CG_ALLOCATORS:-ebb mimalloc}
CASES=${CG_CASES:-pair 64,pair 1024,rand 8 1024}
N=${CG_N:-200000}

if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
	bench_die "valgrind not found; install it with: apt-get install -y valgrind"
fi
# shellcheck disable=SC2086  # ALLOCATORS is a word list on purpose
alloc_discover $ALLOCATORS

# loop_costs FILE LOOP: from `callgrind_annotate --tree=calling`, the block of
# the function LOOP: its
# self Ir (the `*` line) and each callee's inclusive Ir and call count (`>`
# lines). Prints "self S" then "callee IR CALLS NAME" lines.
loop_costs() {
	callgrind_annotate --tree=calling --threshold=100 "$1" | awk -v loop="$2" '
		function num(s) { gsub(/[,()x]/, "", s); return s + 0 }
		/^ *[0-9,]+ .*\* / && index($0, ":" loop " ") { inblock = 1; print "self", num($1); next }
		inblock && /^ *$/ { inblock = 0 }
		inblock && / > / {
			name = ""; calls = 0
			for (i = 1; i <= NF; i++) {
				if ($i == ">") name = $(i + 1)
				if ($i ~ /^\([0-9,]+x\)$/) calls = num($i)
			}
			sub(/^.*:/, "", name)
			print "callee", num($1), calls, name
		}'
}

rows=()
printf 'callgrind: bench_core CASE %s, collecting in the case loop only\n' "$N" >&2
IFS=, read -r -a CASE_LIST <<<"$CASES"
for ((a = 0; a < NA; a++)); do
	alloc=${A_NAME[a]} preload=${A_PRELOAD[a]}
	for case in "${CASE_LIST[@]}"; do
		loop=bench_${case%% *}_loop
		out=$SCRATCH/cg.$alloc.${case// /_}
		printf '  %-9s %-12s ... ' "$alloc" "$case" >&2
		# shellcheck disable=SC2086  # the case is a word list on purpose
		if ! env -u LD_PRELOAD ${preload:+LD_PRELOAD="$preload"} \
		     valgrind --tool=callgrind --callgrind-out-file="$out" \
		              --toggle-collect="$loop" \
		              "$BIN" $case "$N" >"$SCRATCH/stdout" 2>"$SCRATCH/stderr"; then
			echo "failed" >&2
			tail -n 20 "$SCRATCH/stderr" >&2
			rows+=("| $alloc | $case | failed | | | | |")
			continue
		fi
		want=libc.so.6
		[[ -n $preload ]] && want=$(basename "$preload")
		if ! grep -q " malloc=$want\$" "$SCRATCH/stdout"; then
			echo "malloc did not come from $want: $(cat "$SCRATCH/stdout")" >&2
			rows+=("| $alloc | $case | preload failed | | | | |")
			continue
		fi
		# Ir per pair: total in the loop, the loop's own, malloc's, free's.
		row=$(loop_costs "$out" "$loop" | awk -v n="$N" -v a="$alloc" -v s="$case" '
			$1 == "self" { self = $2; next }
			$1 == "callee" {
				total += $2
				if ($4 ~ /free/) { fr += $2; frn = frn " " $4 }
				else if ($4 ~ /alloc/) { ma += $2; man = man " " $4 }
				else other += $2
			}
			END {
				printf "| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
				       a, s, total / n, ma / n, fr / n, other / n, self / n
			}')
		rows+=("$row")
		echo "done" >&2
	done
done

report() {
	echo "# ebb fast-path instruction counts (callgrind), $(date '+%Y-%m-%d %H:%M %Z')"
	echo
	echo "- \`bench_core CASE $N\`, Ir collected only inside the case's loop (bench_pair_loop," \
	     "bench_rand_loop); per pair = / $N"
	echo "- $(valgrind --version); kernel $(uname -r)"
	echo "- allocators:"
	alloc_describe
	echo "- allocator Ir = everything the loop calls (malloc, free and their callees);"
	echo "  other = calls that are neither (e.g. the loader's lazy binding, once);"
	echo "  harness = the loop's own instructions, equal for every allocator"
	echo
	echo "| allocator | case | allocator Ir/pair | malloc | free | other | harness Ir/pair |"
	echo "|---|---|---:|---:|---:|---:|---:|"
	printf '%s\n' "${rows[@]}"
}

mkdir -p bench/results
REPORT=bench/results/callgrind-$(date '+%Y-%m-%d-%H%M').md
report | tee "$REPORT"
echo "report written to $REPORT" >&2
