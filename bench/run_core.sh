#!/usr/bin/env bash
# bench/run_core.sh — runs bench_core's workloads against ebb, glibc, mimalloc,
# jemalloc and tcmalloc, side by side, and reports medians and ratios.
#
#   bash bench/run_core.sh          (or `make bench`; `make bench QUICK=1`)
#
# Method (SPEC.md, "Measured, side by side"): every (workload, allocator) runs
# REPS times. The runs are interleaved: each repetition runs every workload
# under every allocator, in an allocator order rotated from one repetition to
# the next, so drift of a noisy machine hits all allocators alike. Reported per
# workload: the median of bench_core's own timing (its loop only, not process
# start), min-max, the ratio of each allocator's median to ebb's median, the
# throughput at the median, and the median peak RSS of the process.
#
# Environment:
#   QUICK=1          3 repetitions and a tenth of the iterations (a smoke run)
#   REPS=n           repetitions (default 9; QUICK: 3)
#   BENCH_BIN=path   the benchmark program (default build/bench/bench_core)
#   TEST_LIB=path     ebb's shared library (default build/libebb.so)
#   RUN_TIMEOUT=s    seconds before one run is killed and counted as failed
#   WAIT_QUIET=s     first wait up to s seconds for the machine to be idle
#                    (others below 10% of a CPU for 5 s); default 0, no wait
#   NOISY_PCT=p      a run is "noisy" if others took over p% of a CPU (25)
#
# Output: the report on stdout and in bench/results/core-<date>.md (QUICK:
# bench/results/tmp/, not tracked, like the raw runs); progress on stderr.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BIN=${BENCH_BIN:-build/bench/bench_core}
TEST_LIB=${TEST_LIB:-build/libebb.so}
QUICK=${QUICK:-}
[[ $QUICK == 0 ]] && QUICK=

if [[ -n $QUICK ]]; then
	REPS=${REPS:-3}
	PAIR_N=2000000
	MIXED_N=500000
	XTHREAD_N=500000
	RUN_TIMEOUT=${RUN_TIMEOUT:-60}
else
	REPS=${REPS:-9}
	PAIR_N=20000000
	MIXED_N=5000000
	XTHREAD_N=5000000
	RUN_TIMEOUT=${RUN_TIMEOUT:-180}
fi
if ! [[ $REPS =~ ^[1-9][0-9]*$ ]]; then
	echo "run_core.sh: REPS must be a positive integer (got '$REPS')" >&2
	exit 2
fi

# Workloads: label and bench_core arguments, in report order.
WL_LABEL=("pair 16" "pair 64" "pair 256" "pair 1024" "pair 4096" "mixed" "xthread")
WL_ARGS=("pair 16 $PAIR_N" "pair 64 $PAIR_N" "pair 256 $PAIR_N" "pair 1024 $PAIR_N"
         "pair 4096 $PAIR_N" "mixed $MIXED_N" "xthread $XTHREAD_N")
WL_N=("$PAIR_N" "$PAIR_N" "$PAIR_N" "$PAIR_N" "$PAIR_N" "$MIXED_N" "$XTHREAD_N")

# ------------------------------------------------------------ prerequisites

if [[ ! -x $BIN ]]; then
	echo "run_core.sh: $BIN not built; building it (make bench-build)" >&2
	make --no-print-directory bench-build >&2
fi

if [[ -x /usr/bin/time ]]; then
	RSS_SOURCE="/usr/bin/time %M (peak RSS of the benchmark process)"
	HAVE_TIME=1
else
	echo "run_core.sh: /usr/bin/time not found; using bench_core's own getrusage()" \
	     "for peak RSS (for the external measurement: apt-get install -y time)" >&2
	RSS_SOURCE="getrusage(RUSAGE_SELF) at the end of bench_core (/usr/bin/time not installed)"
	HAVE_TIME=
fi

# The shared object for a soname: the multiarch directory first, then ldconfig.
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

# Allocators: name, LD_PRELOAD value (empty: glibc), package, version.
A_NAME=() A_PRELOAD=() A_PKG=() A_VER=()
add_alloc() { A_NAME+=("$1"); A_PRELOAD+=("$2"); A_PKG+=("$3"); A_VER+=("$4"); }

if [[ -f $TEST_LIB ]]; then
	ebb_path=$(readlink -f "$TEST_LIB")
	ebb_ver="working tree"
	if git rev-parse --verify -q HEAD >/dev/null 2>&1; then
		ebb_ver="git $(git rev-parse --short HEAD)"
		git diff --quiet HEAD -- src include 2>/dev/null || ebb_ver+=" + uncommitted changes"
	fi
	ebb_ver+=", libebb.so built $(date -u -r "$ebb_path" '+%Y-%m-%d %H:%M UTC')"
	add_alloc ebb "$ebb_path" "(this tree)" "$ebb_ver"
else
	echo "run_core.sh: $TEST_LIB not found (run 'make lib'); skipping ebb," \
	     "ratios are to glibc instead" >&2
fi
add_alloc glibc "" libc6 "$(pkg_version libc6)"
missing=()
for spec in "mimalloc libmimalloc.so.2 libmimalloc2.0" \
            "jemalloc libjemalloc.so.2 libjemalloc2" \
            "tcmalloc libtcmalloc_minimal.so.4 libtcmalloc-minimal4"; do
	read -r name soname pkg <<<"$spec"
	path=$(find_lib "$soname")
	if [[ -n $path ]]; then
		add_alloc "$name" "$path" "$pkg" "$(pkg_version "$pkg")"
	else
		echo "run_core.sh: $name ($soname) not found; skipping it." \
		     "Install with: apt-get install -y $pkg" >&2
		missing+=("$pkg")
	fi
done
if ((${#missing[@]})); then
	echo "run_core.sh: for every allocator: apt-get install -y libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4" >&2
fi
NA=${#A_NAME[@]}
BASE=0   # ratios are to allocator 0: ebb when present, else glibc
BASE_NAME=${A_NAME[0]}

# ------------------------------------------------------------------ running

STAMP=$(date '+%Y-%m-%d-%H%M')
mkdir -p bench/results/tmp
RAW=bench/results/tmp/core-$STAMP${QUICK:+-quick}.tsv
# A QUICK run is a smoke test: its report stays with the untracked raw data.
if [[ -n $QUICK ]]; then
	REPORT=bench/results/tmp/core-$STAMP-quick.md
else
	REPORT=bench/results/core-$STAMP.md
fi
: >"$RAW"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT

# Machine noise. Around every run, the machine's busy CPU time (/proc/stat) is
# read; minus the run's own CPU time (/usr/bin/time %U %S), it is what other
# processes took while we measured (plus the few ms of exec of time/env per
# run); steal is what the hypervisor took. All read with bash builtins, so the
# harness itself adds nothing between runs. Totals: W_BUSY, W_STEAL (ticks),
# W_OWN_US, W_WALL_US. A run during which others took more than NOISY_PCT % of
# one CPU is flagged noisy (it still counts; the report says how many were).
W_BUSY=0 W_STEAL=0 W_OWN_US=0 W_WALL_US=0
HZ=$(getconf CLK_TCK)
NOISY_PCT=${NOISY_PCT:-25}
cpu_ticks() { # sets CT_BUSY, CT_STEAL
	local _cpu user nice sys _idle _iowait irq softirq steal _rest
	read -r _cpu user nice sys _idle _iowait irq softirq steal _rest </proc/stat
	CT_BUSY=$((user + nice + sys + irq + softirq + steal)) CT_STEAL=$steal
}

# run_one ALLOC_INDEX ARGS... : runs bench_core once; sets R_MS, R_RSS (KiB),
# R_OTHER (others' CPU use during the run, % of one CPU, or -) and R_STATUS
# (ok, or why the run does not count), and adds to the W_ totals.
run_one() {
	local a=$1
	shift
	local -a cmd=(env -u LD_PRELOAD)
	[[ -n ${A_PRELOAD[a]} ]] && cmd+=("LD_PRELOAD=${A_PRELOAD[a]}")
	cmd+=("$BIN" "$@")
	if [[ -n $HAVE_TIME ]]; then
		cmd=(/usr/bin/time -f '%M %U %S' -o "$SCRATCH/rss" "${cmd[@]}")
	fi
	local rc=0 busy0 steal0 wall0 wall_us busy
	cpu_ticks
	busy0=$CT_BUSY steal0=$CT_STEAL wall0=${EPOCHREALTIME/./}
	timeout -k 5 "$RUN_TIMEOUT" "${cmd[@]}" >"$SCRATCH/out" 2>"$SCRATCH/err" || rc=$?
	cpu_ticks
	wall_us=$((${EPOCHREALTIME/./} - wall0))
	busy=$((CT_BUSY - busy0 - (CT_STEAL - steal0)))
	W_WALL_US=$((W_WALL_US + wall_us))
	W_BUSY=$((W_BUSY + CT_BUSY - busy0)) W_STEAL=$((W_STEAL + CT_STEAL - steal0))
	R_MS=- R_RSS=- R_OTHER=- R_STATUS=ok
	if ((rc == 124 || rc == 137)); then
		R_STATUS="timeout after ${RUN_TIMEOUT}s"
	elif ((rc != 0)); then
		R_STATUS="exit $rc: $(tr '\n' ' ' <"$SCRATCH/err" | cut -c1-200)"
	else
		local line provider want
		line=$(grep -m1 ' ms=' "$SCRATCH/out" || true)
		R_MS=$(sed -n 's/.* ms=\([0-9.]*\).*/\1/p' <<<"$line")
		provider=$(sed -n 's/.* malloc=\([^ ]*\).*/\1/p' <<<"$line")
		want=libc.so.6
		[[ -n ${A_PRELOAD[a]} ]] && want=$(basename "${A_PRELOAD[a]}")
		if [[ -z $R_MS ]]; then
			R_STATUS="no timing in output: $line"
		elif [[ $provider != "$want" ]]; then
			R_STATUS="malloc came from $provider, not $want (preload failed?)"
			R_MS=-
		fi
		if [[ -n $HAVE_TIME ]]; then
			# last line (time puts "Command exited..." first on failure): KiB user sys
			local own_user own_sys
			read -r R_RSS own_user own_sys < <(tail -n1 "$SCRATCH/rss")
			# %U and %S are seconds with two decimals
			local own_us=$(((10#${own_user/./} + 10#${own_sys/./}) * 10000))
			W_OWN_US=$((W_OWN_US + own_us))
			R_OTHER=$(((busy * 1000000 / HZ - own_us) * 100 / (wall_us > 0 ? wall_us : 1)))
			if ((R_OTHER < 0)); then R_OTHER=0; fi
		else
			R_RSS=$(sed -n 's/.* maxrss_kb=\([0-9]*\).*/\1/p' <<<"$line")
		fi
	fi
}

echo "ebb core benchmark: ${#WL_LABEL[@]} workloads x $NA allocators (${A_NAME[*]})" \
     "x $REPS repetitions${QUICK:+ (QUICK)}" >&2

# Warm-up, not recorded: loads every library and the program into the page cache.
printf 'warm-up:' >&2
for ((a = 0; a < NA; a++)); do
	run_one "$a" pair 64 100000
	if [[ $R_STATUS != ok ]]; then
		printf '\nrun_core.sh: %s fails even a warm-up run: %s\n' "${A_NAME[a]}" "$R_STATUS" >&2
	else
		printf ' %s' "${A_NAME[a]}" >&2
	fi
done
printf '\n' >&2

# WAIT_QUIET: start only once other processes leave the CPUs alone.
if [[ ${WAIT_QUIET:-0} =~ ^[1-9][0-9]*$ ]]; then
	deadline=$((SECONDS + WAIT_QUIET))
	ncpu=$(nproc)
	while :; do
		cpu_ticks
		b0=$CT_BUSY
		sleep 5
		cpu_ticks
		busy_pct=$(((CT_BUSY - b0) * 100 / (5 * HZ)))
		if ((busy_pct < 10)); then
			echo "machine idle (others ${busy_pct}% of a CPU); starting" >&2
			break
		fi
		if ((SECONDS >= deadline)); then
			echo "machine still busy (others ${busy_pct}% of a CPU, $ncpu CPUs) after ${WAIT_QUIET}s; starting anyway" >&2
			break
		fi
		echo "waiting for an idle machine: others use ${busy_pct}% of a CPU" >&2
	done
fi

W_BUSY=0 W_STEAL=0 W_OWN_US=0 W_WALL_US=0 # the warm-up does not count
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date +%s)
for ((rep = 0; rep < REPS; rep++)); do
	for ((w = 0; w < ${#WL_LABEL[@]}; w++)); do
		printf 'rep %d/%d  %-10s' $((rep + 1)) "$REPS" "${WL_LABEL[w]}" >&2
		for ((k = 0; k < NA; k++)); do
			a=$(((k + rep) % NA))
			# shellcheck disable=SC2086  # WL_ARGS is a word list on purpose
			run_one "$a" ${WL_ARGS[w]}
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$w" "$a" "$R_MS" "$R_RSS" \
			       "$R_OTHER" "${WL_LABEL[w]}" "${A_NAME[a]}" "$R_STATUS" >>"$RAW"
			if [[ $R_STATUS == ok ]]; then
				mark=
				[[ $R_OTHER != - ]] && ((R_OTHER > NOISY_PCT)) && mark='*'
				printf '  %s %.1f%s' "${A_NAME[a]}" "$R_MS" "$mark" >&2
			else
				printf '  %s FAILED' "${A_NAME[a]}" >&2
				printf '\n    %s: %s' "${A_NAME[a]}" "$R_STATUS" >&2
			fi
		done
		printf ' ms\n' >&2
		if ((rep == 0 && w == 0)); then
			echo "  (* = noisy run: other processes took more than $NOISY_PCT% of a CPU meanwhile)" >&2
		fi
	done
done
ELAPSED=$(($(date +%s) - START))
# Other processes' and the hypervisor's CPU use while runs were in progress, in
# % of one CPU (a busy neighbour on a 2-CPU machine shows as tens of %).
NOISE=$(awk -v b="$W_BUSY" -v st="$W_STEAL" -v own="$W_OWN_US" -v wall="$W_WALL_US" \
            -v hz="$(getconf CLK_TCK)" -v have="$HAVE_TIME" 'BEGIN {
	if (wall <= 0) { print "n/a"; exit }
	other = (have != "") ? sprintf("%.0f%%", 100 * ((b - st) / hz * 1e6 - own) / wall) : "n/a"
	printf "other processes %s, hypervisor steal %.0f%% of one CPU, averaged over the runs",
	       other, 100 * (st / hz * 1e6) / wall
}')

# ---------------------------------------------------------------- reporting

# stats: numbers on stdin -> "median min max count" (median of an even count is
# the mean of the middle two); "- - - 0" when there are none.
stats() {
	sort -g | awk '{ v[NR] = $1 }
		END {
			if (NR == 0) { print "- - - 0"; exit }
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			print m, v[1], v[NR], NR
		}'
}

# Raw runs, one line each: rep, workload index, allocator index, ms, peak RSS KiB,
# others' CPU %, workload label, allocator name, status ("ok" or why the run
# does not count).
# values W A C: column C (4: ms, 5: RSS) of the successful runs of workload W
# under allocator A.
values() {
	awk -F'\t' -v w="$1" -v a="$2" -v c="$3" '$2 == w && $3 == a && $9 == "ok" { print $c }' "$RAW"
}

declare -A MED MIN MAX CNT RSS RSSMAX NOISY
for ((w = 0; w < ${#WL_LABEL[@]}; w++)); do
	for ((a = 0; a < NA; a++)); do
		read -r MED[$w,$a] MIN[$w,$a] MAX[$w,$a] CNT[$w,$a] < <(values "$w" "$a" 4 | stats)
		read -r RSS[$w,$a] _ RSSMAX[$w,$a] _ < <(values "$w" "$a" 5 | stats)
		NOISY[$w,$a]=$(values "$w" "$a" 6 | awk -v t="$NOISY_PCT" '$1 != "-" && $1 > t { c++ } END { print c + 0 }')
	done
done

ratio() { # median of allocator $2 over the baseline's, workload $1
	local m=${MED[$1,$2]} b=${MED[$1,$BASE]}
	if [[ $m == - || $b == - ]]; then echo "n/a"; else awk -v m="$m" -v b="$b" 'BEGIN { printf "%.2f", m / b }'; fi
}

cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
[[ -z $cpu_model ]] && cpu_model=$(uname -m)

report() {
	echo "# ebb core benchmark, $(date '+%Y-%m-%d %H:%M %Z')"
	echo
	echo "- mode: ${QUICK:+QUICK, }$REPS repetitions per (workload, allocator), interleaved" \
	     "(allocator order rotated each repetition); $((ELAPSED / 60)) min $((ELAPSED % 60)) s"
	echo "- kernel: $(uname -r); CPU: $cpu_model, $(nproc) CPUs online;" \
	     "load average before the run: $LOADAVG"
	echo "- CPU use not ours while measuring: $NOISE;" \
	     "$(awk -F'\t' -v t="$NOISY_PCT" '$6 != "-" && $6 > t { c++ } END { print c + 0 }' "$RAW")" \
	     "of $((REPS * ${#WL_LABEL[@]} * NA)) runs were noisy (others above $NOISY_PCT% of a CPU)"
	echo "- compiler: $(${CC:-cc} --version 2>/dev/null | head -n1)"
	echo "- iterations: pair $PAIR_N, mixed $MIXED_N, xthread $XTHREAD_N"
	echo "- time: bench_core's CLOCK_MONOTONIC timing of its loop; peak RSS: $RSS_SOURCE"
	echo "- allocators:"
	for ((a = 0; a < NA; a++)); do
		echo "  - ${A_NAME[a]}: ${A_PKG[a]} ${A_VER[a]}${A_PRELOAD[a]:+ (LD_PRELOAD=${A_PRELOAD[a]})}"
	done
	if ((${#missing[@]})); then
		echo "  - not installed, skipped: ${missing[*]} (apt-get install -y ${missing[*]})"
	fi
	[[ $BASE_NAME != ebb ]] && echo "- **ebb was not built: ratios are to glibc**"
	echo
	echo "Workloads: \`pair S\`: malloc(S) + free of the oldest of 64 live blocks, per op;"
	echo "\`mixed\`: random slot of 1000 replaced by a random size (15/16 8..1024 B, 1/16 to 64 KiB);"
	echo "\`xthread\`: one thread mallocs 8..512 B blocks, another frees them (SPSC ring)."
	echo
	echo "## Median time relative to $BASE_NAME"
	echo
	echo "Allocator's median time / $BASE_NAME's median time: above 1.00, $BASE_NAME is faster."
	echo
	local head="| workload |" rule="|---|" w a
	for ((a = 0; a < NA; a++)); do head+=" ${A_NAME[a]} |"; rule+="---:|"; done
	echo "$head"
	echo "$rule"
	for ((w = 0; w < ${#WL_LABEL[@]}; w++)); do
		local row="| ${WL_LABEL[w]} |"
		for ((a = 0; a < NA; a++)); do row+=" $(ratio "$w" "$a") |"; done
		echo "$row"
	done
	echo
	echo "## Per workload"
	echo
	echo "| workload | allocator | median ms | min–max ms | vs $BASE_NAME | Mops/s | peak RSS MiB (median / max) | runs (noisy) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|"
	for ((w = 0; w < ${#WL_LABEL[@]}; w++)); do
		for ((a = 0; a < NA; a++)); do
			local k=$w,$a
			if [[ ${CNT[$k]} == 0 ]]; then
				echo "| ${WL_LABEL[w]} | ${A_NAME[a]} | failed | | | | | 0/$REPS |"
				continue
			fi
			awk -v wl="${WL_LABEL[w]}" -v al="${A_NAME[a]}" -v med="${MED[$k]}" \
			    -v lo="${MIN[$k]}" -v hi="${MAX[$k]}" -v r="$(ratio "$w" "$a")" \
			    -v n="${WL_N[w]}" -v rss="${RSS[$k]}" -v rssmax="${RSSMAX[$k]}" \
			    -v cnt="${CNT[$k]}" -v reps="$REPS" -v noisy="${NOISY[$k]}" 'BEGIN {
				rs = (rss == "-") ? "-" : sprintf("%.1f / %.1f", rss / 1024, rssmax / 1024)
				printf "| %s | %s | %.1f | %.1f–%.1f | %s | %.1f | %s | %d/%d (%d) |\n",
				       wl, al, med, lo, hi, r, n / (med / 1e3) / 1e6, rs, cnt, reps, noisy
			}'
		done
	done
	local failures
	failures=$(awk -F'\t' '$9 != "ok"' "$RAW" | wc -l)
	if ((failures)); then
		echo
		echo "## Failed runs ($failures)"
		echo
		awk -F'\t' '$9 != "ok" { printf "- rep %d, %s, %s: %s\n", $1 + 1, $7, $8, $9 }' "$RAW"
	fi
}

report_text=$(report)
printf '%s\n' "$report_text" | tee "$REPORT"
echo >&2
echo "report written to $REPORT (raw runs: $RAW)" >&2
