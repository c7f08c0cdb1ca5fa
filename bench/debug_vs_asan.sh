#!/bin/bash
# bench/debug_vs_asan.sh — ebb's debug mode beside AddressSanitizer's
# allocator, the debug allocator most C and C++ programmers know, on the
# eleven workloads of bench/debug_workloads.sh.
#
#   bash bench/debug_vs_asan.sh RAW_DIR
#
# Run from a worktree with `make lib bench-build` done and
# build/bench/compile-30.c made. Four configurations: glibc (nothing
# preloaded), ASan (clang's runtime preloaded into the same uninstrumented
# binaries, so only its allocator differs: it records the allocation's and
# the free's stack, keeps freed blocks in a quarantine, poisons them in its
# shadow memory, fills the first 4 KiB of new blocks; ASAN_OPTIONS
# detect_leaks=0, everything else at its default), ebb release and ebb debug
# (EBB_DEBUG_LEAKS=off: neither reports leaks). ASan's stack unwinder for
# malloc and free follows frame pointers: in programs built without them
# (Debian's python3 and gcc) its traces are short or wrong, so there it does
# less work than ebb's, which follows the unwind tables.
# One unrecorded warm-up rep and 5 timed reps, the order of the configurations
# rotated by (rep + workload) % 4. Writes RAW_DIR/t1.tsv (the format of
# bench/debug_cost.sh) and RAW_DIR/uptime-t1.txt; tables:
# python3 bench/debug_vs_asan_report.py RAW_DIR/t1.tsv
#
# ASAN_RUNTIME: the runtime's path (default: clang's, from libclang-rt-NN-dev).
usage() { echo "usage: $0 RAW_DIR  (see the comment at its top)" >&2; exit 2; }
[ $# -eq 1 ] || usage
# shellcheck source=bench/debug_workloads.sh
source "$(dirname "${BASH_SOURCE[0]}")/debug_workloads.sh"
for f in "${debug_workload_files[@]}"; do
	[ -e "$f" ] || { echo "$0: $f is missing: run from a worktree with make lib bench-build done (and compile-30.c)" >&2; exit 2; }
done
ASAN=${ASAN_RUNTIME:-$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.so 2>/dev/null | sort -V | tail -1)}
[ -n "$ASAN" ] && [ -e "$ASAN" ] || { echo "$0: no ASan runtime: apt-get install -y libclang-rt-14-dev, or set ASAN_RUNTIME" >&2; exit 2; }
[ ! -e "$1/t1.tsv" ] || { echo "$0: $1/t1.tsv exists: choose another RAW_DIR" >&2; exit 2; }
mkdir -p "$1" && RAW=$(cd "$1" && pwd) || exit 2
OUT=$RAW/t1.tsv
LIB=$PWD/build/libebb.so
configs=("glibc -" "asan -" "ebb 0" "ebb 1")
run() { # rep i config mode
	local env=()
	case $3 in
	glibc) env=() ;;
	asan) env=(ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 LD_PRELOAD="$ASAN") ;;
	ebb) env=(EBB_DEBUG="$4" EBB_DEBUG_LEAKS=off LD_PRELOAD="$LIB") ;;
	esac
	debug_workload_run "$OUT" "$RAW/stdout-extra-t1.txt" "$1" "$2" "$3" "$4" build/bench/measure -- "${env[@]}"
}
: >"$OUT"
echo "start $(date -u +%H:%M:%S) $(uptime); asan: $ASAN; ebb: $(git rev-parse --short HEAD 2>/dev/null)" >"$RAW/uptime-t1.txt"
for rep in 0 1 2 3 4 5; do
	[ $rep = 1 ] && echo "warm-up done $(date -u +%H:%M:%S) $(uptime)" >>"$RAW/uptime-t1.txt"
	for i in "${!names[@]}"; do
		k=$(((rep + i) % 4))
		for j in 0 1 2 3; do run $rep "$i" ${configs[$(((k + j) % 4))]}; done
	done
done
echo "end $(date -u +%H:%M:%S) $(uptime)" >>"$RAW/uptime-t1.txt"
