# bench/bench.mk — the benchmark suite, included by the top-level Makefile.
#
#   make bench               build libebb and bench_core, run bench/run_core.sh
#                            (all workloads x ebb, glibc, mimalloc, jemalloc,
#                            tcmalloc; table to stdout and bench/results/)
#   make bench QUICK=1       the same, short (fewer repetitions, smaller N)
#   make bench REPS=15 WAIT_QUIET=600
#                            more repetitions; wait (up to 600 s) for an idle
#                            machine before starting
#   make bench-callgrind     instructions per malloc/free pair, ebb vs mimalloc
#   make bench-seeds         memory-return scenarios from the seed reports
#                            (bench/run_seeds.sh: time and anonymous RSS at
#                            start, peak and after idle; QUICK=1 and REPS=n
#                            as above; see docs/memory-return.md)
#
# The benchmark program is built like a user program: plain malloc/free, no
# link to ebb (the allocator is chosen at run time with LD_PRELOAD), and
# -fno-builtin-malloc/free so the compiler cannot fold away malloc/free pairs.

BENCH_BUILD  := $(BUILD)/bench
BENCH_CFLAGS := -std=c11 -O2 -g $(WARN) -D_GNU_SOURCE \
                -fno-builtin-malloc -fno-builtin-free -pthread $(EXTRA_CFLAGS)

# QUICK, REPS and WAIT_QUIET come from the command line or the environment;
# they are passed on explicitly so `make bench QUICK=1` and `QUICK=1 make bench`
# agree. See bench/run_core.sh for their meaning.
QUICK      ?=
REPS       ?=
WAIT_QUIET ?=

.PHONY: bench bench-build bench-callgrind bench-seeds bench-seeds-build

bench-build: $(BENCH_BUILD)/bench_core

$(BENCH_BUILD)/bench_core: bench/bench_core.c bench/bench.mk | $(BENCH_BUILD)
	$(CC) $(BENCH_CFLAGS) $< -o $@

bench-seeds-build: $(BENCH_BUILD)/bench_seeds

$(BENCH_BUILD)/bench_seeds: bench/bench_seeds.c bench/bench.mk | $(BENCH_BUILD)
	$(CC) $(BENCH_CFLAGS) $< -o $@

$(BENCH_BUILD):
	mkdir -p $@

bench: lib $(BENCH_BUILD)/bench_core
	QUICK='$(QUICK)' REPS='$(REPS)' WAIT_QUIET='$(WAIT_QUIET)' BENCH_BIN='$(BENCH_BUILD)/bench_core' \
	TEST_LIB='$(BUILD)/libebb.so' bash bench/run_core.sh

bench-callgrind: lib $(BENCH_BUILD)/bench_core
	BENCH_BIN='$(BENCH_BUILD)/bench_core' TEST_LIB='$(BUILD)/libebb.so' \
	bash bench/callgrind.sh

bench-seeds: lib $(BENCH_BUILD)/bench_seeds
	QUICK='$(QUICK)' REPS='$(REPS)' BENCH_BIN='$(BENCH_BUILD)/bench_seeds' \
	TEST_LIB='$(BUILD)/libebb.so' bash bench/run_seeds.sh
