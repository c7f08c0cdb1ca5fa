#!/usr/bin/env bash
# run_tests.sh — run ebb's test suite (called by `make test` after the build).
#
# Runs every test in turn (in order, one at a time: several measure RSS) with a
# per-test timeout, prints one line per test:
#     PASS  name  (1.23 s)        FAIL  name  (...)        SKIP  name  (reason)
# shows the output of each failing test, and ends with the line
#     N passed, N failed, N skipped
# Exit status: 0 if nothing failed.
#
# A test program exits 0 (pass), 77 (skip: its last output line says why) or
# anything else (fail). A passing test that could not make some checks here
# (check.h, SKIP_CHECK) says so on its PASS line and in a line before the
# last. A program whose build failed has build/tests/<name>.fail
# (the compiler output); one whose optional tool is missing has <name>.skip.
#
# Environment: TEST_BUILD (absolute build directory, default ./build),
# TEST_ONLY (run only the tests whose name contains it).
set -u

cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${TEST_BUILD:-$ROOT/build}
T=$BUILD/tests
LOGS=$T/logs
LIB=$BUILD/libebb.so
mkdir -p "$LOGS"
export TEST_BUILD=$BUILD TEST_LIB=$LIB TEST_ROOT=$ROOT

passed=0 failed=0 skipped=0
failed_names=()
skipped_checks=() # passing tests that could not make some of their checks here

# Sanitizer reports (any one fails the test, whatever the exit status).
SAN_PATTERN='ERROR: AddressSanitizer|ERROR: LeakSanitizer|WARNING: ThreadSanitizer|ThreadSanitizer: reported|runtime error:|UndefinedBehaviorSanitizer'

# Print a failing test's output, without the "[ RUN  ]" / "[  OK  ]" lines of
# the cases that passed (the full log stays in build/tests/logs/).
show_log() {
    local log=$1 lines
    local shown=$LOGS/.shown
    grep -Ev '^\[ (RUN  | OK  )\] ' "$log" >"$shown"
    lines=$(wc -l <"$shown")
    if [ "$lines" -gt 200 ]; then
        echo "      ... ($((lines - 200)) earlier lines not shown)"
        tail -n 200 "$shown" | sed 's/^/      | /'
    else
        sed 's/^/      | /' "$shown"
    fi
    echo "      (full output: $log)"
}

# run_test NAME TIMEOUT_S [VAR=value ...] -- COMMAND [ARGS...]
# The first word of COMMAND, when it is a file under build/tests, is checked for
# a .fail/.skip marker from the build.
run_test() {
    local name=$1 timeout_s=$2
    shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    if [ -n "${TEST_ONLY:-}" ] && [[ $name != *"$TEST_ONLY"* ]]; then
        return
    fi
    local prog=$1 log=$LOGS/$name.log
    if [ -f "$prog.skip" ]; then
        printf 'SKIP  %-28s (%s)\n' "$name" "$(tail -n 1 "$prog.skip")"
        skipped=$((skipped + 1))
        return
    fi
    if [ -f "$prog.fail" ]; then
        printf 'FAIL  %-28s (did not build)\n' "$name"
        show_log "$prog.fail"
        failed=$((failed + 1)); failed_names+=("$name")
        return
    fi
    local t0 t1 rc
    t0=$(date +%s.%N)
    # (The braces' 2>/dev/null silences bash's own "Segmentation fault" notice.)
    { env "${envs[@]}" timeout -k 10 "$timeout_s" "$@" </dev/null >"$log" 2>&1; } 2>/dev/null
    rc=$?
    t1=$(date +%s.%N)
    local dt
    dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    local why=""
    if [ $rc -eq 77 ]; then
        printf 'SKIP  %-28s (%s)\n' "$name" "$(grep -v '^$' "$log" | tail -n 1)"
        skipped=$((skipped + 1))
        return
    fi
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        why="timed out after ${timeout_s} s"
    elif [ $rc -ge 128 ]; then
        why="killed by signal $((rc - 128))"
    elif [ $rc -ne 0 ]; then
        why="exit status $rc"
    elif grep -Eq "$SAN_PATTERN" "$log"; then
        why="sanitizer report"
    fi
    if [ -z "$why" ]; then
        local sk
        sk=$(grep -c "SKIPPED CHECK" "$log")
        if [ "$sk" -gt 0 ]; then
            printf 'PASS  %-28s (%s s; %s checks skipped, see its log)\n' "$name" "$dt" "$sk"
            skipped_checks+=("$name ($sk)")
        else
            printf 'PASS  %-28s (%s s)\n' "$name" "$dt"
        fi
        passed=$((passed + 1))
    else
        printf 'FAIL  %-28s (%s s, %s)\n' "$name" "$dt" "$why"
        show_log "$log"
        failed=$((failed + 1)); failed_names+=("$name")
    fi
}

echo "ebb test suite: $LIB"
suite_t0=$(date +%s)

run_test exports 60 -- bash tests/test_exports.sh "$LIB"
run_test api 300 -- "$T/test_api"
run_test os_readers 60 -- "$T/test_os"
run_test size_classes 60 -- "$T/test_classes"
run_test dlopen_closed 60 -- "$T/test_dlopen" "$LIB"
run_test deepbind_preloaded 60 LD_PRELOAD="$LIB" -- "$T/test_deepbind"
run_test deepbind_debug 60 LD_PRELOAD="$LIB" EBB_DEBUG=1 EBB_DEBUG_LEAKS=off -- "$T/test_deepbind"
run_test prefixed_beside_glibc 60 -- "$T/test_prefixed"
run_test cross_build_aarch64 300 -- bash tests/test_cross_build.sh
# The aarch64 build run under qemu-user (after the entry above, whose library
# it reuses); tests/test_qemu_aarch64.sh says what the emulator cannot run.
run_test qemu_aarch64 600 -- bash tests/test_qemu_aarch64.sh
run_test api_preloaded 300 LD_PRELOAD="$LIB" -- "$T/test_api"
# The whole API in debug mode: alignment, errno, overflow, every entry point
# (two release-layout cases skip, saying why).
run_test api_debug 300 EBB_DEBUG=1 EBB_DEBUG_LEAKS=off -- "$T/test_api"
run_test threads 300 -- "$T/test_threads"
run_test thread_churn 300 -- "$T/test_thread_churn"
# Where a sandbox refuses process_vm_readv, the scavenger still reads a dead
# thread's TLS without faulting (src/heap.c, heap_quiesce; a SIGSEGV before).
run_test threads_without_process_vm_readv 120 \
    CHECK_ONLY=key_destructors_that_allocate_leave_no_heap_behind \
    -- "$T/sandbox_no_vm_readv" "$T/test_threads"
run_test thread_exit_no_purge 120 EBB_PURGE_DELAY=-1 CHECK_ONLY=full_abandoned_segments \
    -- "$T/test_thread_churn"
run_test fork 300 -- "$T/test_fork"
# The pending-cancel case with frees that purge and unmap at once, the path
# that slept (a cancellation point) holding a heap's lock.
run_test fork_cancel_purge_now 120 EBB_PURGE_DELAY=0 \
    CHECK_ONLY=a_pending_cancel_never_acts_inside_the_allocator -- "$T/test_fork"
run_test first_call 120 -- "$T/test_first_call"
run_test oom 300 -- "$T/test_oom"
# The huge cache's mappings stay for the unmap delay: an hour, so that no pass
# can give them back before the refused request does.
run_test oom_huge_cache 60 EBB_UNMAP_DELAY=3600000 CHECK_ONLY=huge_cache \
    -- "$T/test_oom"
run_test ctor_linked 60 -- "$T/test_ctor"
run_test ctor_preloaded 60 LD_PRELOAD="$LIB" -- "$T/test_ctor_preload"
run_test static_archive 120 -- "$T/test_static"
run_test static_full 120 -- "$T/test_static_full"
# Debug mode in the static link: no crash at start or hang at exit (the
# unwinder is the program's own), a fault report with its traces, and no block
# of the C library's start-up reported lost (exit status 23 if any is).
run_test static_full_debug 120 EBB_DEBUG=1 EBB_DEBUG_LEAK_EXITCODE=23 -- "$T/test_static_full"
run_test threads_asan_ubsan 400 \
    ASAN_OPTIONS=abort_on_error=0:halt_on_error=1:detect_leaks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    -- "$T/test_threads_asan"
run_test threads_tsan 400 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    -- "$T/test_threads_tsan"
# The burst and ring cases again with a 2 ms purge delay: the scavenger then
# visits heaps whose owners are still running (test_threads.c explains).
run_test threads_tsan_scavenger 400 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" EBB_PURGE_DELAY=2 \
    CHECK_ONLY=_while_the_scavenger_visits \
    -- "$T/test_threads_tsan"
# The 8-thread stress in debug mode: the debug layer's reads of pages other
# threads own (free-list check, pointer checks) under TSan.
run_test threads_tsan_debug 400 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" EBB_DEBUG=1 EBB_DEBUG_LEAKS=off \
    CHECK_ONLY=stress_8_threads_random_sizes_cross_thread_frees \
    -- "$T/test_threads_tsan"
# ebb_debug_verify beside that stress: it claims each block it checks
# (src/debug.c), so its reads never race a free filling or reusing the block.
run_test threads_tsan_debug_verify 400 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" EBB_DEBUG=1 EBB_DEBUG_LEAKS=off \
    CHECK_ONLY=verify_beside_the_stress \
    -- "$T/test_threads_tsan"
run_test stats 300 -- "$T/test_stats"
# The same in debug mode, where live bytes count headers, canaries and the
# quarantine (include/ebb.h). The quarantine's time bound is off: a loaded
# machine that stalled the test past it would empty the quarantine between
# two snapshots that expect the freed blocks there.
run_test debug_stats 300 EBB_DEBUG=1 EBB_DEBUG_LEAKS=off EBB_DEBUG_QUARANTINE_IDLE=-1 \
    -- "$T/test_stats"
run_test stats_tsan 400 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    -- "$T/test_stats_tsan"
run_test ebbrun 300 -- bash tests/test_ebbrun.sh
# The failure contract in debug mode: the quarantine and the reuse cache go
# back before a request fails.
run_test debug_oom 300 EBB_DEBUG=1 EBB_DEBUG_LEAKS=off -- "$T/test_oom"
run_test debug_faults 300 -- bash tests/test_debug.sh
run_test debug_behaviour 300 EBB_DEBUG=1 -- "$T/test_debug"
run_test debug_behaviour_options 300 EBB_DEBUG=1 EBB_DEBUG_FILL_ALLOC=17 EBB_DEBUG_FILL_FREE=0x22 \
    EBB_DEBUG_QUARANTINE=1048576 EBB_DEBUG_REALLOC=move -- "$T/test_debug"
run_test debug_unwind 120 EBB_DEBUG=1 EBB_DEBUG_LEAKS=off -- "$T/test_unwind"
run_test debug_threads 300 EBB_DEBUG=1 -- "$T/test_threads"
# With no quarantine: the cases bound RSS after frees, and what a quarantine
# holds keeps its pages resident beyond its byte bound (they are shared with
# freed blocks); the busy-thread case then read up to +23.6 MiB against +8.
run_test debug_thread_exit 120 EBB_DEBUG=1 EBB_DEBUG_LEAKS=off EBB_DEBUG_QUARANTINE=0 \
    CHECK_ONLY=abandoned_segments -- "$T/test_thread_churn"
run_test debug_fork 400 EBB_DEBUG=1 EBB_DEBUG_LEAKS=off -- "$T/test_fork"
run_test debug_programs_python 300 EBB_DEBUG=1 EBB_DEBUG_LEAKS=off -- bash tests/test_programs.sh python
run_test debug_programs_gcc 300 EBB_DEBUG=1 EBB_DEBUG_LEAKS=off -- bash tests/test_programs.sh gcc
run_test debug_programs_git 300 EBB_DEBUG=1 EBB_DEBUG_LEAKS=off -- bash tests/test_programs.sh git
run_test debug_programs_sort 300 EBB_DEBUG=1 EBB_DEBUG_LEAKS=off -- bash tests/test_programs.sh sort
run_test programs_preload_loaded 60 -- bash tests/test_programs.sh loaded
run_test programs_python 300 -- bash tests/test_programs.sh python
run_test programs_gcc 300 -- bash tests/test_programs.sh gcc
run_test programs_git 300 -- bash tests/test_programs.sh git
run_test programs_sort 300 -- bash tests/test_programs.sh sort
run_test programs_unshare 60 -- bash tests/test_programs.sh unshare

# The memory-return tests (tests/test_purge.c).
source tests/purge_tests.sh

suite_t1=$(date +%s)
echo "suite time: $((suite_t1 - suite_t0)) s"
if [ $failed -gt 0 ]; then
    echo "failed: ${failed_names[*]}"
fi
if [ ${#skipped_checks[@]} -gt 0 ]; then
    echo "passed with checks skipped (what was skipped and why: SKIPPED CHECK in their logs): ${skipped_checks[*]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
