/*
 * override.c — the standard C allocation names, and glibc's own entry points,
 * so that when ebb is the process allocator (preloaded or linked) every block
 * of the process comes from ebb and no block ever crosses allocators.
 *
 * malloc and free inline the fast paths (alloc.h); the rest are one direct
 * jump to their ebb_ twins (the library binds its own symbols locally, see
 * -Bsymbolic-functions in the Makefile).
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define EBB_EXPORT __attribute__((visibility("default")))

/* Not declared by glibc's headers (or only by newer ones). */
EBB_EXPORT void cfree(void *p);
EBB_EXPORT void free_sized(void *p, size_t size);
EBB_EXPORT void free_aligned_sized(void *p, size_t alignment, size_t size);
EBB_EXPORT void *__libc_malloc(size_t size);
EBB_EXPORT void __libc_free(void *p);
EBB_EXPORT void *__libc_calloc(size_t n, size_t size);
EBB_EXPORT void *__libc_realloc(void *p, size_t size);
EBB_EXPORT void *__libc_memalign(size_t alignment, size_t size);
EBB_EXPORT void *__libc_valloc(size_t size);
EBB_EXPORT void *__libc_pvalloc(size_t size);
EBB_EXPORT int __libc_mallopt(int param, int value);
EBB_EXPORT struct mallinfo __libc_mallinfo(void);

EBB_EXPORT void *malloc(size_t size)
{
    return alloc_malloc_inline(size);
}

EBB_EXPORT void free(void *p)
{
    alloc_free_inline(p);
}

EBB_EXPORT void *calloc(size_t n, size_t size) { return ebb_calloc(n, size); }
EBB_EXPORT void *realloc(void *p, size_t size) { return ebb_realloc(p, size); }
EBB_EXPORT void *reallocarray(void *p, size_t n, size_t size) { return ebb_reallocarray(p, n, size); }
EBB_EXPORT int posix_memalign(void **out, size_t alignment, size_t size)
{
    return ebb_posix_memalign(out, alignment, size);
}
EBB_EXPORT void *aligned_alloc(size_t alignment, size_t size) { return ebb_aligned_alloc(alignment, size); }
EBB_EXPORT void *memalign(size_t alignment, size_t size) { return ebb_memalign(alignment, size); }
EBB_EXPORT void *valloc(size_t size) { return ebb_valloc(size); }
EBB_EXPORT void *pvalloc(size_t size) { return ebb_pvalloc(size); }
EBB_EXPORT size_t malloc_usable_size(void *p) { return ebb_malloc_usable_size(p); }
EBB_EXPORT void free_sized(void *p, size_t size) { ebb_free_sized(p, size); }
EBB_EXPORT void free_aligned_sized(void *p, size_t alignment, size_t size)
{
    ebb_free_aligned_sized(p, alignment, size);
}
EBB_EXPORT int malloc_trim(size_t pad) { return ebb_malloc_trim(pad); }

/* Debug mode's stack traces start at the caller of these. */
void override_register_entry_points(void)
{
    const void *entries[] = {
        (const void *)malloc, (const void *)free, (const void *)calloc, (const void *)realloc,
        (const void *)reallocarray, (const void *)posix_memalign, (const void *)aligned_alloc,
        (const void *)memalign, (const void *)valloc, (const void *)pvalloc,
        (const void *)malloc_usable_size, (const void *)free_sized, (const void *)free_aligned_sized,
        (const void *)cfree, (const void *)__libc_malloc, (const void *)__libc_free,
        (const void *)__libc_calloc, (const void *)__libc_realloc, (const void *)__libc_memalign,
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        trace_add_entry_point(entries[i]);
}
EBB_EXPORT int mallopt(int param, int value) { return ebb_mallopt(param, value); }
EBB_EXPORT void cfree(void *p) { alloc_free_inline(p); }

EBB_EXPORT void *__libc_malloc(size_t size) { return alloc_malloc_inline(size); }
EBB_EXPORT void __libc_free(void *p) { alloc_free_inline(p); }
EBB_EXPORT void *__libc_calloc(size_t n, size_t size) { return ebb_calloc(n, size); }
EBB_EXPORT void *__libc_realloc(void *p, size_t size) { return ebb_realloc(p, size); }
EBB_EXPORT void *__libc_memalign(size_t alignment, size_t size) { return ebb_memalign(alignment, size); }
EBB_EXPORT void *__libc_valloc(size_t size) { return ebb_valloc(size); }
EBB_EXPORT void *__libc_pvalloc(size_t size) { return ebb_pvalloc(size); }
/* Public glibc names too (GLIBC_2.2.5): under LD_PRELOAD they reached
 * glibc's own allocator, which then reported nothing of ebb's blocks, and a
 * fully static program that called one linked libc.a's malloc beside ebb's
 * (review finding). */
EBB_EXPORT int __libc_mallopt(int param, int value) { return ebb_mallopt(param, value); }

/* glibc's reporting calls, filled from the snapshot (stats.c). glibc's
 * vocabulary maps onto ebb as:
 *   arena    committed bytes outside huge mappings (segments, metadata)
 *   ordblks  segments            hblks/hblkhd  huge blocks / their mappings
 *   uordblks live bytes in segments (so uordblks + hblkhd ~ all in use)
 *   fordblks arena - uordblks    keepcost      bytes waiting to be purged
 * so the usual "in use = uordblks + hblkhd" and "free = fordblks" hold. */
EBB_EXPORT struct mallinfo2 mallinfo2(void)
{
    struct ebb_stats st;
    uint64_t seg_live;
    stats_snapshot(&st, &seg_live);
    uint64_t arena = st.committed_bytes > st.huge_bytes ? st.committed_bytes - st.huge_bytes : 0;
    if (arena < seg_live)
        arena = seg_live;
    struct mallinfo2 mi = {0};
    mi.arena = arena;
    mi.ordblks = st.segments;
    mi.hblks = st.huge_blocks;
    mi.hblkhd = st.huge_bytes;
    mi.uordblks = seg_live;
    mi.fordblks = arena - seg_live;
    mi.usmblks = 0;
    mi.keepcost = st.purgeable_bytes;
    return mi;
}

static int clamp_int(size_t v)
{
    return v > (size_t)INT_MAX ? INT_MAX : (int)v;
}

static struct mallinfo mallinfo_in_ints(void)
{
    struct mallinfo2 m2 = mallinfo2();
    struct mallinfo mi = {0};
    mi.arena = clamp_int(m2.arena);
    mi.ordblks = clamp_int(m2.ordblks);
    mi.hblks = clamp_int(m2.hblks);
    mi.hblkhd = clamp_int(m2.hblkhd);
    mi.uordblks = clamp_int(m2.uordblks);
    mi.fordblks = clamp_int(m2.fordblks);
    mi.keepcost = clamp_int(m2.keepcost);
    return mi;
}

EBB_EXPORT struct mallinfo mallinfo(void) { return mallinfo_in_ints(); }
EBB_EXPORT struct mallinfo __libc_mallinfo(void) { return mallinfo_in_ints(); }

/* glibc prints per-arena totals; ebb prints its snapshot's main lines, without
 * stdio (malloc_stats must not allocate). */
EBB_EXPORT void malloc_stats(void)
{
    struct ebb_stats st;
    uint64_t seg_live;
    stats_snapshot(&st, &seg_live);
    text_t t;
    text_init(&t, 2);
    text_add(&t, "ebb segments:       ");
    text_add_u64(&t, st.segments, 0);
    text_add(&t, "\nsystem bytes     = ");
    text_add_u64(&t, st.committed_bytes, 0);
    text_add(&t, "\nin use bytes     = ");
    text_add_u64(&t, st.live_bytes, 0);
    text_add(&t, "\nhuge blocks      = ");
    text_add_u64(&t, st.huge_blocks, 0);
    text_add(&t, "\nhuge bytes       = ");
    text_add_u64(&t, st.huge_bytes, 0);
    text_add(&t, "\nreserved bytes   = ");
    text_add_u64(&t, st.reserved_bytes, 0);
    text_add(&t, "\n");
    text_flush(&t);
}

/* As glibc's: options must be 0, else EINVAL is returned (not -1 with errno,
 * review finding); a NULL stream gets the same answer instead of a crash. */
EBB_EXPORT int malloc_info(int options, FILE *fp)
{
    if (options != 0 || fp == NULL)
        return EINVAL;
    struct ebb_stats st;
    uint64_t seg_live;
    stats_snapshot(&st, &seg_live);
    fprintf(fp,
            "<malloc version=\"ebb-%s\">\n"
            "<system type=\"current\" size=\"%llu\"/>\n"
            "<system type=\"reserved\" size=\"%llu\"/>\n"
            "<segments count=\"%llu\" live=\"%llu\"/>\n"
            "<huge count=\"%llu\" size=\"%llu\"/>\n"
            "<total type=\"live\" size=\"%llu\"/>\n"
            "</malloc>\n",
            ebb_version(), (unsigned long long)st.committed_bytes,
            (unsigned long long)st.reserved_bytes, (unsigned long long)st.segments,
            (unsigned long long)seg_live, (unsigned long long)st.huge_blocks,
            (unsigned long long)st.huge_bytes, (unsigned long long)st.live_bytes);
    return 0;
}
