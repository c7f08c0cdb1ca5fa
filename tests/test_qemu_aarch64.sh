#!/usr/bin/env bash
# test_qemu_aarch64.sh — the aarch64 build, run: the library and test programs
# cross-compiled with aarch64-linux-gnu-gcc (tests/tests.mk's own rules, into
# build/aarch64/, beside tests/test_cross_build.sh's library), each run under
# qemu-user (qemu-aarch64 -L /usr/aarch64-linux-gnu). What only aarch64 runs:
# os.c's register copy (x0-x30, sp, pc, v0-v31 from the signal frame), debug
# mode's traces by libgcc's unwinder alone (the fast unwinder is x86-64's),
# the leak report's spill of the exiting thread's registers, GCC's aarch64
# code for the atomics and the test programs' aarch64 assembly.
#
# What qemu-user cannot show: memory-ordering races (on an x86-64 host the
# guest's loads and stores keep the host's stronger order), and page sizes
# other than 4 KiB (its -p option changes no real page size, and breaks the
# loader's mappings: upstream disabled it in 2024).
#
# Programs (release unless said; each prints its cases):
#   size_classes, os_readers, api, static, static_full, static_full_debug,
#   threads, thread_churn, stats, oom (the OS-refusal injections),
#   dlopen_closed, prefixed, deepbind_preloaded, first_call (six scenarios,
#   each run as its driver would), debug_behaviour, debug_unwind
#   (EBB_DEBUG=1), debug_faults (seven fault reports: status, message,
#   traces), debug_leaks (registers of another thread and of the exiting one)
# Left out, each printed as a SKIPPED CHECK with its reason (never counted as
# passed), by tests/check.h's CHECK_SKIP or by this script:
#   - cases that read RSS or VmSize: under qemu-user those are the emulator's
#     (its translation cache and per-thread state beside the program's);
#   - cases whose child, forked while other threads run, starts a thread:
#     qemu-user 7.2 aborts in such a child (qemu_plugin_vcpu_init_hook:
#     assertion failed), with or without ebb;
#   - cases that re-execute the program: the kernel runs no aarch64 file
#     without binfmt_misc, which qemu-user alone does not register;
#   - cases under RLIMIT_AS: qemu-user accepts it and ignores it;
#   - a case that needs the kernel to put a new mapping where one was just
#     unmapped: qemu-user places the guest's mappings itself;
#   - a few that take 7-45 s of CPU each under qemu (test_fork's case that
#     qemu can run, 100,000 threads, the 2-thread stress beside the 8-thread
#     one, three debug-mode stresses, test_purge): they run on x86-64.
# Also expected under qemu-user, and said where it shows: a thread of the
# emulator's own (signals blocked) that the register pass counts as not
# asked, and /proc's syscall numbers being the host's (test_os).
#
# About 60 s of CPU time, the build of its programs included (76 s of wall
# time on a 2-core machine under other load). Needs gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross and qemu-user (.ci/run installs them); without them
# the test is skipped (exit 77), not passed.
set -u
cd "$(dirname "$0")/.."
CROSS=aarch64-linux-gnu-gcc
SYSROOT=/usr/aarch64-linux-gnu
if ! command -v "$CROSS" >/dev/null || ! command -v qemu-aarch64 >/dev/null ||
    [ ! -d "$SYSROOT/lib" ]; then
    echo "no aarch64 cross compiler or qemu-aarch64 here (apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)"
    exit 77
fi
OUT=${TEST_BUILD:-$PWD/build}/aarch64
T=$OUT/tests
D=$T/debug
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ebb-qemu.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failed=0

# The reasons, once.
RSS="reads RSS or VmSize, which under qemu-user are the emulator's (its translation cache and per-thread state beside the program's)"
FORK_THREADS="its child, forked while other threads run, starts a thread: qemu-user 7.2 aborts in such a child (qemu_plugin_vcpu_init_hook: assertion failed), with or without ebb"
EXEC="re-executes the program (/proc/self/exe): the kernel runs no aarch64 file without binfmt_misc, which qemu-user alone does not register"
RLIMIT="sets RLIMIT_AS, which qemu-user accepts and ignores (it would limit the emulator itself)"
REUSE="needs the kernel to place a new mapping where one was just unmapped (the next thread on a dead thread's stack); qemu-user places the guest's mappings itself, each above the last"
slow() { echo "takes $1 s of CPU under qemu-user, past this test's time budget; it runs on x86-64"; }

# One CHECK_SKIP line (tests/check.h): CASE: WHY.
skip() { printf '%s: %s\n' "$1" "$2"; }

# A case this script does not run at all.
skipped() { echo "    SKIPPED CHECK [aarch64 $1]: not run here: $2"; }

echo "[ RUN  ] build_for_aarch64"
PROGS="test_classes test_os test_api test_static test_static_full test_threads test_thread_churn
       test_stats test_first_call test_oom test_dlopen test_prefixed test_deepbind
       libdeepbind_plugin.so test_debug test_unwind libreport_plugin_a.so
       libunwind_plugin_big.so libunwind_plugin_small.so debug/double_free debug/free_interior
       debug/overflow debug/use_after_free debug/header_write debug/realloc_freed
       debug/alloca_chain_changed debug/leak_pointer_in_register
       debug/leak_pointer_in_own_register"
targets=()
for p in $PROGS; do targets+=("$T/$p"); done
# Not the outer make's variables (MAKEFLAGS passes them down): an x86-only
# EXTRA_CFLAGS such as -march=native would break the aarch64 compiler.
if ! env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -j2 CC="$CROSS" BUILD="$OUT" EXTRA_CFLAGS= \
    lib "${targets[@]}" >"$TMP/make.log" 2>&1; then
    echo "    FAILED: make for aarch64:"
    sed 's/^/      /' "$TMP/make.log" | tail -40
    echo "[ FAIL ] build_for_aarch64"
    exit 1
fi
built=1
for p in $PROGS; do
    if [ -f "$T/$p.fail" ]; then
        echo "    FAILED: $p does not build for aarch64:"
        sed 's/^/      /' "$T/$p.fail" | tail -20
        built=0
    fi
done
if [ $built -eq 1 ]; then echo "[  OK  ] build_for_aarch64"; else echo "[ FAIL ] build_for_aarch64"; failed=1; fi

# run NAME [VAR=value ...] -- PROGRAM [ARGS...]: PROGRAM under qemu-aarch64,
# 120 s at most. Variables reach it through the environment (qemu passes
# its own on), but LD_PRELOAD, which would load into qemu itself, goes by -E.
# Its output is shown whole if it fails, its SKIPPED CHECK lines always.
run() {
    local name=$1 envs=() qargs=() rc t0 t1
    shift
    while [ "$1" != "--" ]; do
        case $1 in
        LD_PRELOAD=*) qargs+=(-E "$1") ;;
        *) envs+=("$1") ;;
        esac
        shift
    done
    shift
    echo "[ RUN  ] aarch64_$name"
    if [ ! -x "$1" ]; then
        echo "    FAILED: $1 was not built"
        echo "[ FAIL ] aarch64_$name"
        failed=1
        return
    fi
    t0=$(date +%s.%N)
    { env "${envs[@]}" timeout -k 5 120 qemu-aarch64 -L "$SYSROOT" "${qargs[@]}" "$@" \
        </dev/null >"$TMP/out" 2>&1; } 2>/dev/null
    rc=$?
    t1=$(date +%s.%N)
    grep "SKIPPED CHECK" "$TMP/out"
    if [ $rc -eq 0 ]; then
        echo "[  OK  ] aarch64_$name ($(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s)"
    else
        sed 's/^/    | /' "$TMP/out" | grep -v "SKIPPED CHECK" | tail -60
        echo "[ FAIL ] aarch64_$name (exit status $rc; 124: timed out)"
        failed=1
    fi
}

run size_classes -- "$T/test_classes"
run os_readers -- "$T/test_os"
run api CHECK_SKIP="$(
    skip realloc_to_zero_frees_and_returns_null "$RSS"
    skip free_sized_releases_blocks "$RSS"
    skip free_aligned_sized_releases_blocks "$RSS"
    skip cfree_releases_blocks "$RSS"
    skip malloc_trim_returns_reverse_freed_small_blocks_to_os "$RSS"
    skip calloc_zeroes_memory_that_was_dirtied_and_freed "$(slow 7)"
)" -- "$T/test_api"
run static CHECK_SKIP="$(
    skip a_program_with_raised_privileges_ignores_ebb_variables "$EXEC"
    skip the_process_ends_when_main_called_pthread_exit_and_its_last_thread_returns "$FORK_THREADS"
)" -- "$T/test_static"
run static_full CHECK_SKIP="$(
    skip a_program_with_raised_privileges_ignores_ebb_variables "$EXEC"
    skip the_process_ends_when_main_called_pthread_exit_and_its_last_thread_returns "$FORK_THREADS"
)" -- "$T/test_static_full"
# Debug mode in the fully static link (libgcc's unwinder is the program's
# own): it starts, and its leak report at exit finds no block of the C
# library's start-up lost (exit status 23 if it does).
run static_full_debug EBB_DEBUG=1 EBB_DEBUG_LEAK_EXITCODE=23 CHECK_SKIP="$(
    skip a_program_with_raised_privileges_ignores_ebb_variables "$EXEC"
    skip threads_allocate_and_free_across_each_other "$(slow 26)"
    skip debug_report_in_a_static_link_names_the_allocator "$FORK_THREADS"
    skip the_process_ends_when_main_called_pthread_exit_and_its_last_thread_returns "$FORK_THREADS"
)" -- "$T/test_static_full"
run threads CHECK_SKIP="$(
    skip a_reclaimed_segment_is_released_when_another_thread_frees_its_large_block "$RSS"
    skip malloc_trim_after_threads_exit_returns_their_memory "$RSS"
    skip producer_consumer_pair_reuses_memory_freed_by_the_consumer "$RSS"
    skip thread_that_only_frees_blocks_allocated_by_main "$RSS"
    skip threads_exit_holding_blocks_that_others_free_later "$RSS"
    skip stress_2_threads_random_sizes_cross_thread_frees "$(slow 15) (the 8-thread one runs)"
    skip key_destructors_that_allocate_leave_no_heap_behind "$REUSE"
    skip a_real_time_thread_waiting_for_a_lock_lets_its_holder_run "$FORK_THREADS"
)" -- "$T/test_threads"
run thread_churn CHECK_SKIP="$(
    skip thread_churn_100000_threads_does_not_grow_the_heap "starts 100,000 threads, more than 300 s under qemu-user (a thread start costs milliseconds there); it runs on x86-64"
    skip threads_that_exit_keeping_a_block_share_abandoned_segments "$RSS"
    skip threads_that_exit_keeping_a_page_each_fill_abandoned_segments "$RSS"
    skip memory_freed_into_abandoned_segments_comes_back_while_a_busy_thread_runs "$RSS"
    skip heaps_made_in_the_last_destructor_round_go_back "$RSS"
)" -- "$T/test_thread_churn"
run stats CHECK_SKIP="$(
    skip committed_bytes_cover_resident_slices_that_new_pages_reuse "$RSS"
    skip committed_bytes_drop_by_what_a_trim_gives_back "$RSS"
    skip telemetry_from_a_handler_inside_a_locked_allocator_call_gets_edeadlk "$FORK_THREADS"
    skip exit_from_a_handler_inside_a_locked_call_skips_the_stats_report "$EXEC"
    skip reports_of_two_exits_at_once_stay_whole "$EXEC"
)" -- "$T/test_stats"
run oom CHECK_SKIP="$(
    for c in rlimit_as_allocate_until_null_then_free_and_allocate_again \
        huge_block_fits_a_limit_that_leaves_it_no_room_to_grow \
        first_segment_fits_in_one_and_a_half_segments_of_address_space \
        refused_requests_unmap_the_huge_cache_and_retry \
        a_block_served_after_a_refused_request_leaves_errno_alone \
        a_request_that_can_never_fit_keeps_the_huge_cache \
        freed_blocks_are_given_back_before_a_request_fails \
        a_huge_realloc_gets_the_caches_back_before_it_fails \
        blocks_freed_by_another_thread_are_collected_before_a_request_fails \
        shrinking_realloc_with_no_memory_left_shrinks_in_place \
        blocks_of_an_idle_or_exited_owner_freed_elsewhere_serve_a_refused_request; do
        skip "$c" "$RLIMIT"
    done
)" -- "$T/test_oom"
run dlopen_closed -- "$T/test_dlopen" "$OUT/libebb.so"
run prefixed -- "$T/test_prefixed"
run deepbind_preloaded LD_PRELOAD="$OUT/libebb.so" -- "$T/test_deepbind"

# test_first_call's driver re-executes itself once per scenario (EXEC);
# six of its scenarios run here one process each, as the driver would start
# them: each exits 0, or with the code that says what went wrong.
echo "[ RUN  ] aarch64_first_call"
fc_failed=0
for sc in malloc calloc_huge aligned_alloc_huge_alignment pvalloc ebb_malloc secondary_thread; do
    { timeout -k 5 60 qemu-aarch64 -L "$SYSROOT" "$T/test_first_call" "$sc" </dev/null \
        >"$TMP/fc" 2>&1; } 2>/dev/null
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "    FAILED: $sc as the process's first allocator call: exit status $rc (tests/test_first_call.c, meaning())"
        sed 's/^/    | /' "$TMP/fc" | tail -20
        fc_failed=1
    fi
done
if [ $fc_failed -eq 0 ]; then echo "[  OK  ] aarch64_first_call"; else echo "[ FAIL ] aarch64_first_call"; failed=1; fi

skipped test_fork/fork_while_threads_allocate_child_allocates_and_starts_threads "$FORK_THREADS"
skipped test_fork/fork_from_a_secondary_thread_while_main_allocates "$(slow 45)"
skipped test_fork/a_child_of_fork_without_handlers_keeps_its_heap "$EXEC"
skipped test_fork/a_pending_cancel_never_acts_inside_the_allocator "$FORK_THREADS"
skipped test_fork/the_process_ends_when_main_called_pthread_exit_and_its_last_thread_returns "$FORK_THREADS"
skipped test_fork/a_child_forked_from_a_thread_ends_when_that_thread_returns "$FORK_THREADS"
skipped test_purge "most cases re-execute the program ($EXEC) or read RSS; the rest take 5-60 s each"

run debug_behaviour EBB_DEBUG=1 EBB_DEBUG_LEAKS=off CHECK_SKIP="$(
    skip a_big_calloc_is_not_made_resident "$RSS"
    skip realloc_shrinking_a_huge_block_gives_its_pages_back "$RSS"
    skip alignments_above_2_gib_are_served_sparse "$RSS"
    skip quarantine_is_bounded_counted_and_trimmed "$RSS"
    skip reuse_cache_is_bounded_and_drains_by_itself "$RSS"
    skip threads_allocate_and_free_across_each_other "$(slow 12)"
    skip verify_beside_running_threads_reports_nothing_false "$(slow 8)"
)" -- "$T/test_debug"
run debug_unwind EBB_DEBUG=1 EBB_DEBUG_LEAKS=off -- "$T/test_unwind"

# fault PROGRAM FAULT ALLOC_FN [VAR=value...]: tests/test_debug.sh's
# `expect`, shortened: killed by SIGABRT; "==ebb== ERROR: FAULT of <the
# pointer the program printed>"; "this call:" through main; "allocated at:"
# starting in ALLOC_FN.
echo "[ RUN  ] aarch64_debug_faults"
faults_failed=0
fault() {
    local prog=$1 what=$2 alloc_fn=$3 rc ptr
    shift 3
    { env EBB_DEBUG=1 "$@" timeout -k 5 60 qemu-aarch64 -L "$SYSROOT" "$D/$prog" </dev/null \
        >"$TMP/f.out" 2>"$TMP/f.err"; } 2>/dev/null
    rc=$?
    ptr=$(sed -n 's/^victim=//p' "$TMP/f.out")
    local why=""
    [ $rc -eq 134 ] || why="expected SIGABRT (status 134), got $rc"
    grep -q "^==ebb== ERROR: $what of $ptr (pid [0-9]*)$" "$TMP/f.err" ||
        why="$why; expected '==ebb== ERROR: $what of $ptr'"
    awk '/^  this call:/ { t = 1; next } /^  [a-z]/ { t = 0 } t' "$TMP/f.err" | grep -q " in main+" ||
        why="$why; the trace of this call should show main"
    awk '/^  allocated at:/ { t = 1; next } /^  [a-z]/ { t = 0 } t' "$TMP/f.err" | head -n 1 |
        grep -q " in $alloc_fn+" || why="$why; the allocation trace should start in $alloc_fn"
    if [ -n "$why" ]; then
        echo "    FAILED [$prog]: ${why#; }"
        sed 's/^/    | /' "$TMP/f.err" | head -40
        faults_failed=1
    fi
}
fault double_free "double free" allocate_victim
fault free_interior "free of an interior pointer" allocate_victim
fault overflow "heap-buffer-overflow" allocate_victim
fault use_after_free "heap-use-after-free" allocate_victim EBB_DEBUG_QUARANTINE=4096
fault header_write "corrupted block header" allocate_victim
fault realloc_freed "realloc of a freed block" allocate_victim
fault alloca_chain_changed "double free" leaf
if [ $faults_failed -eq 0 ]; then echo "[  OK  ] aarch64_debug_faults"; else echo "[ FAIL ] aarch64_debug_faults"; failed=1; fi

# The leak report at exit, with the only pointers to two blocks in another
# running thread's registers (x19, x20; reached by a signal, which must be
# one qemu-user can send: tests/os_shim.c, tgkill_top_two) and in the exiting
# thread's own callee-saved ones (x28, d15): exactly the third block lost.
# The one INCOMPLETE line allowed is for qemu-user's own thread.
echo "[ RUN  ] aarch64_debug_leaks"
leaks_failed=0
QEMU_THREAD="==ebb== INCOMPLETE: registers of 1 running thread not read (signals blocked, no answer, or status unreadable): blocks only they point to are counted lost"
for pair in leak_pointer_in_register:allocate_reached_via_register \
    leak_pointer_in_own_register:allocate_reached_via_own_register; do
    prog=${pair%%:*} fn=${pair#*:}
    { EBB_DEBUG=1 EBB_DEBUG_LEAKS=all timeout -k 5 60 qemu-aarch64 -L "$SYSROOT" "$D/$prog" \
        </dev/null >"$TMP/l.out" 2>"$TMP/l.err"; } 2>/dev/null
    rc=$?
    why=""
    [ $rc -eq 0 ] || why="expected exit 0, got $rc"
    grep -q '^==ebb== LEAK REPORT (pid [0-9]*): 300 bytes lost in 1 block$' "$TMP/l.err" ||
        why="$why; expected exactly the 300-byte block lost"
    n=$(awk '/still reachable, allocated at:/ { t = 1; next } /^==ebb==/ { t = 0 } t' "$TMP/l.err" |
        grep -c " in $fn+")
    [ "$n" -eq 2 ] || why="$why; the two blocks allocated from $fn should be still reachable (found $n)"
    if grep "INCOMPLETE" "$TMP/l.err" | grep -qvxF -- "$QEMU_THREAD"; then
        why="$why; an INCOMPLETE line other than the one for qemu-user's thread"
    fi
    grep -qxF -- "$QEMU_THREAD" "$TMP/l.err" &&
        echo "    SKIPPED CHECK [aarch64 $prog]: the report counts qemu-user's own thread (signals blocked) as not asked; that it says INCOMPLETE for no thread of the program's is checked, not that it says it for none"
    if [ -n "$why" ]; then
        echo "    FAILED [$prog]: ${why#; }"
        sed 's/^/    | /' "$TMP/l.err" | head -40
        leaks_failed=1
    fi
done
if [ $leaks_failed -eq 0 ]; then echo "[  OK  ] aarch64_debug_leaks"; else echo "[ FAIL ] aarch64_debug_leaks"; failed=1; fi

exit $failed
