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
EBB_EXPORT int mallopt(int param, int value) { return ebb_mallopt(param, value); }
EBB_EXPORT void cfree(void *p) { alloc_free_inline(p); }

EBB_EXPORT void *__libc_malloc(size_t size) { return alloc_malloc_inline(size); }
EBB_EXPORT void __libc_free(void *p) { alloc_free_inline(p); }
EBB_EXPORT void *__libc_calloc(size_t n, size_t size) { return ebb_calloc(n, size); }
EBB_EXPORT void *__libc_realloc(void *p, size_t size) { return ebb_realloc(p, size); }
EBB_EXPORT void *__libc_memalign(size_t alignment, size_t size) { return ebb_memalign(alignment, size); }
EBB_EXPORT void *__libc_valloc(size_t size) { return ebb_valloc(size); }
EBB_EXPORT void *__libc_pvalloc(size_t size) { return ebb_pvalloc(size); }

/* glibc's reporting calls, filled from stats.c. glibc's arena vocabulary maps
 * onto ebb as: arena = segment address space, hblks/hblkhd = huge blocks,
 * uordblks = live bytes, fordblks = free bytes inside segments. */
EBB_EXPORT struct mallinfo2 mallinfo2(void)
{
    ebb_glibc_stats_t s;
    stats_collect(&s);
    struct mallinfo2 mi = {0};
    mi.arena = s.segment_bytes;
    mi.ordblks = s.segments;
    mi.hblks = s.huge_count;
    mi.hblkhd = s.huge_bytes;
    mi.uordblks = s.live_bytes;
    mi.fordblks = s.segment_bytes > s.live_bytes ? s.segment_bytes - s.live_bytes : 0;
    mi.usmblks = 0;
    mi.keepcost = 0;
    return mi;
}

static int clamp_int(size_t v)
{
    return v > (size_t)INT_MAX ? INT_MAX : (int)v;
}

EBB_EXPORT struct mallinfo mallinfo(void)
{
    struct mallinfo2 m2 = mallinfo2();
    struct mallinfo mi = {0};
    mi.arena = clamp_int(m2.arena);
    mi.ordblks = clamp_int(m2.ordblks);
    mi.hblks = clamp_int(m2.hblks);
    mi.hblkhd = clamp_int(m2.hblkhd);
    mi.uordblks = clamp_int(m2.uordblks);
    mi.fordblks = clamp_int(m2.fordblks);
    return mi;
}

/* Decimal without stdio (malloc_stats must not allocate). */
static size_t fmt_size(char *out, size_t v)
{
    char tmp[24];
    size_t n = 0, len = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        out[len++] = tmp[--n];
    return len;
}

static size_t fmt_line(char *out, const char *label, size_t v)
{
    size_t len = strlen(label);
    memcpy(out, label, len);
    len += fmt_size(out + len, v);
    out[len++] = '\n';
    return len;
}

EBB_EXPORT void malloc_stats(void)
{
    ebb_glibc_stats_t s;
    stats_collect(&s);
    char buf[512];
    size_t n = 0;
    n += fmt_line(buf + n, "ebb segments:       ", s.segments);
    n += fmt_line(buf + n, "system bytes     = ", s.mapped_bytes);
    n += fmt_line(buf + n, "in use bytes     = ", s.live_bytes + s.huge_bytes);
    n += fmt_line(buf + n, "huge blocks      = ", s.huge_count);
    n += fmt_line(buf + n, "huge bytes       = ", s.huge_bytes);
    os_write_stderr(buf, n);
}

EBB_EXPORT int malloc_info(int options, FILE *fp)
{
    if (options != 0 || fp == NULL) {
        errno = EINVAL;
        return -1;
    }
    ebb_glibc_stats_t s;
    stats_collect(&s);
    fprintf(fp,
            "<malloc version=\"ebb-%s\">\n"
            "<system type=\"current\" size=\"%zu\"/>\n"
            "<segments count=\"%zu\" size=\"%zu\" live=\"%zu\"/>\n"
            "<huge count=\"%zu\" size=\"%zu\"/>\n"
            "</malloc>\n",
            ebb_version(), s.mapped_bytes, s.segments, s.segment_bytes, s.live_bytes,
            s.huge_count, s.huge_bytes);
    return 0;
}
