#!/usr/bin/env bash
# test_cross_build.sh — ebb builds for aarch64 (SPEC: "aarch64 should build").
#
# This machine is x86-64, so the aarch64 code paths (os.c's register copy,
# trace.c without its fast unwinder, the test's aarch64 register holders)
# are otherwise never compiled: an unused function there once broke the
# aarch64 build (-Werror) with every x86-64 test passing.
#
# Cases:
#   library_builds_for_aarch64      `make lib` with aarch64-linux-gnu-gcc and
#                                   the project's flags: libebb.so and libebb.a
#                                   are aarch64 objects
#   os_test_builds_for_aarch64      tests/test_os.c (its aarch64 register
#                                   holders) compiles and links against the
#                                   objects (obj/libebb-internal.a)
# Nothing is run here: tests/test_qemu_aarch64.sh runs the aarch64 build
# under qemu-user. (This header once said qemu-user could not deliver the
# register pass's signal: it delivers real-time signals, all but the two
# highest, which it cannot send at all (tgkill: EINVAL); the pass now takes
# the next one down, src/os.c.)
#
# Needs gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (.ci/run installs
# them); without the compiler the test is skipped (exit 77), not passed.
set -u
cd "$(dirname "$0")/.."
CROSS=aarch64-linux-gnu-gcc
if ! command -v "$CROSS" >/dev/null; then
    echo "no $CROSS here (apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"
    exit 77
fi
OUT=${TEST_BUILD:-$PWD/build}/aarch64
rm -rf "$OUT"
mkdir -p "$OUT"
failed=0

echo "[ RUN  ] library_builds_for_aarch64"
# Not the outer make's variables (MAKEFLAGS passes them down): an x86-only
# EXTRA_CFLAGS such as -march=native would break the aarch64 compiler.
if ! env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s CC="$CROSS" BUILD="$OUT" EXTRA_CFLAGS= lib \
        "$OUT/obj/libebb-internal.a" >"$OUT/make.log" 2>&1; then
    echo "    FAILED: make lib for aarch64:"
    sed 's/^/      /' "$OUT/make.log" | tail -40
    echo "[ FAIL ] library_builds_for_aarch64"
    exit 1
fi
if readelf -h "$OUT/libebb.so" | grep -q 'Machine:.*AArch64' &&
    readelf -h "$OUT/libebb.a" 2>/dev/null | grep -q 'Machine:.*AArch64'; then
    echo "[  OK  ] library_builds_for_aarch64"
else
    echo "    FAILED: libebb.so and libebb.a should hold AArch64 objects:"
    readelf -h "$OUT/libebb.so" 2>&1 | grep Machine | sed 's/^/      /'
    echo "[ FAIL ] library_builds_for_aarch64"
    failed=1
fi

echo "[ RUN  ] os_test_builds_for_aarch64"
if "$CROSS" -std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -fno-builtin-malloc \
    -fno-builtin-free -Iinclude -Itests tests/test_os.c -o "$OUT/test_os" \
    "$OUT/obj/libebb-internal.a" -lpthread >"$OUT/test_os.log" 2>&1 &&
    readelf -h "$OUT/test_os" | grep -q 'Machine:.*AArch64'; then
    echo "[  OK  ] os_test_builds_for_aarch64"
else
    echo "    FAILED: tests/test_os.c for aarch64:"
    sed 's/^/      /' "$OUT/test_os.log" | tail -40
    echo "[ FAIL ] os_test_builds_for_aarch64"
    failed=1
fi
exit $failed
