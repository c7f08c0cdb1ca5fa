# bench/bench.mk — the benchmark suite, included by the top-level Makefile.
# It is a benchmark, not a test: `make test` builds and runs nothing from here.
#
#   make bench               build libebb and the workloads, run bench/run.sh:
#                            every workload x ebb, glibc, mimalloc, jemalloc,
#                            tcmalloc, interleaved; report and charts to
#                            bench/results/ (docs/benchmarks.md)
#   make bench QUICK=1       the same, short (fewer repetitions, less work;
#                            report kept in bench/results/tmp/)
#   make bench REPS=9 WAIT_QUIET=600 BENCH_ONLY='pair|larson'
#                            more repetitions; wait (up to 600 s) for an idle
#                            machine first; run only workloads whose label
#                            matches the regular expression
#   make bench BENCH_SKIP_MISSING=1
#                            skip (loudly) a peer allocator that is not
#                            installed, instead of failing
#   make bench-callgrind     instructions per malloc/free pair, ebb vs mimalloc
#   make bench-seeds         the memory-return scenarios in detail (RSS at start,
#                            peak and after idle; docs/memory-return.md)
#
# The workloads are built like user programs: plain malloc/free, no link to ebb
# (the allocator is chosen at run time with LD_PRELOAD), and -fno-builtin-*
# so the compiler cannot fold away the allocations they measure.

BENCH_BUILD  := $(BUILD)/bench
BENCH_CFLAGS := -std=c11 -O2 -g $(WARN) -D_GNU_SOURCE -fno-builtin-malloc \
                -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc \
                -pthread $(EXTRA_CFLAGS)

# One program per workload family (bench/bench_<name>.c), and the launcher
# that measures every run (bench/measure.c).
BENCH_PROGS := core larson xmalloc thrash frag realloc large seeds thread_start waves
BENCH_BINS  := $(patsubst %,$(BENCH_BUILD)/bench_%,$(BENCH_PROGS)) $(BENCH_BUILD)/measure

# QUICK, REPS, WAIT_QUIET, BENCH_ONLY and BENCH_SKIP_MISSING come from the
# command line or the environment; they are passed on explicitly so that
# `make bench QUICK=1` and `QUICK=1 make bench` agree (bench/run.sh documents
# them).
QUICK              ?=
REPS               ?=
WAIT_QUIET         ?=
BENCH_ONLY         ?=
BENCH_SKIP_MISSING ?=
BENCH_ENV = QUICK='$(QUICK)' REPS='$(REPS)' WAIT_QUIET='$(WAIT_QUIET)' \
            BENCH_ONLY='$(BENCH_ONLY)' BENCH_SKIP_MISSING='$(BENCH_SKIP_MISSING)' \
            BENCH_BUILD='$(BENCH_BUILD)' EBB_LIB='$(BUILD)/libebb.so'

.PHONY: bench bench-build bench-callgrind bench-seeds

bench-build: $(BENCH_BINS)

$(BENCH_BUILD)/bench_%: bench/bench_%.c bench/bench_common.h bench/bench.mk | $(BENCH_BUILD)
	$(CC) $(BENCH_CFLAGS) $< -o $@

$(BENCH_BUILD)/measure: bench/measure.c bench/bench.mk | $(BENCH_BUILD)
	$(CC) $(BENCH_CFLAGS) $< -o $@

$(BENCH_BUILD):
	mkdir -p $@

bench: lib bench-build
	$(BENCH_ENV) bash bench/run.sh

bench-callgrind: lib bench-build
	$(BENCH_ENV) bash bench/callgrind.sh

bench-seeds: lib bench-build
	$(BENCH_ENV) bash bench/run_seeds.sh
