# tests/purge_tests.sh — the memory-return tests, sourced by tests/run_tests.sh
# (after its run_test function and $T are defined, with the other run_test lines):
#
#     source tests/purge_tests.sh
#
# They measure RSS, so they run one at a time like every other test. Cases that
# need other EBB_* options re-execute the program themselves; the TSan stress
# runs with a short purge delay so the scavenger's own timed passes race the
# forced ones too.

run_test purge 240 -- "$T/test_purge"
run_test purge_hooks 240 -- "$T/test_purge_hooks"
run_test purge_tsan 400 \
    EBB_PURGE_DELAY=10 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    -- "$T/test_purge_tsan"
