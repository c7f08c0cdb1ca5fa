#!/usr/bin/env bash
# bench/run_seeds.sh — runs bench_seeds' memory-return scenarios against ebb,
# glibc, mimalloc, jemalloc and tcmalloc (and, for rev1k, glibc with
# GLIBC_TUNABLES=glibc.malloc.mmap_threshold=0; for big, ebb with
# EBB_HUGE_PAGES=1), side by side, and reports the
# medians of time and of anonymous RSS at start, at peak and after idle.
#
#   bash bench/run_seeds.sh          (or `make bench-seeds`; `make bench-seeds QUICK=1`)
#
# Method: as bench/run.sh (which runs these scenarios too, with a short idle
# wait, among its workloads). Every (scenario, allocator) runs REPS times,
# interleaved: each repetition runs every scenario under every allocator, in an
# allocator order rotated from one repetition to the next. Reported per
# scenario and allocator: median time (bench_seeds' CLOCK_MONOTONIC timing of
# the work; for rev1k/rev512k also of the alloc+free phase alone) and the
# median of each anonymous-RSS reading (bench_seeds reads /proc/self/smaps_rollup).
#
# Environment (and those of bench/lib.sh: BENCH_BUILD, EBB_LIB,
# BENCH_SKIP_MISSING, RUN_TIMEOUT, NOISY_PCT):
#   QUICK=1          3 repetitions and short idle waits (2 s big/medium, 1 s others)
#   REPS=n           repetitions (default 5; QUICK: 3)
#
# Output: the report on stdout and in bench/results/seeds-<date>.md (QUICK:
# bench/results/tmp/, not tracked, like the raw runs); progress on stderr.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init run_seeds.sh
bench_reps 5 3
bench_need_build
BIN=$BENCH_BUILD/bench_seeds

if [[ -n $QUICK ]]; then
	IDLE_BIG=2 IDLE_SHORT=1
else
	IDLE_BIG=10 IDLE_SHORT=5
fi
RUN_TIMEOUT=${RUN_TIMEOUT:-120}

# Scenarios: label and bench_seeds arguments (the second is the idle wait), in report order.
SC_LABEL=(big medium rev1k rev512k prodcons fastmm)
SC_ARGS=("big $IDLE_BIG" "medium $IDLE_BIG" "rev1k $IDLE_SHORT" "rev512k $IDLE_SHORT"
         "prodcons $IDLE_SHORT" "fastmm $IDLE_SHORT")
NS=${#SC_LABEL[@]}

# The allocators, plus glibc forced to mmap every block (the fix the glibc
# report tried), for rev1k only.
alloc_discover ebb glibc
# ebb with its opt-in transparent huge pages, for the scenario of huge blocks.
alloc_add "ebb, EBB_HUGE_PAGES=1" "$(readlink -f "$EBB_LIB")" "EBB_HUGE_PAGES=1" big \
	"(this tree)" "$(bench_ebb_version)"
alloc_add "glibc, mmap_threshold=0" "" "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=0" rev1k \
	libc6 "$(bench_pkg_version libc6)"
alloc_discover mimalloc jemalloc tcmalloc

# runs A S: does allocator A run scenario S?
runs() { alloc_runs "$1" "${SC_LABEL[$2]}"; }

STAMP=$(date '+%Y-%m-%d-%H%M')
mkdir -p bench/results/tmp
RAW=bench/results/tmp/seeds-$STAMP${QUICK:+-quick}.tsv
if [[ -n $QUICK ]]; then
	REPORT=bench/results/tmp/seeds-$STAMP-quick.md
else
	REPORT=bench/results/seeds-$STAMP.md
fi
: >"$RAW"

# run_one ALLOC_INDEX ARGS... : one measured run (bench_measure); sets R_MS
# R_PHASE R_START R_PEAK R_IDLE (KiB) from the result line, or "-".
run_one() {
	bench_measure "$1" "$BIN" "${@:2}"
	R_MS=- R_PHASE=- R_START=- R_PEAK=- R_IDLE=-
	[[ $R_STATUS == ok ]] || return 0
	R_MS=$(bench_field ms "$R_LINE") R_PHASE=$(bench_field phase_ms "$R_LINE")
	R_START=$(bench_field rss_start_kb "$R_LINE") R_PEAK=$(bench_field rss_peak_kb "$R_LINE")
	R_IDLE=$(bench_field rss_idle_kb "$R_LINE")
	if [[ -z $R_MS || -z $R_IDLE ]]; then
		R_STATUS="no result in output: $R_LINE"
	fi
	return 0
}

echo "ebb memory-return scenarios: $NS scenarios x $NA allocators (${A_NAME[*]})" \
     "x $REPS repetitions${QUICK:+ (QUICK)}" >&2

bench_warm_up run_one rev1k 0 1000

BENCH_LOAD_BEFORE=$(bench_load_now)
START=$(date +%s)
for ((rep = 0; rep < REPS; rep++)); do
	for ((s = 0; s < NS; s++)); do
		printf 'rep %d/%d  %-9s' $((rep + 1)) "$REPS" "${SC_LABEL[s]}" >&2
		for ((k = 0; k < NA; k++)); do
			a=$(((k + rep) % NA))
			runs "$a" "$s" || continue
			# shellcheck disable=SC2086  # SC_ARGS is a word list on purpose
			run_one "$a" ${SC_ARGS[s]}
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$s" "$a" "$R_MS" \
			       "$R_PHASE" "$R_START" "$R_PEAK" "$R_IDLE" "$R_OTHER" "${A_NAME[a]}" \
			       "$R_STATUS" >>"$RAW"
			if [[ $R_STATUS == ok ]]; then
				printf '  %s %.0fms/%dM%s' "${A_NAME[a]%%,*}" "$R_MS" $((R_IDLE / 1024)) \
				       "$( ((R_NOISY)) && echo '*')" >&2
			else
				printf '  %s FAILED\n    %s' "${A_NAME[a]}" "$R_STATUS" >&2
			fi
		done
		printf '\n' >&2
	done
done
ELAPSED=$(($(date +%s) - START))
NOISE="$(bench_noise) (idle waits included)"

# ---------------------------------------------------------------- reporting

# Raw columns: 1 rep, 2 scenario, 3 allocator, 4 ms, 5 phase_ms, 6 start KiB,
# 7 peak KiB, 8 idle KiB, 9 others' CPU %, 10 allocator name, 11 status.
median() { # S A C: median of column C over the successful runs, or -
	awk -F'\t' -v s="$1" -v a="$2" -v c="$3" '$2 == s && $3 == a && $11 == "ok" { print $c }' "$RAW" |
		bench_stats | cut -d' ' -f1
}
declare -A MS PH ST PK ID CNT NOISY
for ((s = 0; s < NS; s++)); do
	for ((a = 0; a < NA; a++)); do
		runs "$a" "$s" || continue
		MS[$s,$a]=$(median "$s" "$a" 4) PH[$s,$a]=$(median "$s" "$a" 5)
		ST[$s,$a]=$(median "$s" "$a" 6) PK[$s,$a]=$(median "$s" "$a" 7) ID[$s,$a]=$(median "$s" "$a" 8)
		CNT[$s,$a]=$(awk -F'\t' -v s="$s" -v a="$a" '$2 == s && $3 == a && $11 == "ok" { c++ } END { print c + 0 }' "$RAW")
		NOISY[$s,$a]=$(awk -F'\t' -v s="$s" -v a="$a" -v t="$NOISY_PCT" \
			'$2 == s && $3 == a && $9 != "-" && $9 > t { c++ } END { print c + 0 }' "$RAW")
	done
done

ms1() { if [[ $1 == - ]]; then echo -; else awk -v m="$1" 'BEGIN { printf "%.1f", m }'; fi; }
mib() { if [[ $1 == - ]]; then echo -; else awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; fi; }

report() {
	echo "# ebb memory-return scenarios, $(date '+%Y-%m-%d %H:%M %Z')"
	echo
	echo "- mode: ${QUICK:+QUICK, }$REPS repetition(s) per (scenario, allocator), interleaved" \
	     "(allocator order rotated each repetition); $((ELAPSED / 60)) min $((ELAPSED % 60)) s"
	echo "- idle waits: big and medium ${IDLE_BIG} s, rev1k, rev512k, prodcons and fastmm ${IDLE_SHORT} s"
	bench_machine
	echo "- noise: $NOISE"
	echo "- time: bench_seeds' CLOCK_MONOTONIC timing of the work (idle wait excluded);" \
	     "RSS: \"Anonymous:\" of /proc/self/smaps_rollup; peak: the kernel's high-water" \
	     "mark (VmHWM) less the file pages, or the largest 5 ms sample if higher"
	echo "- allocators:"
	alloc_describe
	echo
	echo "## Medians"
	echo
	echo "Time in ms; anonymous RSS in MiB at start, peak, and after the idle wait."
	echo "phase = the alloc+memset+reverse-free loops alone (rev1k, rev512k)."
	echo
	echo "| scenario | allocator | ms | phase ms | RSS start | RSS peak | RSS after idle | runs (noisy) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|"
	local s a k ph
	for ((s = 0; s < NS; s++)); do
		for ((a = 0; a < NA; a++)); do
			runs "$a" "$s" || continue
			k=$s,$a
			ph=-
			[[ ${SC_LABEL[s]} == rev* ]] && ph=$(ms1 "${PH[$k]}")
			echo "| ${SC_LABEL[s]} | ${A_NAME[a]} | $(ms1 "${MS[$k]}") | $ph | $(mib "${ST[$k]}") |" \
			     "$(mib "${PK[$k]}") | $(mib "${ID[$k]}") | ${CNT[$k]}/$REPS (${NOISY[$k]}) |"
		done
	done
	echo
	echo "## Where ebb is not best"
	echo
	echo "Not the lowest median RSS after idle, or median time above 1.05x the fastest:"
	echo
	local e=-1 any=
	for ((a = 0; a < NA; a++)); do [[ ${A_NAME[a]} == ebb ]] && e=$a; done
	if ((e < 0)); then
		echo "- ebb was not measured"
	else
		for ((s = 0; s < NS; s++)); do
			local best_idle=- best_idle_n='' best_ms=- best_ms_n=''
			for ((a = 0; a < NA; a++)); do
				runs "$a" "$s" || continue
				[[ ${A_NAME[a]} == ebb,* ]] && continue # ebb's own variants are not peers
				k=$s,$a
				if [[ ${ID[$k]} != - ]] && { [[ $best_idle == - ]] || awk -v x="${ID[$k]}" -v y="$best_idle" 'BEGIN { exit !(x < y) }'; }; then
					best_idle=${ID[$k]} best_idle_n=${A_NAME[a]}
				fi
				if [[ ${MS[$k]} != - ]] && { [[ $best_ms == - ]] || awk -v x="${MS[$k]}" -v y="$best_ms" 'BEGIN { exit !(x < y) }'; }; then
					best_ms=${MS[$k]} best_ms_n=${A_NAME[a]}
				fi
			done
			k=$s,$e
			if [[ ${ID[$k]} == - ]]; then
				echo "- ${SC_LABEL[s]}: ebb failed"; any=1; continue
			fi
			if [[ $best_idle_n != ebb ]] && awk -v x="${ID[$k]}" -v y="$best_idle" 'BEGIN { exit !(x > y) }'; then
				echo "- ${SC_LABEL[s]}: RSS after idle ${ID[$k]} KiB, lowest is $best_idle_n ${best_idle} KiB"
				any=1
			fi
			if awk -v x="${MS[$k]}" -v y="$best_ms" 'BEGIN { exit !(x > 1.05 * y) }'; then
				echo "- ${SC_LABEL[s]}: time $(ms1 "${MS[$k]}") ms = $(awk -v x="${MS[$k]}" -v y="$best_ms" 'BEGIN { printf "%.2f", x / y }')x the fastest ($best_ms_n $(ms1 "$best_ms") ms)"
				any=1
			fi
		done
		[[ -z $any ]] && echo "- none"
	fi
	local failures
	failures=$(awk -F'\t' '$11 != "ok"' "$RAW" | wc -l)
	if ((failures)); then
		echo
		echo "## Failed runs ($failures)"
		echo
		awk -F'\t' '$11 != "ok" { printf "- rep %d, scenario %d, %s: %s\n", $1 + 1, $2, $10, $11 }' "$RAW"
	fi
	return 0
}

report_text=$(report)
printf '%s\n' "$report_text" | tee "$REPORT"
echo >&2
echo "report written to $REPORT (raw runs: $RAW)" >&2
