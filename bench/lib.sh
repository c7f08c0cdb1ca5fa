# shellcheck shell=bash
# bench/lib.sh — what the benchmark runners share (bench/run.sh,
# bench/run_seeds.sh, bench/callgrind.sh): finding the allocators, running one
# measured run, accounting for the machine's noise, describing the machine.
# Sourced, not run. Everything it defines starts with bench_ or alloc_, or is
# one of the arrays and R_ results documented below.
#
# Conventions of a runner that sources it:
#   bench_init NAME     first: cd to the repository root, QUICK normalised
#                       (empty or 1), SCRATCH (a temporary directory, removed
#                       at exit), BENCH_BUILD and EBB_LIB defaulted
#   alloc_discover ...  then: the allocators to compare, into the A_ arrays
#   bench_measure A CMD one measured run of CMD under allocator A: R_ results
#
# Environment (all optional; `make bench` passes them through):
#   QUICK=1               the runner's short mode
#   REPS=n                repetitions per (workload, allocator)
#   BENCH_BUILD=dir       where the benchmark programs are (build/bench)
#   EBB_LIB=path          ebb's shared library (build/libebb.so)
#   BENCH_SKIP_MISSING=1  a peer allocator that is not installed is skipped
#                         with a warning; by default the runner stops and says
#                         how to install it
#   RUN_TIMEOUT=s         seconds before one run is killed and counted failed
#   NOISY_PCT=p           a run is "noisy" when other processes took more than
#                         p% of one CPU while it ran (default 25)

# ------------------------------------------------------------------ basics

bench_die() {
	echo "$BENCH_PROG: $*" >&2
	exit 2
}

bench_note() {
	echo "$BENCH_PROG: $*" >&2
}

bench_init() {
	BENCH_PROG=$1
	cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
	QUICK=${QUICK:-}
	[[ $QUICK == 0 ]] && QUICK=
	BENCH_BUILD=${BENCH_BUILD:-build/bench}
	EBB_LIB=${EBB_LIB:-build/libebb.so}
	NOISY_PCT=${NOISY_PCT:-25}
	SCRATCH=$(mktemp -d)
	trap 'rm -rf "$SCRATCH"' EXIT
}

# bench_reps DEFAULT QUICK_DEFAULT: sets REPS from the environment or the
# default for the mode, and checks it.
bench_reps() {
	if [[ -n $QUICK ]]; then REPS=${REPS:-$2}; else REPS=${REPS:-$1}; fi
	[[ $REPS =~ ^[1-9][0-9]*$ ]] || bench_die "REPS must be a positive integer (got '$REPS')"
}

# bench_need_build: the programs and the launcher exist, else builds them.
bench_need_build() {
	if [[ ! -x $BENCH_BUILD/measure || ! -x $BENCH_BUILD/bench_core ]]; then
		bench_note "benchmark programs not built; building them (make bench-build)"
		make --no-print-directory bench-build >&2 || bench_die "make bench-build failed"
	fi
}

# ------------------------------------------------------------- allocators

# The peers: name, soname, Debian package.
BENCH_PEERS=("mimalloc libmimalloc.so.2 libmimalloc2.0"
             "jemalloc libjemalloc.so.2 libjemalloc2"
             "tcmalloc libtcmalloc_minimal.so.4 libtcmalloc-minimal4")

# bench_find_lib SONAME: the path of a shared object, multiarch directory
# first, then the loader's cache; empty if not installed.
bench_find_lib() {
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

bench_pkg_version() {
	dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "not from a package"
}

# bench_ebb_version: ebb's commit (and whether src/ or include/ differ from it)
# and when the library was built.
bench_ebb_version() {
	local ver="working tree"
	if git rev-parse --verify -q HEAD >/dev/null 2>&1; then
		ver="git $(git rev-parse --short HEAD)"
		git diff --quiet HEAD -- src include 2>/dev/null || ver+=" + uncommitted changes"
	fi
	echo "$ver, libebb.so built $(date -u -r "$EBB_LIB" '+%Y-%m-%d %H:%M UTC')"
}

# The allocators, index-aligned arrays:
#   A_NAME     label in reports
#   A_PRELOAD  LD_PRELOAD value (empty: the process keeps glibc's malloc)
#   A_ENV      extra environment, "NAME=value ..." (empty: none)
#   A_ONLY     the workloads it runs, space-separated labels (empty: all)
#   A_PKG      where it comes from; A_VER its version
A_NAME=() A_PRELOAD=() A_ENV=() A_ONLY=() A_PKG=() A_VER=()
A_MISSING=() # packages of peers that were skipped

alloc_add() {
	A_NAME+=("$1") A_PRELOAD+=("$2") A_ENV+=("$3") A_ONLY+=("$4") A_PKG+=("$5") A_VER+=("$6")
}

# alloc_discover NAME...: adds the named allocators (ebb glibc mimalloc
# jemalloc tcmalloc), in that order. ebb must be built. A missing peer stops
# the runner with the command that installs it, unless BENCH_SKIP_MISSING=1.
alloc_discover() {
	local want=" $* " spec name soname pkg path
	if [[ $want == *" ebb "* ]]; then
		[[ -f $EBB_LIB ]] || bench_die "$EBB_LIB not found: build it first (make lib)"
		alloc_add ebb "$(readlink -f "$EBB_LIB")" "" "" "(this tree)" "$(bench_ebb_version)"
	fi
	[[ $want == *" glibc "* ]] && alloc_add glibc "" "" "" libc6 "$(bench_pkg_version libc6)"
	for spec in "${BENCH_PEERS[@]}"; do
		read -r name soname pkg <<<"$spec"
		[[ $want == *" $name "* ]] || continue
		path=$(bench_find_lib "$soname")
		if [[ -n $path ]]; then
			alloc_add "$name" "$path" "" "" "$pkg" "$(bench_pkg_version "$pkg")"
		elif [[ -n ${BENCH_SKIP_MISSING:-} ]]; then
			echo "$BENCH_PROG: *** $name ($soname) is not installed: SKIPPED," \
			     "its column stays empty. Install it with: apt-get install -y $pkg" >&2
			A_MISSING+=("$pkg")
		else
			bench_die "$name ($soname) is not installed. Install the peer allocators with:" \
			          "apt-get install -y libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4" \
			          "(or run with BENCH_SKIP_MISSING=1 to skip $name)"
		fi
	done
	NA=${#A_NAME[@]}
}

# alloc_runs A LABEL: does allocator A run the workload LABEL?
alloc_runs() {
	[[ -z ${A_ONLY[$1]} || " ${A_ONLY[$1]} " == *" $2 "* ]]
}

# alloc_describe: one markdown list item per allocator.
alloc_describe() {
	local a
	for ((a = 0; a < NA; a++)); do
		echo "  - ${A_NAME[a]}: ${A_PKG[a]} ${A_VER[a]}${A_PRELOAD[a]:+ (LD_PRELOAD=${A_PRELOAD[a]})}${A_ENV[a]:+ (${A_ENV[a]})}${A_ONLY[a]:+, ${A_ONLY[a]} only}"
	done
	if ((${#A_MISSING[@]})); then
		echo "  - **not installed, skipped: ${A_MISSING[*]}** (apt-get install -y ${A_MISSING[*]})"
	fi
}

# ------------------------------------------------------------ one run

# Totals over the measured runs, for the noise line of a report.
N_RUNS=0 N_NOISY=0 SUM_OTHER_MS=0 SUM_STEAL_MS=0 SUM_WALL_MS=0

# bench_measure A COMMAND [ARGS...]: runs the command once under allocator A,
# through the launcher (bench/measure.c), with its output in $SCRATCH/out and
# $SCRATCH/err. Sets:
#   R_STATUS  "ok", or why the run does not count (exit status, signal,
#             timeout, a preload that did not take)
#   R_LINE    the program's result line (the line with " malloc="), or empty
#   R_TIME    the program's own ms= if it reports one, else the wall time (ms)
#   R_WALL    wall time of the process (ms); R_RSS its peak RSS (KiB, wait4)
#   R_OTHER   other processes' CPU while it ran (% of one CPU); R_NOISY 1 if
#             above NOISY_PCT
bench_measure() {
	local a=$1
	shift
	local -a cmd=(env -u LD_PRELOAD)
	[[ -n ${A_PRELOAD[a]} ]] && cmd+=("LD_PRELOAD=${A_PRELOAD[a]}")
	# shellcheck disable=SC2206  # A_ENV is a word list on purpose
	[[ -n ${A_ENV[a]} ]] && cmd+=(${A_ENV[a]})
	cmd+=("$@")
	R_STATUS=ok R_LINE='' R_TIME=- R_WALL=- R_RSS=- R_OTHER=- R_NOISY=0
	"$BENCH_BUILD/measure" -t "${RUN_TIMEOUT:-300}" -o "$SCRATCH/measure" -- "${cmd[@]}" \
		>"$SCRATCH/out" 2>"$SCRATCH/err" </dev/null || true
	local m
	m=$(cat "$SCRATCH/measure" 2>/dev/null || true)
	if [[ -z $m ]]; then
		R_STATUS="the launcher failed: $(tr '\n' ' ' <"$SCRATCH/err" | cut -c1-200)"
		return 0
	fi
	# shellcheck disable=SC2034  # R_RSS is for the runner
	R_WALL=$(bench_field wall_ms "$m") R_RSS=$(bench_field maxrss_kb "$m")
	R_OTHER=$(bench_field other_pct "$m")
	local status steal
	status=$(bench_field status "$m") steal=$(bench_field steal_pct "$m")
	N_RUNS=$((N_RUNS + 1))
	# Sums in ms of CPU, so the report can give the average share.
	read -r SUM_OTHER_MS SUM_STEAL_MS SUM_WALL_MS R_NOISY < <(awk -v o="$R_OTHER" -v s="$steal" \
		-v w="$R_WALL" -v so="$SUM_OTHER_MS" -v ss="$SUM_STEAL_MS" -v sw="$SUM_WALL_MS" \
		-v t="$NOISY_PCT" 'BEGIN { printf "%.0f %.0f %.0f %d\n", so + o * w / 100,
		                           ss + s * w / 100, sw + w, (o > t) }')
	N_NOISY=$((N_NOISY + R_NOISY))
	R_LINE=$(grep -m1 ' malloc=' "$SCRATCH/out" || true)
	if [[ $status == timeout ]]; then
		R_STATUS="timeout after ${RUN_TIMEOUT:-300}s"
	elif [[ $status != exit:0 ]]; then
		R_STATUS="$status: $(tail -n 3 "$SCRATCH/err" | tr '\n' ' ' | cut -c1-200)"
	elif grep -q 'cannot be preloaded' "$SCRATCH/err"; then
		R_STATUS="preload failed: $(grep -m1 'cannot be preloaded' "$SCRATCH/err" | cut -c1-200)"
	fi
	[[ $R_STATUS == ok ]] || return 0
	if [[ -n $R_LINE ]]; then
		local provider want=libc.so.6
		provider=$(bench_field malloc "$R_LINE")
		[[ -n ${A_PRELOAD[a]} ]] && want=$(basename "${A_PRELOAD[a]}")
		if [[ $provider != "$want" ]]; then
			R_STATUS="malloc came from $provider, not $want (preload failed?)"
			return 0
		fi
	fi
	R_TIME=$(bench_field ms "$R_LINE")
	[[ -z $R_TIME ]] && R_TIME=$R_WALL
	return 0
}

# Warm-up, not recorded: run "$@" once for every allocator (the command
# after the allocator index, e.g. `bench_measure` or a script's own runner),
# which brings every allocator and program into the page cache and checks each
# once, so a broken preload shows before the long run; then zero the counters
# the warm-up touched.
bench_warm_up() {
	local a
	printf 'warm-up:' >&2
	for ((a = 0; a < NA; a++)); do
		"$1" "$a" "${@:2}"
		if [[ $R_STATUS != ok ]]; then
			printf '\n' >&2
			bench_die "${A_NAME[a]} fails even a warm-up run: $R_STATUS"
		fi
		printf ' %s' "${A_NAME[a]}" >&2
	done
	printf '\n' >&2
	N_RUNS=0 N_NOISY=0 SUM_OTHER_MS=0 SUM_STEAL_MS=0 SUM_WALL_MS=0
}

# bench_field KEY LINE: the value of " KEY=value" in a result line (empty if
# absent). " ms=" does not match "phase_ms=".
bench_field() {
	local line=" $2 "
	[[ $line == *" $1="* ]] || return 0
	line=${line#*" $1="}
	echo "${line%% *}"
}

# bench_noise: a sentence on how busy the machine was while we measured.
bench_noise() {
	awk -v o="$SUM_OTHER_MS" -v s="$SUM_STEAL_MS" -v w="$SUM_WALL_MS" -v n="$N_RUNS" \
	    -v k="$N_NOISY" -v t="$NOISY_PCT" 'BEGIN {
		if (w <= 0) { print "n/a"; exit }
		printf "other processes took %.0f%% of one CPU on average while runs were in progress" \
		       " (hypervisor steal %.0f%%); %d of %d runs were noisy (others above %d%% of a CPU)",
		       100 * o / w, 100 * s / w, k, n, t
	}'
}

# bench_wait_quiet SECONDS: waits (up to SECONDS) until other processes use
# less than 10% of a CPU over 5 s. 0 or empty: no wait.
bench_wait_quiet() {
	[[ ${1:-0} =~ ^[1-9][0-9]*$ ]] || return 0
	local deadline=$((SECONDS + $1)) hz b0 b1 pct
	hz=$(getconf CLK_TCK)
	while :; do
		b0=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat)
		sleep 5
		b1=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat)
		pct=$(((b1 - b0) * 100 / (5 * hz)))
		if ((pct < 10)); then
			bench_note "machine idle (others ${pct}% of a CPU); starting"
			return 0
		fi
		if ((SECONDS >= deadline)); then
			bench_note "machine still busy (others ${pct}% of a CPU) after $1 s; starting anyway"
			return 0
		fi
		bench_note "waiting for an idle machine: others use ${pct}% of a CPU"
	done
}

# --------------------------------------------------------------- machine

# bench_load_now: the 1, 5 and 15 minute load averages.
bench_load_now() {
	cut -d' ' -f1-3 /proc/loadavg
}

# bench_machine: markdown list items describing the machine and toolchain.
# The load average is BENCH_LOAD_BEFORE, which the caller sets from
# bench_load_now just before its timed runs (this runs after them).
bench_machine() {
	local cpu os mem
	cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
	os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")
	mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
	echo "- machine: ${cpu:-$(uname -m)}, $(nproc) CPUs online, $mem RAM; ${os:-unknown OS}," \
	     "kernel $(uname -r); THP $(sed -n 's/.*\[\(.*\)\].*/\1/p' \
	     /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
	echo "- load average before the run: ${BENCH_LOAD_BEFORE:-(not recorded)}"
	echo "- benchmark programs compiled with: $(${CC:-cc} --version 2>/dev/null | head -n1)"
}

# bench_stats: numbers on stdin -> "median min max count" (the median of an
# even count is the mean of the middle two); "- - - 0" when there are none.
bench_stats() {
	sort -g | awk '{ v[NR] = $1 }
		END {
			if (NR == 0) { print "- - - 0"; exit }
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			print m, v[1], v[NR], NR
		}'
}
