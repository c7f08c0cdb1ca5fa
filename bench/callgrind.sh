#!/usr/bin/env bash
# bench/callgrind.sh — instructions executed per malloc/free pair, counted by
# callgrind: a repeatable measure of fast-path work, immune to machine noise.
#
#   bash bench/callgrind.sh          (or `make bench-callgrind`)
#
# For each allocator (default: ebb and mimalloc) and each size (64 and 1024),
# runs `bench_core pair SIZE 200000` under `valgrind --tool=callgrind` with the
# allocator preloaded, collecting only inside bench_pair_loop (the timed loop:
# prefill, start-up and exit are not counted). Reports per pair: the Ir spent in
# the allocator (everything the loop calls: malloc, free and what they call),
# split into malloc and free, and the loop's own Ir (the harness: the same for
# every allocator). Instruction counts are not time (no cache misses, no
# branch mispredictions, no atomics cost), but they move only when code does.
#
# Environment:
#   CG_ALLOCATORS="ebb mimalloc"   any of: ebb glibc mimalloc jemalloc tcmalloc
#   CG_SIZES="64 1024"             block sizes
#   CG_N=200000                    pairs per run
#   BENCH_BIN, TEST_LIB             as for run_core.sh
#
# Output: a markdown table on stdout and in bench/results/callgrind-<date>.md.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BIN=${BENCH_BIN:-build/bench/bench_core}
TEST_LIB=${TEST_LIB:-build/libebb.so}
ALLOCATORS=${CG_ALLOCATORS:-ebb mimalloc}
SIZES=${CG_SIZES:-64 1024}
N=${CG_N:-200000}

if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
	echo "callgrind.sh: valgrind not found; install it with: apt-get install -y valgrind" >&2
	exit 2
fi
if [[ ! -x $BIN ]]; then
	echo "callgrind.sh: $BIN not built; building it (make bench-build)" >&2
	make --no-print-directory bench-build >&2
fi

# The preload for an allocator name ("" for glibc); returns 1 if unavailable.
preload_for() {
	local soname pkg arch
	case $1 in
	ebb)
		if [[ -f $TEST_LIB ]]; then readlink -f "$TEST_LIB"; return 0; fi
		echo "callgrind.sh: $TEST_LIB not found (run 'make lib'); skipping ebb" >&2
		return 1 ;;
	glibc) echo ""; return 0 ;;
	mimalloc) soname=libmimalloc.so.2 pkg=libmimalloc2.0 ;;
	jemalloc) soname=libjemalloc.so.2 pkg=libjemalloc2 ;;
	tcmalloc) soname=libtcmalloc_minimal.so.4 pkg=libtcmalloc-minimal4 ;;
	*) echo "callgrind.sh: unknown allocator '$1'" >&2; return 1 ;;
	esac
	arch=$(gcc -print-multiarch 2>/dev/null || true)
	for dir in ${arch:+/usr/lib/$arch} /usr/lib64 /usr/lib; do
		if [[ -e $dir/$soname ]]; then echo "$dir/$soname"; return 0; fi
	done
	echo "callgrind.sh: $1 ($soname) not found; skipping it. Install with: apt-get install -y $pkg" >&2
	return 1
}

SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT

# From `callgrind_annotate --tree=calling`, the block of bench_pair_loop: its
# self Ir (the `*` line) and each callee's inclusive Ir and call count (`>`
# lines). Prints "self S" then "callee IR CALLS NAME" lines.
loop_costs() {
	callgrind_annotate --tree=calling --threshold=100 "$1" | awk '
		function num(s) { gsub(/[,()x]/, "", s); return s + 0 }
		/^ *[0-9,]+ .*\* .*:bench_pair_loop / { inblock = 1; print "self", num($1); next }
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
printf 'callgrind: bench_core pair SIZE %s, collecting in bench_pair_loop only\n' "$N" >&2
for alloc in $ALLOCATORS; do
	preload=$(preload_for "$alloc") || continue
	for size in $SIZES; do
		out=$SCRATCH/cg.$alloc.$size
		printf '  %-9s pair %-5s ... ' "$alloc" "$size" >&2
		if ! env -u LD_PRELOAD ${preload:+LD_PRELOAD="$preload"} \
		     valgrind --tool=callgrind --callgrind-out-file="$out" \
		              --toggle-collect=bench_pair_loop \
		              "$BIN" pair "$size" "$N" >"$SCRATCH/stdout" 2>"$SCRATCH/stderr"; then
			echo "failed" >&2
			tail -n 20 "$SCRATCH/stderr" >&2
			rows+=("| $alloc | $size | failed | | | | |")
			continue
		fi
		want=libc.so.6
		[[ -n $preload ]] && want=$(basename "$preload")
		if ! grep -q " malloc=$want\$" "$SCRATCH/stdout"; then
			echo "malloc did not come from $want: $(cat "$SCRATCH/stdout")" >&2
			rows+=("| $alloc | $size | preload failed | | | | |")
			continue
		fi
		# Ir per pair: total in the loop, the loop's own, malloc's, free's.
		row=$(loop_costs "$out" | awk -v n="$N" -v a="$alloc" -v s="$size" '
			$1 == "self" { self = $2; next }
			$1 == "callee" {
				total += $2
				if ($4 ~ /free/) { fr += $2; frn = frn " " $4 }
				else if ($4 ~ /alloc/) { ma += $2; man = man " " $4 }
				else other += $2
			}
			END {
				printf "| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
				       a, s, total / n, ma / n, fr / n, other / n, self / n
			}')
		rows+=("$row")
		echo "done" >&2
	done
done

# One line naming what was measured: ebb's commit and build time, the packages'
# versions.
allocator_versions() {
	local alloc out=() ver
	for alloc in $ALLOCATORS; do
		case $alloc in
		ebb)
			[[ -f $TEST_LIB ]] || continue
			ver="working tree"
			if git rev-parse --verify -q HEAD >/dev/null 2>&1; then
				ver="git $(git rev-parse --short HEAD)"
				git diff --quiet HEAD -- src include 2>/dev/null || ver+=" + uncommitted changes"
			fi
			out+=("ebb $ver, libebb.so built $(date -u -r "$TEST_LIB" '+%Y-%m-%d %H:%M UTC')") ;;
		glibc) out+=("glibc $(dpkg-query -W -f='${Version}' libc6 2>/dev/null)") ;;
		mimalloc) out+=("mimalloc $(dpkg-query -W -f='${Version}' libmimalloc2.0 2>/dev/null)") ;;
		jemalloc) out+=("jemalloc $(dpkg-query -W -f='${Version}' libjemalloc2 2>/dev/null)") ;;
		tcmalloc) out+=("tcmalloc $(dpkg-query -W -f='${Version}' libtcmalloc-minimal4 2>/dev/null)") ;;
		esac
	done
	local joined
	joined=$(printf '%s; ' "${out[@]}")
	echo "${joined%; }"
}

report() {
	echo "# ebb fast-path instruction counts (callgrind), $(date '+%Y-%m-%d %H:%M %Z')"
	echo
	echo "- \`bench_core pair SIZE $N\`, Ir collected only inside bench_pair_loop; per pair = / $N"
	echo "- $(valgrind --version); kernel $(uname -r)"
	echo "- allocators: $(allocator_versions)"
	echo "- allocator Ir = everything the loop calls (malloc, free and their callees);"
	echo "  other = calls that are neither (e.g. the loader's lazy binding, once);"
	echo "  harness = the loop's own instructions, equal for every allocator"
	echo
	echo "| allocator | size | allocator Ir/pair | malloc | free | other | harness Ir/pair |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	printf '%s\n' "${rows[@]}"
}

mkdir -p bench/results
REPORT=bench/results/callgrind-$(date '+%Y-%m-%d-%H%M').md
report | tee "$REPORT"
echo "report written to $REPORT" >&2
