#!/usr/bin/env bash
# test_exports.sh — libebb.so exports exactly its public names, and its soname
# carries the ABI version.
#
#   exports_only_public_names   nm -D --defined-only lists nothing but the
#                               standard allocation names, the glibc-specific
#                               ones, dlopen, dlclose and ebb_* (plus the version
#                               node itself)
#   exports_every_public_name   each of those names is there, as a function
#   standard_names_are_unversioned  malloc & co carry no symbol version: the
#                               dynamic linker lets only an unversioned
#                               definition satisfy a program's reference to
#                               malloc@GLIBC_2.2.5, so a versioned one would not
#                               interpose under LD_PRELOAD
#   soname_is_libebb_so_0       readelf -d shows SONAME libebb.so.0
#   cold_arrays_take_no_file_space  the big zero-initialised arrays
#                               (ebb_cold_bss, src/internal.h) are in no-bits
#                               sections: .lbss, if there, is NOBITS and the
#                               library file stays under 2 MiB (the segment map
#                               alone is 8 MiB); and .data with the small
#                               globals of .bss fits in one page
#   archive_defines_only_public_names  libebb.a (next to the library) gives
#                               a program's link nothing but the standard and
#                               glibc names and ebb_*: every internal name is
#                               local (review finding: a program with a
#                               function named lock_acquire did not link)
set -u
LIB=${1:-build/libebb.so}
fails=0
fail() { echo "    FAILED $*"; fails=$((fails + 1)); }

for tool in nm readelf; do
    command -v $tool >/dev/null || { echo "$tool not installed (binutils)"; exit 77; }
done
[ -f "$LIB" ] || { echo "FAILED: $LIB does not exist"; exit 1; }

# The standard names ebb must provide when it is the process allocator.
STANDARD="malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign
valloc pvalloc malloc_usable_size free_sized free_aligned_sized malloc_trim cfree mallopt
mallinfo mallinfo2 malloc_stats malloc_info
__libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign __libc_valloc
__libc_pvalloc __libc_mallopt __libc_mallinfo
dlopen dlclose"
# dlopen is there so that a library loaded with RTLD_DEEPBIND still uses ebb,
# dlclose so that debug mode's capture cache knows of unloads
# (src/override_dlopen.c).
# Every function of include/ebb.h.
EBB_NAMES=$(sed -n 's/^EBB_API[^(]*[ *]\(ebb_[a-z0-9_]*\)(.*/\1/p' "$(dirname "$0")/../include/ebb.h")

# Version definitions (readelf -V): their names appear in nm -D as absolute
# symbols and are allowed, nothing else absolute is.
VERSION_NODES=$(readelf -V --wide "$LIB" | awk '/Version definition section/ {d=1; next}
    /Version needs section/ {d=0} d && /Name:/ { for (i = 1; i <= NF; i++) if ($i == "Name:") print $(i+1) }')

echo "[ RUN  ] exports_only_public_names"
before=$fails
# Lines: "address type name[@@version]"
while read -r _ type name; do
    base=${name%%@*}
    case " $(echo $STANDARD) " in
        *" $base "*) continue ;;
    esac
    case $base in
        ebb_*) continue ;;
    esac
    if [ "$type" = A ] && grep -qxF "$base" <<<"$VERSION_NODES"; then
        continue
    fi
    fail "unexpected exported symbol: '$name' (type $type); only the public allocation names and ebb_* may be exported"
done < <(nm -D --defined-only "$LIB")
[ $fails -eq $before ] && echo "[  OK  ] exports_only_public_names" || echo "[ FAIL ] exports_only_public_names"

echo "[ RUN  ] exports_every_public_name"
before=$fails
[ -n "$EBB_NAMES" ] || fail "could not read the ebb_ names from include/ebb.h"
for name in $STANDARD $EBB_NAMES; do
    line=$(nm -D --defined-only "$LIB" | awk -v n="$name" '{ s = $3; sub(/@.*/, "", s); if (s == n) print $2 }' | head -n 1)
    if [ -z "$line" ]; then
        fail "expected '$name' to be exported, it is not"
    elif [ "$line" != T ] && [ "$line" != W ] && [ "$line" != i ]; then
        fail "expected '$name' to be an exported function (T/W/i), got type '$line'"
    fi
done
[ $fails -eq $before ] && echo "[  OK  ] exports_every_public_name" || echo "[ FAIL ] exports_every_public_name"

echo "[ RUN  ] standard_names_are_unversioned"
before=$fails
for name in $STANDARD; do
    full=$(nm -D --defined-only "$LIB" | awk -v n="$name" '{ s = $3; sub(/@.*/, "", s); if (s == n) print $3 }' | head -n 1)
    case $full in
        *@*) fail "expected '$name' without a symbol version, got '$full' (it would not interpose $name@GLIBC_2.2.5)" ;;
    esac
done
[ $fails -eq $before ] && echo "[  OK  ] standard_names_are_unversioned" || echo "[ FAIL ] standard_names_are_unversioned"

echo "[ RUN  ] soname_is_libebb_so_0"
before=$fails
soname=$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ "$soname" = libebb.so.0 ] || fail "expected SONAME libebb.so.0, got '${soname:-none}'"
[ $fails -eq $before ] && echo "[  OK  ] soname_is_libebb_so_0" || echo "[ FAIL ] soname_is_libebb_so_0"

echo "[ RUN  ] cold_arrays_take_no_file_space"
before=$fails
lbss_type=$(readelf -S -W "$LIB" | awk '$2 == ".lbss" { print $3 } $3 == ".lbss" { print $4 }')
[ -z "$lbss_type" ] || [ "$lbss_type" = NOBITS ] ||
    fail ".lbss should be a NOBITS section (no bytes in the file); it is $lbss_type"
size=$(stat -c %s "$LIB")
[ "$size" -lt $((2 * 1024 * 1024)) ] ||
    fail "libebb.so is $size bytes: a big zero-initialised array is stored in the file"
# .data and .bss: start of one, end of the other, in the same page.
section() { # name -> "address size" (hex, without 0x)
    readelf -S -W "$LIB" | awk -v n="$1" '{ for (i = 1; i <= NF; i++) if ($i == n) print $(i + 2), $(i + 4) }'
}
if [ -n "$lbss_type" ]; then # the GCC build, where ebb_cold_bss places the big arrays
    read -r data_at data_size < <(section .data)
    read -r bss_at bss_size < <(section .bss)
    first=$((16#$data_at / 4096)) last=$(((16#$bss_at + 16#$bss_size - 1) / 4096))
    [ "$first" -eq "$last" ] ||
        fail ".data (0x$data_at) to the end of .bss (0x$bss_at + 0x$bss_size) spans $((last - first + 1)) pages;" \
             "keep the small globals in one (ebb_cold_bss for big arrays)"
fi
[ $fails -eq $before ] && echo "[  OK  ] cold_arrays_take_no_file_space" || echo "[ FAIL ] cold_arrays_take_no_file_space"

echo "[ RUN  ] archive_defines_only_public_names"
before=$fails
ARCHIVE=$(dirname "$LIB")/libebb.a
if [ -f "$ARCHIVE" ]; then
    # Lines: "address type name"; the archive has no dlopen or dlclose.
    while read -r _ type name; do
        case " $(echo $STANDARD) " in
            *" $name "*) continue ;;
        esac
        case $name in
            ebb_*) continue ;;
        esac
        fail "libebb.a defines '$name' (type $type) for the program's link; only the public names may be"
    done < <(nm -g --defined-only "$ARCHIVE" | grep -v '^$' | grep -v ':$')
    n=$(nm -g --defined-only "$ARCHIVE" | grep -c ' T malloc$')
    [ "$n" -eq 1 ] || fail "libebb.a should define malloc once, found $n"
else
    fail "$ARCHIVE does not exist"
fi
[ $fails -eq $before ] && echo "[  OK  ] archive_defines_only_public_names" || echo "[ FAIL ] archive_defines_only_public_names"

[ $fails -eq 0 ]
