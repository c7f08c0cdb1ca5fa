#!/usr/bin/env bash
# bench/run.sh — ebb's benchmark suite: every workload against ebb, glibc,
# mimalloc, jemalloc and tcmalloc, each through LD_PRELOAD of the same binary,
# side by side. docs/benchmarks.md explains the method and how to read it.
#
#   make bench            (or: bash bench/run.sh, after make lib bench-build)
#   make bench QUICK=1    a short run, to check that everything works
#
# Method. Every (workload, allocator) runs REPS times, interleaved: each
# repetition runs every workload under every allocator, in an allocator order
# rotated from one repetition to the next, so that the drift of a noisy machine
# hits all allocators alike. Each run goes through bench/measure.c, which
# gives its wall time, its peak RSS (wait4) and how much CPU other processes
# took meanwhile. Reported per (workload, allocator): the median time, min-max,
# the median peak RSS, and their ratios to ebb; per allocator, the geometric
# means of those ratios. Time is the program's own timing of its work when it
# reports one (our workload programs do: process start and exit, and the idle
# waits of the seed scenarios, are outside it), else the process's wall time
# (python, gcc, clang).
#
# Environment (besides those of bench/lib.sh: QUICK, REPS, BENCH_BUILD,
# EBB_LIB, BENCH_SKIP_MISSING, RUN_TIMEOUT, NOISY_PCT):
#   REPS=n           repetitions (default 7; QUICK: 3)
#   BENCH_ONLY=re    run only the workloads whose label matches the extended
#                    regular expression (e.g. 'pair|larson')
#   WAIT_QUIET=s     first wait up to s seconds for an idle machine
#
# Output: progress on stderr; bench/results/bench-<date>.md (the report),
# .tsv (every run), .meta (the machine, allocators and workloads), -time.svg
# and -rss.svg (the charts). A QUICK run or a
# BENCH_ONLY run writes them to bench/results/tmp/ (not tracked) instead.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init run.sh
bench_reps 7 3
bench_need_build

# -------------------------------------------------------------- workloads

# Work per run: the full run sizes each workload at roughly 0.2-4 s under
# ebb on a 2-core virtual machine; QUICK does about a fifth.
if [[ -n $QUICK ]]; then
	PAIR_N=4000000 RAND_N=2000000 LARSON_OPS=2000000 XMALLOC_N=2000000 THRASH_ITERS=200000
	FRAG_ROUNDS=12 REALLOC_STR_N=1000000 REALLOC_ARR_N=5000000 LARGE_N=150
	WAVES_THREADS=400 WAVES_WAVE=100
	SEED_BIG_ITERS=40 SEED_REV512K_N=200 PY_SCALE=2 CC_UNITS=8
else
	PAIR_N=20000000 RAND_N=10000000 LARSON_OPS=8000000 XMALLOC_N=8000000 THRASH_ITERS=1000000
	FRAG_ROUNDS=40 REALLOC_STR_N=5000000 REALLOC_ARR_N=20000000 LARGE_N=600
	WAVES_THREADS=2000 WAVES_WAVE=200
	SEED_BIG_ITERS=100 SEED_REV512K_N=500 PY_SCALE=6 CC_UNITS=30
fi
SEED_IDLE_S=1 # seconds each seed scenario idles before its "RSS at end"

PYTHON=/usr/bin/python3
[[ -x $PYTHON ]] || PYTHON=$(command -v python3) || bench_die "python3 is needed (apt-get install -y python3)"
CC_FILE=$BENCH_BUILD/compile-$CC_UNITS.c

# The workloads, in report order: label, group, what it does, command.
# bench/bench_*.c and bench/programs/* document each program's parameters.
WL_LABEL=() WL_GROUP=() WL_DESC=() WL_CMD=()
wl() { WL_LABEL+=("$1") WL_GROUP+=("$2") WL_DESC+=("$3") WL_CMD+=("$4"); }
B=$BENCH_BUILD
for size in 16 64 256 1024 4096 16384; do
	wl "pair-$size" "single thread" "malloc($size)+free pairs, 64 live (x$PAIR_N)" \
	   "$B/bench_core pair $size $PAIR_N"
done
wl fifo-1k "single thread" "a FIFO of 100 blocks of 1 KiB: malloc(1024)+free of the oldest (x$PAIR_N)" \
   "$B/bench_core ring 1024 100 $PAIR_N"
wl fifo-1k-deep "single thread" "the same with 500 blocks, deeper than a page (x$PAIR_N)" \
   "$B/bench_core ring 1024 500 $PAIR_N"
wl rand-8-1k "single thread" "pairs of random sizes 8 B..1 KiB, 64 live (x$RAND_N)" \
   "$B/bench_core rand 8 1024 $RAND_N"
wl rand-1k-64k "single thread" "pairs of random sizes 1..64 KiB, 64 live (x$((RAND_N / 2)))" \
   "$B/bench_core rand 1024 65536 $((RAND_N / 2))"
for t in 1 2 4; do
	wl "larson-${t}t" "threads" "server: $t threads replace random blocks of 1000 live, 8 B..1 KiB; sets pass to successor threads ($LARSON_OPS ops)" \
	   "$B/bench_larson $t $LARSON_OPS"
done
for p in 1 2; do
	wl "xmalloc-$((2 * p))t" "threads" "producer/consumer: $p thread(s) malloc 8..512 B, $p other(s) free ($XMALLOC_N blocks)" \
	   "$B/bench_xmalloc $p $XMALLOC_N"
done
for t in 2 4; do
	wl "thrash-${t}t" "threads" "false sharing, active: $t threads malloc 8 B, write it 100x, free ($THRASH_ITERS)" \
	   "$B/bench_thrash thrash $t $THRASH_ITERS"
	wl "scratch-${t}t" "threads" "false sharing, passive: as thrash, starting from blocks main allocated ($THRASH_ITERS)" \
	   "$B/bench_thrash scratch $t $THRASH_ITERS"
done
wl waves "threads" "short-lived threads in waves of $WAVES_WAVE, 300 ops each: 16 B..4 MiB blocks, cross-thread swaps, realloc ($WAVES_THREADS threads)" \
   "$B/bench_waves $WAVES_THREADS $WAVES_WAVE"
wl frag "memory" "long- and short-lived blocks mixed, size bands shifting ($FRAG_ROUNDS rounds x 50000); end RSS with ~11 MiB live" \
   "$B/bench_frag $FRAG_ROUNDS"
wl realloc-str "memory" "strings grown by realloc per append, 1..32 B at a time, to 16 B..64 KiB ($REALLOC_STR_N appends)" \
   "$B/bench_realloc str $REALLOC_STR_N"
wl realloc-arr "memory" "arrays grown x1.5 by realloc, to 8 KiB..8 MiB ($REALLOC_ARR_N pushes)" \
   "$B/bench_realloc arr $REALLOC_ARR_N"
wl large "memory" "64 KiB..32 MiB blocks (log-uniform), every page touched, 4 live ($LARGE_N)" \
   "$B/bench_large $LARGE_N"
wl seed-big "seeds" "8 threads, 1..8 MiB blocks, memset; end RSS after ${SEED_IDLE_S} s idle" \
   "$B/bench_seeds big $SEED_IDLE_S $SEED_BIG_ITERS"
wl seed-medium "seeds" "8 threads, 64..512 KiB blocks; end RSS after ${SEED_IDLE_S} s idle" \
   "$B/bench_seeds medium $SEED_IDLE_S"
wl seed-rev1k "seeds" "50000 x 1 KiB freed in reverse (the glibc report); end RSS after ${SEED_IDLE_S} s idle" \
   "$B/bench_seeds rev1k $SEED_IDLE_S"
wl seed-rev512k "seeds" "$SEED_REV512K_N x 512 KiB freed in reverse; end RSS after ${SEED_IDLE_S} s idle" \
   "$B/bench_seeds rev512k $SEED_IDLE_S $SEED_REV512K_N"
wl seed-prodcons "seeds" "4 producers -> 4 consumers, 5M blocks of 16..256 B; end RSS after ${SEED_IDLE_S} s idle" \
   "$B/bench_seeds prodcons $SEED_IDLE_S"
wl seed-fastmm "seeds" "8 threads x malloc(1..70000)+memset+free (the FastMM report); end RSS after ${SEED_IDLE_S} s idle" \
   "$B/bench_seeds fastmm $SEED_IDLE_S"
wl python "programs" "python3 (PYTHONMALLOC=malloc): strings, dicts, lists, a graph, in-memory sqlite3 (scale $PY_SCALE); wall time" \
   "env PYTHONMALLOC=malloc $PYTHON bench/programs/alloc_heavy.py $PY_SCALE"
wl gcc "programs" "gcc -O2 -c of a generated $CC_UNITS-unit C file (the driver, cc1 and as preloaded); wall time" \
   "gcc -O2 -c $CC_FILE -o /dev/null"
wl clang "programs" "clang -O2 -c of the same file; wall time" \
   "clang -O2 -c $CC_FILE -o /dev/null"

# BENCH_ONLY: keep the matching workloads.
if [[ -n ${BENCH_ONLY:-} ]]; then
	keep=()
	for ((w = 0; w < ${#WL_LABEL[@]}; w++)); do
		[[ ${WL_LABEL[w]} =~ $BENCH_ONLY ]] && keep+=("$w")
	done
	((${#keep[@]})) || bench_die "BENCH_ONLY='$BENCH_ONLY' matches no workload (labels: ${WL_LABEL[*]})"
	L=() G=() D=() C=()
	for w in "${keep[@]}"; do
		L+=("${WL_LABEL[w]}") G+=("${WL_GROUP[w]}") D+=("${WL_DESC[w]}") C+=("${WL_CMD[w]}")
	done
	WL_LABEL=("${L[@]}") WL_GROUP=("${G[@]}") WL_DESC=("${D[@]}") WL_CMD=("${C[@]}")
fi
NW=${#WL_LABEL[@]}

# The compilers' input, generated once per size (deterministic).
if [[ " ${WL_LABEL[*]} " == *" gcc "* || " ${WL_LABEL[*]} " == *" clang "* ]]; then
	for tool in gcc clang; do
		command -v "$tool" >/dev/null || bench_die "$tool is needed for the compiler workloads (apt-get install -y $tool)"
	done
	if [[ ! -s $CC_FILE ]]; then
		"$PYTHON" bench/programs/gen_c.py "$CC_UNITS" >"$CC_FILE.tmp" && mv "$CC_FILE.tmp" "$CC_FILE"
	fi
fi

alloc_discover ebb glibc mimalloc jemalloc tcmalloc
[[ ${A_NAME[0]} == ebb ]] || bench_die "ebb is the baseline of every ratio and must be measured"

# ---------------------------------------------------------------- outputs

STAMP=$(date '+%Y-%m-%d-%H%M')
if [[ -n $QUICK || -n ${BENCH_ONLY:-} ]]; then
	OUT=bench/results/tmp/bench-$STAMP${QUICK:+-quick}
else
	OUT=bench/results/bench-$STAMP
fi
mkdir -p "$(dirname "$OUT")"
# The runs go to a .partial file, renamed when the report is written: an
# interrupted run leaves nothing that looks like a result.
RAW=$OUT.tsv.partial
printf 'rep\tworkload\tallocator\ttime_ms\twall_ms\tmaxrss_kb\tend_rss_kb\tother_pct\tstatus\n' >"$RAW"

# ---------------------------------------------------------------- running

echo "ebb benchmark suite: $NW workloads x $NA allocators (${A_NAME[*]}) x $REPS repetitions${QUICK:+ (QUICK)}" >&2

bench_warm_up bench_measure "$B/bench_core" pair 64 100000

bench_wait_quiet "${WAIT_QUIET:-0}"
BENCH_LOAD_BEFORE=$(bench_load_now)
START=$SECONDS
CELLS=$((REPS * NW)) DONE=0
for ((rep = 0; rep < REPS; rep++)); do
	for ((w = 0; w < NW; w++)); do
		printf '%d/%d %-14s' $((rep + 1)) "$REPS" "${WL_LABEL[w]}" >&2
		for ((k = 0; k < NA; k++)); do
			a=$(((k + rep) % NA))
			alloc_runs "$a" "${WL_LABEL[w]}" || continue
			# shellcheck disable=SC2086  # WL_CMD is a word list on purpose
			bench_measure "$a" ${WL_CMD[w]}
			end=$(bench_field rss_end_kb "$R_LINE")
			[[ -z $end ]] && end=$(bench_field rss_idle_kb "$R_LINE")
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "${WL_LABEL[w]}" "${A_NAME[a]}" \
			       "$R_TIME" "$R_WALL" "$R_RSS" "${end:--}" "$R_OTHER" "$R_STATUS" >>"$RAW"
			if [[ $R_STATUS == ok ]]; then
				printf ' %s %.0fms/%.0fM%s' "${A_NAME[a]}" "$R_TIME" "$((R_RSS / 1024))" \
				       "$( ((R_NOISY)) && echo '*')" >&2
			else
				printf ' %s FAILED (%s)' "${A_NAME[a]}" "$R_STATUS" >&2
			fi
		done
		DONE=$((DONE + 1))
		el=$((SECONDS - START))
		printf '  [%d:%02d, ~%d min left]\n' $((el / 60)) $((el % 60)) \
		       $(((el * (CELLS - DONE) / DONE + 59) / 60)) >&2
		if ((rep == 0 && w == 0)); then
			echo "  (time / peak RSS per run; * = noisy: others took over $NOISY_PCT% of a CPU meanwhile)" >&2
		fi
	done
done
ELAPSED=$((SECONDS - START))

# ---------------------------------------------------------------- reporting

# What the report needs besides the runs, as "key<TAB>value" lines (kept next
# to the runs, so `python3 bench/report.py RUNS.tsv RUNS.meta OUT` can redo it).
META=$OUT.meta
{
	printf 'title\tebb benchmark suite, %s\n' "$(date '+%Y-%m-%d %H:%M %Z')"
	printf 'mode\t%s%s repetitions per (workload, allocator), interleaved (allocator order rotated each repetition); %d min %d s\n' \
	       "${QUICK:+QUICK, }" "$REPS" $((ELAPSED / 60)) $((ELAPSED % 60))
	printf 'noise\t%s\n' "$(bench_noise)"
	bench_machine | sed 's/^- /machine\t/'
	printf 'machine\ttools: %s; %s; %s\n' "$("$PYTHON" --version 2>&1)" \
	       "$(gcc --version | head -n1)" "$(clang --version | head -n1)"
	alloc_describe | sed 's/^  - /allocator\t/'
	for ((w = 0; w < NW; w++)); do
		printf 'workload\t%s\t%s\t%s\t%s\n' "${WL_LABEL[w]}" "${WL_GROUP[w]}" "${WL_DESC[w]}" "${WL_CMD[w]}"
	done
	printf 'noisy_pct\t%s\n' "$NOISY_PCT"
} >"$META"

mv "$RAW" "$OUT.tsv"
RAW=$OUT.tsv
"$PYTHON" bench/report.py "$RAW" "$META" "$OUT"
echo >&2
echo "report: $OUT.md (runs: $RAW; charts: $OUT-time.svg, $OUT-rss.svg)" >&2
