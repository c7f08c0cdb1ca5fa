#!/usr/bin/env bash
# test_programs.sh MODE — real programs under LD_PRELOAD=libebb.so produce
# byte-identical output to the same run without it.
#
#   loaded   ebb really is loaded by LD_PRELOAD (/proc/<pid>/maps of a
#            preloaded `sleep` and `cat /proc/self/maps`, ebb_version through
#            ctypes in a preloaded python) and absent without it
#   python   /usr/bin/python3 (PYTHONMALLOC=malloc, PYTHONHASHSEED=0) running
#            tests/alloc_heavy.py: dicts, lists, strings, sorting, json, sqlite3
#   gcc      gcc -S and gcc -c of two test sources: same assembly, same
#            disassembly
#   git      init, add, several commits, log, diff, blame, gc, fsck on a
#            scratch repository with fixed names and dates
#   sort     sort of a million generated lines (several keys, parallel):
#            same sha256
#   unshare  util-linux unshare --user: unshare(CLONE_NEWUSER) fails with
#            EINVAL in a multi-threaded process, so it works under ebb only if
#            ebb starts no thread in a program that has none (skipped where
#            the system refuses user namespaces without ebb too)
#
# Exit 0 pass, 1 fail, 77 skip (a tool is missing; the last line says which).
set -u
MODE=${1:?usage: test_programs.sh loaded|python|gcc|git|sort|unshare}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIB=${TEST_LIB:-$ROOT/build/libebb.so}
case $LIB in /*) ;; *) LIB=$ROOT/$LIB ;; esac
[ -f "$LIB" ] || { echo "FAILED: $LIB does not exist"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ebb-programs.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export LC_ALL=C TZ=UTC
fails=0
fail() { echo "    FAILED: $*"; fails=$((fails + 1)); }
need() { command -v "$1" >/dev/null 2>&1 || { echo "$1 not installed"; exit 77; }; }

# run_both NAME FUNCTION: run FUNCTION (stdout, stderr captured) once plainly
# and once with LD_PRELOAD exported (every program it starts is preloaded);
# exit status, stdout and stderr must match, and the plain run must succeed.
run_both() {
    local name=$1 fn=$2
    mkdir -p "$TMP/base" "$TMP/ebb"
    (cd "$TMP/base" && unset LD_PRELOAD && "$fn") >"$TMP/$name.base.out" 2>"$TMP/$name.base.err"
    local rc_base=$?
    (cd "$TMP/ebb" && export LD_PRELOAD="$LIB" && "$fn") >"$TMP/$name.ebb.out" 2>"$TMP/$name.ebb.err"
    local rc_ebb=$?
    echo "    $name: $(wc -l <"$TMP/$name.base.out") lines of output, exit $rc_base plain / $rc_ebb with ebb"
    if [ $rc_base -ne 0 ]; then
        fail "$name: the plain run (without ebb) failed with exit $rc_base; stderr:"
        head -n 20 "$TMP/$name.base.err"
        return
    fi
    [ $rc_ebb -eq $rc_base ] || fail "$name: expected exit status $rc_base with ebb, got $rc_ebb"
    if ! cmp -s "$TMP/$name.base.out" "$TMP/$name.ebb.out"; then
        fail "$name: stdout differs with ebb preloaded (diff plain ebb, first 40 lines):"
        diff "$TMP/$name.base.out" "$TMP/$name.ebb.out" | head -n 40
    fi
    if ! cmp -s "$TMP/$name.base.err" "$TMP/$name.ebb.err"; then
        fail "$name: stderr differs with ebb preloaded (diff plain ebb, first 40 lines):"
        diff "$TMP/$name.base.err" "$TMP/$name.ebb.err" | head -n 40
    fi
}

# ---------------------------------------------------------------- loaded
mode_loaded() {
    need sleep
    echo "[ RUN  ] preloaded_processes_map_libebb"
    local n
    n=$(LD_PRELOAD="$LIB" cat /proc/self/maps | grep -c "libebb")
    [ "$n" -ge 1 ] || fail "cat /proc/self/maps under LD_PRELOAD: expected libebb mapped, found none"
    n=$(cat /proc/self/maps | grep -c "libebb")
    [ "$n" -eq 0 ] || fail "cat /proc/self/maps without LD_PRELOAD: expected no libebb, found $n lines"
    LD_PRELOAD="$LIB" sleep 10 &
    local pid=$! found=0
    for _ in $(seq 50); do
        if grep -q "$(basename "$LIB")" "/proc/$pid/maps" 2>/dev/null; then found=1; break; fi
        sleep 0.1
    done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    [ $found -eq 1 ] || fail "a preloaded sleep (pid $pid): expected $(basename "$LIB") in /proc/$pid/maps"
    if [ -x /usr/bin/python3 ]; then
        local v
        v=$(LD_PRELOAD="$LIB" /usr/bin/python3 -c 'import ctypes
lib = ctypes.CDLL(None)
lib.ebb_version.restype = ctypes.c_char_p
lib.malloc.restype = ctypes.c_void_p
lib.ebb_malloc_usable_size.argtypes = [ctypes.c_void_p]
lib.ebb_malloc_usable_size.restype = ctypes.c_size_t
p = lib.malloc(1000)
print(lib.ebb_version().decode(), lib.ebb_malloc_usable_size(p) >= 1000)' 2>&1)
        [ "$v" = "0.1.0 True" ] || fail "preloaded python3: expected ebb_version 0.1.0 and malloc giving ebb blocks ('0.1.0 True'), got '$v'"
    fi
    [ $fails -eq 0 ] && echo "[  OK  ] preloaded_processes_map_libebb" || echo "[ FAIL ] preloaded_processes_map_libebb"
}

# ---------------------------------------------------------------- python
py_workload() {
    PYTHONMALLOC=malloc PYTHONHASHSEED=0 /usr/bin/python3 -I "$ROOT/tests/alloc_heavy.py"
}
mode_python() {
    [ -x /usr/bin/python3 ] || { echo "/usr/bin/python3 not installed"; exit 77; }
    /usr/bin/python3 -c 'import sqlite3, json' 2>/dev/null || { echo "python3 without sqlite3/json modules"; exit 77; }
    echo "[ RUN  ] python_allocation_heavy_script_same_output"
    run_both python py_workload
    grep -q '^done$' "$TMP/python.base.out" || fail "python: the script did not run to the end"
    [ $fails -eq 0 ] && echo "[  OK  ] python_allocation_heavy_script_same_output" || echo "[ FAIL ] python_allocation_heavy_script_same_output"
}

# ---------------------------------------------------------------- gcc
gcc_workload() {
    local f flags="-std=c11 -O2 -g0 -D_GNU_SOURCE -I$ROOT/include -I$ROOT/tests -I$ROOT/src"
    for f in test_api test_threads; do
        gcc $flags -S "$ROOT/tests/$f.c" -o "$f.s" || return 1
        gcc $flags -c "$ROOT/tests/$f.c" -o "$f.o" || return 1
        echo "== $f.s"
        cat "$f.s"
        echo "== $f.o"
        objdump -d --no-show-raw-insn "$f.o" | tail -n +3
    done
}
mode_gcc() {
    need gcc
    need objdump
    echo "[ RUN  ] gcc_compiles_to_the_same_assembly_and_object"
    run_both gcc gcc_workload
    [ $fails -eq 0 ] && echo "[  OK  ] gcc_compiles_to_the_same_assembly_and_object" || echo "[ FAIL ] gcc_compiles_to_the_same_assembly_and_object"
}

# ---------------------------------------------------------------- git
git_workload() {
    export HOME=$PWD/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
    export GIT_AUTHOR_NAME="Ebb Tester" GIT_AUTHOR_EMAIL="ebb@example.invalid"
    export GIT_COMMITTER_NAME="Ebb Tester" GIT_COMMITTER_EMAIL="ebb@example.invalid"
    mkdir -p home repo && cd repo || return 1
    git init -q -b main . || return 1
    local c
    for c in 1 2 3 4 5 6; do
        export GIT_AUTHOR_DATE="2024-01-0${c}T12:00:00Z" GIT_COMMITTER_DATE="2024-01-0${c}T12:00:00Z"
        # 120 files of 150 lines; each commit rewrites a different share of them.
        awk -v c=$c 'BEGIN {
            system("mkdir -p src/a src/b");
            for (f = 0; f < 120; f++) {
                if (c > 1 && (f + c) % 3 != 0) continue;
                file = sprintf("src/%s/f%03d.txt", (f % 2 ? "a" : "b"), f);
                for (l = 0; l < 150; l++)
                    printf "line %d of file %d: value %d commit %d\n", l, f, (l * 31 + f * 17 + c * (l % 5)) % 1009, (l % 13 == 0 ? c : 0) > file;
                close(file);
            }
        }'
        [ $c -eq 4 ] && git rm -q src/a/f001.txt src/b/f010.txt
        [ $c -eq 5 ] && git mv src/a/f003.txt src/a/renamed.txt
        git add -A && git commit -q -m "commit $c" || return 1
    done
    git log --stat --format='%H %an %ad %s'
    git diff HEAD~4 HEAD --stat
    git diff HEAD~3 HEAD | sha256sum
    git log -p --follow -- src/a/renamed.txt | sha256sum
    git blame -s src/b/f000.txt | head -n 20
    git grep -c "commit 6" | head -n 10
    git gc -q --aggressive || return 1
    git fsck --full --strict 2>&1
    git cat-file --batch-all-objects --batch-check | sort
    git rev-parse HEAD HEAD~5
    git show HEAD~2:src/b/f002.txt | sha256sum
}
mode_git() {
    need git
    need awk
    echo "[ RUN  ] git_repository_operations_same_output"
    run_both git git_workload
    [ $fails -eq 0 ] && echo "[  OK  ] git_repository_operations_same_output" || echo "[ FAIL ] git_repository_operations_same_output"
}

# ---------------------------------------------------------------- sort
sort_workload() {
    local input=$TMP/million.txt
    sort -S 16M --parallel=2 "$input" | sha256sum
    sort -S 16M --parallel=2 -t ' ' -k2,2n -k1,1r "$input" | sha256sum
    sort -u -t ' ' -k3,3 "$input" | sha256sum
    sort -R --random-source="$input" "$input" | sha256sum
}
mode_sort() {
    need sort
    need sha256sum
    need awk
    echo "[ RUN  ] sort_of_a_million_lines_same_sha256"
    awk 'BEGIN { for (i = 0; i < 1000000; i++) printf "%08x %d w%d\n", (i * 2654435761) % 4294967296, (i * 7919) % 1000003, i % 5003 }' >"$TMP/million.txt"
    [ "$(wc -l <"$TMP/million.txt")" -eq 1000000 ] || fail "could not generate the input"
    run_both sort sort_workload
    cat "$TMP/sort.ebb.out"
    [ $fails -eq 0 ] && echo "[  OK  ] sort_of_a_million_lines_same_sha256" || echo "[ FAIL ] sort_of_a_million_lines_same_sha256"
}

# ---------------------------------------------------------------- unshare
unshare_workload() {
    unshare --user sh -c 'echo "in a new user namespace"; grep "^Threads:" /proc/self/status'
    unshare --user --map-root-user sh -c 'id -u; tr a-z A-Z </etc/os-release | sort | head -n 3'
}
mode_unshare() {
    need unshare
    need sh
    if ! unshare --user true 2>/dev/null; then
        echo "user namespaces are refused here even without ebb (unshare --user true fails)"
        exit 77
    fi
    echo "[ RUN  ] unshare_user_namespace_works_as_without_ebb"
    run_both unshare unshare_workload
    cat "$TMP/unshare.ebb.out"
    [ $fails -eq 0 ] && echo "[  OK  ] unshare_user_namespace_works_as_without_ebb" || echo "[ FAIL ] unshare_user_namespace_works_as_without_ebb"
}

case $MODE in
    loaded) mode_loaded ;;
    unshare) mode_unshare ;;
    python) mode_python ;;
    gcc) mode_gcc ;;
    git) mode_git ;;
    sort) mode_sort ;;
    *) echo "unknown mode $MODE"; exit 2 ;;
esac
[ $fails -eq 0 ]
