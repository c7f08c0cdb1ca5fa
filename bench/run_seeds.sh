#!/usr/bin/env bash
# bench/run_seeds.sh — runs bench_seeds' memory-return scenarios against ebb,
# glibc, mimalloc, jemalloc and tcmalloc (and, for rev1k, glibc with
# GLIBC_TUNABLES=glibc.malloc.mmap_threshold=0), side by side, and reports the
# medians of time and of anonymous RSS at start, at peak and after idle.
#
#   bash bench/run_seeds.sh          (or `make bench-seeds`; `make bench-seeds QUICK=1`)
#
# Method: as bench/run_core.sh. Every (scenario, allocator) runs REPS times,
# interleaved: each repetition runs every scenario under every allocator, in an
# allocator order rotated from one repetition to the next. Reported per
# scenario and allocator: median time (bench_seeds' CLOCK_MONOTONIC timing of
# the work; for rev1k/rev512k also of the alloc+free phase alone) and the
# median of each anonymous-RSS reading (bench_seeds reads /proc/self/smaps_rollup).
#
# Environment:
#   QUICK=1          3 repetitions and short idle waits (2 s big/medium, 1 s others)
#   REPS=n           repetitions (default 5; QUICK: 3)
#   BENCH_BIN=path   the benchmark program (default build/bench/bench_seeds)
#   TEST_LIB=path    ebb's shared library (default build/libebb.so)
#   RUN_TIMEOUT=s    seconds before one run is killed and counted as failed
#   NOISY_PCT=p      a run is "noisy" if others took over p% of a CPU (25)
#
# Output: the report on stdout and in bench/results/seeds-<date>.md (QUICK:
# bench/results/tmp/, not tracked, like the raw runs); progress on stderr.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BIN=${BENCH_BIN:-build/bench/bench_seeds}
TEST_LIB=${TEST_LIB:-build/libebb.so}
QUICK=${QUICK:-}
[[ $QUICK == 0 ]] && QUICK=

if [[ -n $QUICK ]]; then
	REPS=${REPS:-3}
	IDLE_BIG=2 IDLE_SHORT=1
else
	REPS=${REPS:-5}
	IDLE_BIG=10 IDLE_SHORT=5
fi
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
if ! [[ $REPS =~ ^[1-9][0-9]*$ ]]; then
	echo "run_seeds.sh: REPS must be a positive integer (got '$REPS')" >&2
	exit 2
fi

# Scenarios: label and bench_seeds arguments (the second is the idle wait), in report order.
SC_LABEL=(big medium rev1k rev512k prodcons fastmm)
SC_ARGS=("big $IDLE_BIG" "medium $IDLE_BIG" "rev1k $IDLE_SHORT" "rev512k $IDLE_SHORT"
         "prodcons $IDLE_SHORT" "fastmm $IDLE_SHORT")
NS=${#SC_LABEL[@]}

# ------------------------------------------------------------ prerequisites

if [[ ! -x $BIN ]]; then
	echo "run_seeds.sh: $BIN not built; building it (make bench-seeds-build)" >&2
	make --no-print-directory bench-seeds-build >&2
fi
if [[ -x /usr/bin/time ]]; then HAVE_TIME=1; else HAVE_TIME=; fi

find_lib() {
	local soname=$1 arch dir
	arch=$(gcc -print-multiarch 2>/dev/null || true)
	for dir in ${arch:+/usr/lib/$arch} /usr/lib64 /usr/lib; do
		if [[ -e $dir/$soname ]]; then
			echo "$dir/$soname"
			return 0
		fi
	done
	{ ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true; } |
		awk -v n="$soname" '$1 == n { print $NF; exit }'
}

pkg_version() {
	dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "not from a package"
}

# Allocators: name, LD_PRELOAD value (empty: glibc), extra environment, the
# scenarios it runs (empty: all), package, version.
A_NAME=() A_PRELOAD=() A_ENV=() A_ONLY=() A_PKG=() A_VER=()
add_alloc() { A_NAME+=("$1"); A_PRELOAD+=("$2"); A_ENV+=("$3"); A_ONLY+=("$4"); A_PKG+=("$5"); A_VER+=("$6"); }

if [[ -f $TEST_LIB ]]; then
	ebb_path=$(readlink -f "$TEST_LIB")
	ebb_ver="working tree"
	if git rev-parse --verify -q HEAD >/dev/null 2>&1; then
		ebb_ver="git $(git rev-parse --short HEAD)"
		git diff --quiet HEAD -- src include 2>/dev/null || ebb_ver+=" + uncommitted changes"
	fi
	ebb_ver+=", libebb.so built $(date -u -r "$ebb_path" '+%Y-%m-%d %H:%M UTC')"
	add_alloc ebb "$ebb_path" "" "" "(this tree)" "$ebb_ver"
else
	echo "run_seeds.sh: $TEST_LIB not found (run 'make lib'); skipping ebb" >&2
fi
add_alloc glibc "" "" "" libc6 "$(pkg_version libc6)"
add_alloc "glibc, mmap_threshold=0" "" "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=0" rev1k \
	libc6 "$(pkg_version libc6)"
missing=()
for spec in "mimalloc libmimalloc.so.2 libmimalloc2.0" \
            "jemalloc libjemalloc.so.2 libjemalloc2" \
            "tcmalloc libtcmalloc_minimal.so.4 libtcmalloc-minimal4"; do
	read -r name soname pkg <<<"$spec"
	path=$(find_lib "$soname")
	if [[ -n $path ]]; then
		add_alloc "$name" "$path" "" "" "$pkg" "$(pkg_version "$pkg")"
	else
		echo "run_seeds.sh: $name ($soname) not found; skipping it." \
		     "Install with: apt-get install -y $pkg" >&2
		missing+=("$pkg")
	fi
done
NA=${#A_NAME[@]}

# runs A S: does allocator A run scenario S?
runs() { [[ -z ${A_ONLY[$1]} || " ${A_ONLY[$1]} " == *" ${SC_LABEL[$2]} "* ]]; }

# ------------------------------------------------------------------ running

STAMP=$(date '+%Y-%m-%d-%H%M')
mkdir -p bench/results/tmp
RAW=bench/results/tmp/seeds-$STAMP${QUICK:+-quick}.tsv
if [[ -n $QUICK ]]; then
	REPORT=bench/results/tmp/seeds-$STAMP-quick.md
else
	REPORT=bench/results/seeds-$STAMP.md
fi
: >"$RAW"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT

# Machine noise, as in run_core.sh: busy CPU time (/proc/stat) around each run,
# minus the run's own CPU time (/usr/bin/time %U %S). The idle waits are part
# of the wall time, so the average is over time the benchmark mostly sleeps.
W_BUSY=0 W_STEAL=0 W_OWN_US=0 W_WALL_US=0
HZ=$(getconf CLK_TCK)
NOISY_PCT=${NOISY_PCT:-25}
cpu_ticks() {
	local _cpu user nice sys _idle _iowait irq softirq steal _rest
	read -r _cpu user nice sys _idle _iowait irq softirq steal _rest </proc/stat
	CT_BUSY=$((user + nice + sys + irq + softirq + steal)) CT_STEAL=$steal
}

# run_one ALLOC_INDEX ARGS... : sets R_MS R_PHASE R_START R_PEAK R_IDLE (KiB),
# R_OTHER and R_STATUS.
run_one() {
	local a=$1
	shift
	local -a cmd=(env -u LD_PRELOAD -u GLIBC_TUNABLES)
	[[ -n ${A_PRELOAD[a]} ]] && cmd+=("LD_PRELOAD=${A_PRELOAD[a]}")
	[[ -n ${A_ENV[a]} ]] && cmd+=("${A_ENV[a]}")
	cmd+=("$BIN" "$@")
	[[ -n $HAVE_TIME ]] && cmd=(/usr/bin/time -f '%U %S' -o "$SCRATCH/time" "${cmd[@]}")
	local rc=0 busy0 steal0 wall0 wall_us busy
	cpu_ticks
	busy0=$CT_BUSY steal0=$CT_STEAL wall0=${EPOCHREALTIME/./}
	timeout -k 5 "$RUN_TIMEOUT" "${cmd[@]}" >"$SCRATCH/out" 2>"$SCRATCH/err" || rc=$?
	cpu_ticks
	wall_us=$((${EPOCHREALTIME/./} - wall0))
	busy=$((CT_BUSY - busy0 - (CT_STEAL - steal0)))
	W_WALL_US=$((W_WALL_US + wall_us))
	W_BUSY=$((W_BUSY + CT_BUSY - busy0)) W_STEAL=$((W_STEAL + CT_STEAL - steal0))
	R_MS=- R_PHASE=- R_START=- R_PEAK=- R_IDLE=- R_OTHER=- R_STATUS=ok
	if ((rc == 124 || rc == 137)); then
		R_STATUS="timeout after ${RUN_TIMEOUT}s"
		return
	elif ((rc != 0)); then
		R_STATUS="exit $rc: $(tr '\n' ' ' <"$SCRATCH/err" | cut -c1-200)"
		return
	fi
	local line provider want
	line=$(grep -m1 ' ms=' "$SCRATCH/out" || true)
	field() { sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p" <<<"$line"; }
	R_MS=$(field ms) R_PHASE=$(field phase_ms) R_START=$(field rss_start_kb)
	R_PEAK=$(field rss_peak_kb) R_IDLE=$(field rss_idle_kb)
	provider=$(field malloc)
	want=libc.so.6
	[[ -n ${A_PRELOAD[a]} ]] && want=$(basename "${A_PRELOAD[a]}")
	if [[ -z $R_MS || -z $R_IDLE ]]; then
		R_STATUS="no result in output: $line"
	elif [[ $provider != "$want" ]]; then
		R_STATUS="malloc came from $provider, not $want (preload failed?)"
	fi
	if [[ -n $HAVE_TIME ]]; then
		local own_user own_sys
		read -r own_user own_sys < <(tail -n1 "$SCRATCH/time")
		local own_us=$(((10#${own_user/./} + 10#${own_sys/./}) * 10000))
		W_OWN_US=$((W_OWN_US + own_us))
		R_OTHER=$(((busy * 1000000 / HZ - own_us) * 100 / (wall_us > 0 ? wall_us : 1)))
		((R_OTHER < 0)) && R_OTHER=0
	fi
	return 0
}

echo "ebb memory-return scenarios: $NS scenarios x $NA allocators (${A_NAME[*]})" \
     "x $REPS repetitions${QUICK:+ (QUICK)}" >&2

printf 'warm-up:' >&2
for ((a = 0; a < NA; a++)); do
	run_one "$a" rev1k 0 1000
	if [[ $R_STATUS != ok ]]; then
		printf '\nrun_seeds.sh: %s fails even a warm-up run: %s\n' "${A_NAME[a]}" "$R_STATUS" >&2
	else
		printf ' %s' "${A_NAME[a]}" >&2
	fi
done
printf '\n' >&2

W_BUSY=0 W_STEAL=0 W_OWN_US=0 W_WALL_US=0
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date +%s)
NRUNS=0
for ((rep = 0; rep < REPS; rep++)); do
	for ((s = 0; s < NS; s++)); do
		printf 'rep %d/%d  %-9s' $((rep + 1)) "$REPS" "${SC_LABEL[s]}" >&2
		for ((k = 0; k < NA; k++)); do
			a=$(((k + rep) % NA))
			runs "$a" "$s" || continue
			# shellcheck disable=SC2086  # SC_ARGS is a word list on purpose
			run_one "$a" ${SC_ARGS[s]}
			NRUNS=$((NRUNS + 1))
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$s" "$a" "$R_MS" \
			       "$R_PHASE" "$R_START" "$R_PEAK" "$R_IDLE" "$R_OTHER" "${A_NAME[a]}" \
			       "$R_STATUS" >>"$RAW"
			if [[ $R_STATUS == ok ]]; then
				mark=
				[[ $R_OTHER != - ]] && ((R_OTHER > NOISY_PCT)) && mark='*'
				printf '  %s %.0fms/%dM%s' "${A_NAME[a]%%,*}" "$R_MS" $((R_IDLE / 1024)) "$mark" >&2
			else
				printf '  %s FAILED\n    %s' "${A_NAME[a]}" "$R_STATUS" >&2
			fi
		done
		printf '\n' >&2
	done
done
ELAPSED=$(($(date +%s) - START))
NOISE=$(awk -v b="$W_BUSY" -v st="$W_STEAL" -v own="$W_OWN_US" -v wall="$W_WALL_US" \
            -v hz="$HZ" -v have="$HAVE_TIME" 'BEGIN {
	if (wall <= 0) { print "n/a"; exit }
	other = (have != "") ? sprintf("%.0f%%", 100 * ((b - st) / hz * 1e6 - own) / wall) : "n/a"
	printf "other processes %s, hypervisor steal %.0f%% of one CPU, averaged over the runs (idle waits included)",
	       other, 100 * (st / hz * 1e6) / wall
}')

# ---------------------------------------------------------------- reporting

# Raw columns: 1 rep, 2 scenario, 3 allocator, 4 ms, 5 phase_ms, 6 start KiB,
# 7 peak KiB, 8 idle KiB, 9 others' CPU %, 10 allocator name, 11 status.
median() { # S A C: median of column C over the successful runs, or -
	awk -F'\t' -v s="$1" -v a="$2" -v c="$3" '$2 == s && $3 == a && $11 == "ok" { print $c }' "$RAW" |
		sort -g | awk '{ v[NR] = $1 }
		END {
			if (NR == 0) { print "-"; exit }
			print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		}'
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

cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
[[ -z $cpu_model ]] && cpu_model=$(uname -m)

ms1() { if [[ $1 == - ]]; then echo -; else awk -v m="$1" 'BEGIN { printf "%.1f", m }'; fi; }
mib() { if [[ $1 == - ]]; then echo -; else awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; fi; }

report() {
	echo "# ebb memory-return scenarios, $(date '+%Y-%m-%d %H:%M %Z')"
	echo
	echo "- mode: ${QUICK:+QUICK, }$REPS repetition(s) per (scenario, allocator), interleaved" \
	     "(allocator order rotated each repetition); $((ELAPSED / 60)) min $((ELAPSED % 60)) s"
	echo "- idle waits: big and medium ${IDLE_BIG} s, rev1k, rev512k, prodcons and fastmm ${IDLE_SHORT} s"
	echo "- kernel: $(uname -r); CPU: $cpu_model, $(nproc) CPUs online;" \
	     "load average before the run: $LOADAVG"
	echo "- CPU use not ours while measuring: $NOISE;" \
	     "$(awk -F'\t' -v t="$NOISY_PCT" '$9 != "-" && $9 > t { c++ } END { print c + 0 }' "$RAW")" \
	     "of $NRUNS runs were noisy (others above $NOISY_PCT% of a CPU)"
	echo "- compiler: $(${CC:-cc} --version 2>/dev/null | head -n1)"
	echo "- time: bench_seeds' CLOCK_MONOTONIC timing of the work (idle wait excluded);" \
	     "RSS: \"Anonymous:\" of /proc/self/smaps_rollup, peak sampled every 5 ms"
	echo "- allocators:"
	for ((a = 0; a < NA; a++)); do
		echo "  - ${A_NAME[a]}: ${A_PKG[a]} ${A_VER[a]}${A_PRELOAD[a]:+ (LD_PRELOAD=${A_PRELOAD[a]})}${A_ENV[a]:+ (${A_ENV[a]})}${A_ONLY[a]:+, ${A_ONLY[a]} only}"
	done
	if ((${#missing[@]})); then
		echo "  - not installed, skipped: ${missing[*]} (apt-get install -y ${missing[*]})"
	fi
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
