/*
 * size_hist.c — what size-class rounding costs a program, against glibc.
 *
 * An LD_PRELOAD interposer for single-threaded programs (sqlite3, jq): it
 * forwards malloc/calloc/realloc/free and the aligned calls to
 * build/libebb-prefixed.so's ebb_* functions and remembers each live block's
 * requested size in a side table of its own (an mmap, so the table does not
 * allocate through the functions it watches). At exit it prints, at the
 * moment ebb's usable bytes peaked: the bytes requested, ebb's usable bytes,
 * and what glibc's chunks for the same requests would take (request + 8
 * rounded up to 16, at least 32; from 128 KiB up a page-rounded mmap), then
 * the same by block size, and every request size counted.
 *
 *   cc -O2 -shared -fPIC -o /tmp/size_hist.so bench/programs/size_hist.c \
 *      -Lbuild -l:libebb-prefixed.so -Wl,-rpath,$PWD/build
 *   LD_PRELOAD=/tmp/size_hist.so sqlite3 :memory: < script.sql
 *   (SIZE_HIST_OUT=file: the report there rather than on stderr)
 *
 * Not thread-safe: a measuring tool, not part of ebb.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *ebb_malloc(size_t);
void ebb_free(void *);
void *ebb_calloc(size_t, size_t);
void *ebb_realloc(void *, size_t);
size_t ebb_malloc_usable_size(void *);
int ebb_posix_memalign(void **, size_t, size_t);
void *ebb_aligned_alloc(size_t, size_t);
void *ebb_memalign(size_t, size_t);

#define TABLE_SLOTS ((size_t)1 << 24) /* open addressing: 16 M live blocks at most */
#define BUCKETS 48                    /* block sizes by power of two */
#define EXACT_MAX 65536               /* request sizes counted one by one */

static struct entry { uintptr_t p; size_t req; } *table;
static size_t live_req, live_ebb, live_glibc, live_count;
static size_t peak_ebb, peak_req, peak_glibc, peak_count, peak_snap;
static size_t b_count[BUCKETS], b_req[BUCKETS], b_ebb[BUCKETS], b_glibc[BUCKETS];
static size_t s_count[BUCKETS], s_req[BUCKETS], s_ebb[BUCKETS], s_glibc[BUCKETS];
static size_t exact[EXACT_MAX + 1];
static size_t n_alloc, n_free, n_realloc, n_realloc_moved;

static size_t glibc_chunk(size_t req)
{
    if (req >= 128 * 1024)
        return (req + 16 + 4095) & ~(size_t)4095;
    size_t c = (req + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

static int bucket(size_t n)
{
    int b = 0;
    while (b < BUCKETS - 1 && ((size_t)1 << b) < n)
        b++;
    return b;
}

static size_t slot(uintptr_t p)
{
    return (size_t)(((p >> 4) * 0x9E3779B97F4A7C15ull) >> 40) & (TABLE_SLOTS - 1);
}

static void track(void *p, size_t req)
{
    if (p == NULL)
        return;
    if (table == NULL) {
        table = mmap(NULL, sizeof *table * TABLE_SLOTS, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (table == MAP_FAILED)
            abort();
    }
    size_t i = slot((uintptr_t)p);
    while (table[i].p)
        i = (i + 1) & (TABLE_SLOTS - 1);
    table[i].p = (uintptr_t)p;
    table[i].req = req;
    size_t e = ebb_malloc_usable_size(p), g = glibc_chunk(req);
    int b = bucket(e);
    live_req += req, live_ebb += e, live_glibc += g, live_count++;
    b_count[b]++, b_req[b] += req, b_ebb[b] += e, b_glibc[b] += g;
    if (req <= EXACT_MAX)
        exact[req]++;
    if (live_ebb > peak_ebb) {
        peak_ebb = live_ebb, peak_req = live_req, peak_glibc = live_glibc, peak_count = live_count;
        if (live_ebb > peak_snap + (1 << 20)) { /* the by-size table, every MiB of growth */
            peak_snap = live_ebb;
            memcpy(s_count, b_count, sizeof b_count), memcpy(s_req, b_req, sizeof b_req);
            memcpy(s_ebb, b_ebb, sizeof b_ebb), memcpy(s_glibc, b_glibc, sizeof b_glibc);
        }
    }
}

/* Forget p; returns its requested size (0 if it was not tracked). */
static size_t untrack(void *p)
{
    if (p == NULL || table == NULL)
        return 0;
    size_t i = slot((uintptr_t)p);
    while (table[i].p != (uintptr_t)p) {
        if (table[i].p == 0)
            return 0;
        i = (i + 1) & (TABLE_SLOTS - 1);
    }
    size_t req = table[i].req, e = ebb_malloc_usable_size(p), g = glibc_chunk(req);
    int b = bucket(e);
    live_req -= req, live_ebb -= e, live_glibc -= g, live_count--;
    b_count[b]--, b_req[b] -= req, b_ebb[b] -= e, b_glibc[b] -= g;
    /* Backward-shift deletion keeps every probe chain unbroken. */
    for (size_t j = i;;) {
        j = (j + 1) & (TABLE_SLOTS - 1);
        if (table[j].p == 0)
            break;
        size_t home = slot(table[j].p);
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            table[i] = table[j];
            i = j;
        }
    }
    table[i].p = 0;
    return req;
}

void *malloc(size_t n) { void *p = ebb_malloc(n); n_alloc++; track(p, n); return p; }
void *calloc(size_t n, size_t s) { void *p = ebb_calloc(n, s); n_alloc++; track(p, n * s); return p; }
void free(void *p) { if (p) n_free++, untrack(p); ebb_free(p); }
size_t malloc_usable_size(void *p) { return ebb_malloc_usable_size(p); }
void *aligned_alloc(size_t a, size_t n) { void *p = ebb_aligned_alloc(a, n); track(p, n); return p; }
void *memalign(size_t a, size_t n) { void *p = ebb_memalign(a, n); track(p, n); return p; }
int posix_memalign(void **r, size_t a, size_t n)
{
    int e = ebb_posix_memalign(r, a, n);
    if (e == 0)
        track(*r, n);
    return e;
}
void *realloc(void *p, size_t n)
{
    if (p == NULL)
        return malloc(n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    size_t old = untrack(p);
    void *q = ebb_realloc(p, n);
    n_realloc++, n_realloc_moved += q != NULL && q != p;
    track(q ? q : p, q ? n : old);
    return q;
}

__attribute__((destructor)) static void size_hist_report(void)
{
    const char *path = getenv("SIZE_HIST_OUT");
    FILE *f = fopen(path ? path : "/dev/stderr", "w");
    if (f == NULL)
        return;
    const double mib = 1048576.0;
    fprintf(f, "calls: %zu allocations, %zu frees, %zu reallocs (%zu moved)\n", n_alloc, n_free,
            n_realloc, n_realloc_moved);
    fprintf(f, "at ebb's peak: %zu blocks, requested %.1f MiB, ebb usable %.1f MiB, glibc chunks %.1f MiB\n",
            peak_count, peak_req / mib, peak_ebb / mib, peak_glibc / mib);
    fprintf(f, "by ebb block size (up to), at the last snapshot before the peak:\n"
               "      size     blocks  req MiB  ebb MiB glibc MiB  ebb-glibc\n");
    for (int b = 0; b < BUCKETS; b++)
        if (s_count[b])
            fprintf(f, "%10zu %10zu %8.2f %8.2f %9.2f %+10.2f\n", (size_t)1 << b, s_count[b],
                    s_req[b] / mib, s_ebb[b] / mib, s_glibc[b] / mib,
                    ((double)s_ebb[b] - (double)s_glibc[b]) / mib);
    fprintf(f, "request sizes asked for more than 1%% of the time: size count\n");
    for (size_t n = 0; n <= EXACT_MAX; n++)
        if (exact[n] * 100 > n_alloc)
            fprintf(f, "%10zu %10zu\n", n, exact[n]);
    fclose(f);
}
