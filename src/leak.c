/*
 * leak.c — debug mode's leak report at exit: the live blocks no longer
 * reachable from the program's roots, grouped by allocation stack.
 *
 * When: from the library's destructor (stats.c), so after the atexit handlers
 * and destructors that ran before ebb's — for a preloaded or linked ebb, after
 * the program's own and those of the libraries loaded after it. Blocks those
 * later-running destructors would free still count. A process that ends with
 * _exit, a signal or exec gets no report; quick_exit runs it as an
 * at_quick_exit handler (stats.c).
 *
 * How (a conservative mark-and-sweep, no allocation):
 *   1. every live debug block, as a 32-byte span [user, user + size), in a
 *      mapped array sorted by address (runs, one a segment, put in place:
 *      spans_sort), the bounds a word must fall in to point into one (so
 *      that most words cost two comparisons and a segment-map lookup), and
 *      an index of where the spans of each 4 KiB start (spans_index), so
 *      that a search is among a few spans, not all;
 *   2. roots: every readable and writable mapping in /proc/self/maps — data
 *      and bss of every loaded object, thread stacks and their TLS, the
 *      [heap] — and every loaded object's RELRO region (written at load
 *      time, then made read-only: a static executable's C library keeps
 *      blocks it allocated at start there) — except ebb's own segments, huge
 *      mappings and spare pages (their live blocks are reached only by
 *      marking) and this report's own arrays and state
 *      (they hold every block's address); for the calling thread's stack
 *      only the part above its stack pointer, with its registers spilled
 *      there first (on an alternate signal stack, only that stack's part
 *      below the stack pointer is left out). Any aligned word that points
 *      into a span (its start or inside it) marks the block;
 *   3. every marked block's bytes are scanned the same way (a mapped work
 *      list, so long chains need no recursion, taken a generation at a time
 *      in address order, see mark_all; small blocks are read a 16 KiB
 *      window at a time, see scan_span);
 *   4. the unmarked blocks are the leaks, grouped by allocation trace (and
 *      ebb_debug_set_context label),
 *      largest first. In a forked child, those allocated before the fork
 *      are counted, not listed (leak_report_at_exit says why).
 * Memory is read through the kernel (os_read_own: process_vm_readv, or a
 * pipe where a sandbox refuses it), so a mapping another thread unmaps
 * meanwhile is skipped, not a crash; a read the system refuses every way is
 * counted, and the report then says it is incomplete; and after step 1 no
 * block header is read again: another thread may free a block (a huge one is unmapped at
 * once) while the report runs. A block whose header a write changed (logged
 * with EBB_DEBUG_ON_ERROR=continue) is left out: its size cannot be trusted.
 * Of a block above HUGE_SCAN_DIRECT and of a private root range above
 * ROOT_SCAN_DIRECT, only the pages this process has present or swapped out
 * are scanned (a page never touched holds no pointer), found by PAGEMAP_SCAN
 * or /proc/self/pagemap; of a shared root range above it, the pages in memory
 * (mincore). Where the kernel refuses those, a bounded amount is read whole
 * (scan_unfound), a big shared range is read where this process maps pages,
 * and what was left is counted: the report says INCOMPLETE. Other threads still run: their stacks are scanned whole, and
 * their registers as a signal found them, before the roots' scan (os.c,
 * "Other threads' registers"; threads that cannot be asked are counted in
 * the report). What it cannot see: pointers in registers os.c does not read
 * (SVE beyond 128 bits) or of threads that could not be
 * asked, pointers stored disguised (xor-ed, compressed, in files), pointers
 * in swapped-out pages of a big shared mapping (and, with mincore refused,
 * in its pages this process does not map), and blocks referenced only
 * from memory ebb does not know as a root (another allocator's heap,
 * read-only mappings other than RELRO).
 */
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "debug.h"

/* A live block. 32 bytes: the report holds one for every live block of the
 * process (1.5 million in a soak of gawk), and its memory is on top of the
 * program's at exit; it was 56 bytes, and 8 more in the work list (a
 * million blocks: 56 MiB of RSS for the report, now 35 MiB;
 * tests/debug/leak_million_blocks.c). A huge block's end and mapping end do not fit here:
 * they are in lk.huge, which `size` indexes then. */
typedef struct span_s {
    uintptr_t start;    /* the user bytes */
    uint64_t check;     /* its header's check when listed (debug.c, header_check) */
    uint32_t size;      /* requested bytes, below SEGMENT_SIZE; a huge block: its lk.huge index */
    uint32_t trace;     /* allocation trace */
    uint16_t context;   /* ebb_debug_set_context's label when allocated (0: none) */
    uint8_t align_log2; /* its header's: where the header is (span_header) */
    uint8_t flags;      /* SPAN_* */
} span_t;

_Static_assert(sizeof(span_t) == 32, "a span is 32 bytes");

#define SPAN_MARKED    1 /* reachable */
#define SPAN_HUGE      2 /* a huge block: not in the segment map past its first unit */
#define SPAN_INHERITED 4 /* allocated before this process was forked (debug.h) */
#define SPAN_QUEUED    8 /* in the generation mark_all scans */

typedef struct huge_span_s {
    uintptr_t end;     /* of the user bytes */
    uintptr_t own_end; /* the mapping's end: what lies past it is ebb's */
} huge_span_t;

static struct {
    span_t *spans;
    size_t count, cap;
    size_t unlisted; /* live blocks the listing had no room for */
    huge_span_t *huge;
    size_t huge_count, huge_cap;
    /* Marked spans to scan, by index: a queue that each marked span enters
     * once (so it needs room for every span), scanned a generation at a
     * time in address order (mark_all). */
    uint32_t *work;
    size_t work_len;
    /* Not roots: cached huge mappings and spare pages (what freed blocks
     * left there), this report's own arrays (which hold every block's
     * address), this struct (its bounds are block addresses) and its
     * buffers (scratch). */
    uintptr_t skip[HUGE_CACHE_MAX + HUGE_SPARE_MAX + 4][2];
    size_t skip_count;
    /* What a word must point into to be worth a search (spans_bound): all
     * the spans [lo, lo + range), the huge ones [huge_lo, huge_lo +
     * huge_range); a word outside the huge ones must lie in a unit of the
     * segment map. */
    uintptr_t lo, range, huge_lo, huge_range;
    /* Where to search for a word (spans_index; NULL: no room for it, the
     * whole array): the 4 MiB units where spans start, in address order,
     * and for each, GRANULES + 1 span indices: where the spans starting at
     * or after each GRANULE_BYTES of the unit begin. */
    uintptr_t *units;
    uint32_t *granules;
    size_t unit_count, index_bytes;
    size_t reads_refused; /* os_read_own calls the system refused (-1) */
    /* Memory whose used pages could not be found (scan_unfound): what may
     * still be read whole, private and shared, and what was not read
     * (unread), or read only where this process maps pages (mapped_only:
     * a big shared root with mincore refused). */
    uintptr_t whole_private_left, whole_shared_left;
    uint64_t unread_bytes, mapped_only_bytes;
} lk ebb_cold_bss;

static uintptr_t span_end(const span_t *s)
{
    return s->flags & SPAN_HUGE ? lk.huge[s->size].end : s->start + s->size;
}

/* Where ebb's own memory resumes after the block: its end, or a huge
 * block's mapping end. */
static uintptr_t span_own_end(const span_t *s)
{
    return s->flags & SPAN_HUGE ? lk.huge[s->size].own_end : s->start + s->size;
}

/* The block's header (debug_offset from its align_log2). */
static uintptr_t span_header(const span_t *s)
{
    debug_header_t h = {.align_log2 = s->align_log2};
    return s->start - debug_offset(&h);
}

/* The report's buffers, in one place so that they are skipped as a root as
 * lk is: they hold copies of scanned words and addresses inside blocks. */
#define WINDOW_BYTES ((uintptr_t)16 << 10)
#define WINDOWS 16
static struct {
    uintptr_t words[8192];         /* scan_range */
    os_page_region_t regions[256]; /* scan_used_pages_by_ioctl */
    uint64_t entries[4096];        /* scan_used_pages: pagemap */
    unsigned char resident[65536]; /* scan_resident_pages: mincore */
    char maps[64 << 10];           /* scan_roots: /proc/self/maps, a piece at a time */
    os_registers_t regs[OS_REGISTERS_BATCH]; /* scan_registers: other threads' */
    struct {                       /* scan_span */
        uintptr_t base[WINDOWS]; /* 0: empty */
        size_t len[WINDOWS];     /* bytes read */
        unsigned next;           /* the slot to fill next */
        uintptr_t buf[WINDOWS][WINDOW_BYTES / sizeof(uintptr_t)];
    } win;
} scratch ebb_cold_bss;

/* ---------------------------------------------------------------------------
 * 1. The live blocks
 * ------------------------------------------------------------------------- */
static void span_add(debug_header_t *h, uintptr_t map_end)
{
    debug_header_t c; /* the header as held (debug_header_intact) */
    if (!debug_header_intact(h, &c))
        return;
    if (lk.spans == NULL) { /* counting pass */
        lk.cap++;
        lk.huge_cap += map_end != 0;
        return;
    }
    if (lk.count == lk.cap || (map_end != 0 && lk.huge_count == lk.huge_cap)) {
        lk.unlisted++; /* allocated since the count: no room (leak_report_make lists again) */
        return;
    }
    if (map_end == 0 && c.size >= SEGMENT_SIZE)
        return; /* cannot be: a block in a segment is smaller */
    uintptr_t start = (uintptr_t)h + debug_offset(&c);
    bool inherited = debug_block_fork_depth(&c) < debug_fork_depth;
    uint32_t size = (uint32_t)c.size;
    if (map_end != 0) {
        lk.huge[lk.huge_count] = (huge_span_t){.end = start + c.size, .own_end = map_end};
        size = (uint32_t)lk.huge_count++;
    }
    lk.spans[lk.count++] = (span_t){.start = start,
                                    .check = c.check,
                                    .size = size,
                                    .trace = c.alloc_trace,
                                    .context = c.context,
                                    .align_log2 = c.align_log2,
                                    .flags = (map_end != 0 ? SPAN_HUGE : 0) |
                                             (inherited ? SPAN_INHERITED : 0)};
}

/* Up to n bytes at `from` (os_read_own), a refusal counted for the report. */
static ssize_t read_own_some(void *to, uintptr_t from, size_t n)
{
    ssize_t got = os_read_own(to, (const void *)from, n);
    lk.reads_refused += got < 0;
    return got;
}

/* Read n bytes at `from` of this process, without faulting; false if they
 * are not all mapped (another thread may unmap memory while the report
 * runs). */
static bool read_own(void *to, uintptr_t from, size_t n)
{
    return read_own_some(to, from, n) == (ssize_t)n;
}

static unsigned window_of(uintptr_t base, bool count_refused);

/* Whether the unmarked block of s is still the block that was listed. Other
 * threads run on while the report scans, and a block they free after the
 * scan passed the pointers to it is not lost (review finding: a program
 * whose threads replaced the blocks of a global array had thousands
 * reported lost, a different number each run). Read through the kernel:
 * the block's memory may be unmapped by now. A read the system refused
 * tells nothing: the block stays listed (and the report says it is
 * incomplete). The header is taken from a window (window_of) read after
 * marking ended, where it lies in one, not from a read of its own: in
 * address order, the headers of a page's lost blocks come from one read
 * (one read a block took 0.25 s for 400,000 lost blocks). */
static bool span_still_listed(const span_t *s)
{
    debug_header_t c;
    size_t refused = lk.reads_refused;
    uintptr_t header = span_header(s);
    uintptr_t base = header & ~(WINDOW_BYTES - 1);
    unsigned w = WINDOWS;
    if (!(s->flags & SPAN_HUGE) && header + sizeof c <= base + WINDOW_BYTES)
        w = window_of(base, false);
    if (w < WINDOWS && header + sizeof c - base <= scratch.win.len[w])
        memcpy(&c, (const uint8_t *)scratch.win.buf[w] + (header - base), sizeof c);
    else if (!read_own(&c, header, sizeof c))
        return lk.reads_refused != refused;
    uint64_t m = atomic_load_explicit(&c.magic, memory_order_relaxed);
    bool live = m == (DEBUG_MAGIC_LIVE ^ header) || m == (DEBUG_MAGIC_CHECKED_LIVE ^ header);
    return live && c.check == s->check;
}

static void spans_of_page(page_t *page, void *arg)
{
    (void)arg;
    if (page->kind == PAGE_LARGE) {
        span_add((debug_header_t *)page_start(page), 0);
    } else if (page->kind == PAGE_SMALL && page->block_size >= sizeof(debug_header_t)) {
        uint8_t *start = page_start(page);
        for (size_t k = 0; k < page->capacity; k++)
            span_add((debug_header_t *)(start + k * page->block_size), 0);
    }
}

static void spans_of_segment(segment_t *seg, void *arg)
{
    segment_for_each_page(seg, spans_of_page, arg);
}

static void spans_of_huge(segment_t *seg, void *arg)
{
    (void)arg;
    span_add((debug_header_t *)((uint8_t *)seg + seg->block_offset), (uintptr_t)seg + seg->map_size);
}

static void cached_huge(void *start, size_t len, void *arg)
{
    (void)arg;
    if (lk.skip_count < sizeof lk.skip / sizeof lk.skip[0]) {
        lk.skip[lk.skip_count][0] = (uintptr_t)start;
        lk.skip[lk.skip_count][1] = (uintptr_t)start + len;
        lk.skip_count++;
    }
}

/* Move a[root] down the max-heap a[0..n) (ordered by start) to its place. */
static void spans_sift_down(span_t *a, size_t root, size_t n)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && a[child + 1].start > a[child].start)
            child++;
        if (a[root].start >= a[child].start)
            return;
        span_t t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

static void spans_heapsort(void)
{
    /* Heapsort: no allocation, no recursion. */
    span_t *a = lk.spans;
    size_t n = lk.count;
    for (size_t start = n / 2; start-- > 0;)
        spans_sift_down(a, start, n);
    for (size_t end = n; end-- > 1;) {
        span_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        spans_sift_down(a, 0, end);
    }
}

/* The key index_sort orders x by: x itself, or with `run`, the address of
 * the first span of run x. */
static uintptr_t index_key(uint32_t x, const uint32_t *run)
{
    return run ? lk.spans[run[x]].start : x;
}

static void index_sift_down(uint32_t *a, size_t root, size_t n, const uint32_t *run)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && index_key(a[child + 1], run) > index_key(a[child], run))
            child++;
        if (index_key(a[root], run) >= index_key(a[child], run))
            return;
        uint32_t t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

/* Heapsort (no allocation, no recursion) of span indices (span order is
 * address order), or with `run`, of run numbers by their first address. */
static void index_sort(uint32_t *a, size_t n, const uint32_t *run)
{
    for (size_t start = n / 2; start-- > 0;)
        index_sift_down(a, start, n, run);
    for (size_t end = n; end-- > 1;) {
        uint32_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        index_sift_down(a, 0, end, run);
    }
}

#define SPAN_PLACED 0x80 /* spans_sort: moved to its place (cleared after) */

/* Where spans_sort moves span i: its run's new start, plus its place in
 * the run (run[0..k): where each starts; dest: where each goes). */
static size_t span_dest(size_t i, const uint32_t *run, const uint32_t *dest, size_t k)
{
    size_t lo = 0, hi = k; /* the last run starting at or before i */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (run[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return dest[lo] + (i - run[lo]);
}

/* Sort the spans by address. They come in ascending runs, one a segment
 * (pages in order, blocks in order: a run is cut where the 4 MiB unit
 * changes too, as two segments listed one after the other may straddle a
 * third), a few dozen of them for a million blocks; the runs do not
 * overlap, so putting each run in its place sorts them all: the runs are
 * sorted by their first address (a few), then every span is moved once,
 * along the cycles of that permutation. A heapsort of all the spans took
 * 0.25 s for 1.6 million. The run tables are in lk.work, unused until
 * marking (3 entries a run; with no room for them, or when runs overlap
 * after all, all the spans are heapsorted). */
static void spans_sort(void)
{
    span_t *a = lk.spans;
    size_t n = lk.count, k = 0;
    uint32_t *run = lk.work;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && a[i].start > a[i - 1].start &&
            a[i].start >> SEGMENT_SHIFT == a[i - 1].start >> SEGMENT_SHIFT)
            continue;
        if (3 * (k + 1) > lk.cap) {
            spans_heapsort();
            return;
        }
        run[k++] = (uint32_t)i;
    }
    if (k <= 1)
        return;
    uint32_t *order = run + k, *dest = order + k;
    for (size_t r = 0; r < k; r++)
        order[r] = (uint32_t)r;
    index_sort(order, k, run);
    size_t at = 0;
    for (size_t j = 0; j < k; j++) {
        size_t r = order[j];
        dest[r] = (uint32_t)at;
        at += (r + 1 < k ? run[r + 1] : n) - run[r];
    }
    for (size_t i = 0; i < n; i++) {
        if (a[i].flags & SPAN_PLACED)
            continue;
        span_t carry = a[i]; /* the span that belongs at span_dest(from) */
        size_t from = i;
        for (;;) {
            size_t to = span_dest(from, run, dest, k);
            carry.flags |= SPAN_PLACED;
            span_t next = a[to];
            a[to] = carry;
            if (to == i)
                break;
            carry = next;
            from = to;
        }
    }
    bool sorted = true;
    for (size_t i = 0; i < n; i++) {
        a[i].flags &= (uint8_t)~SPAN_PLACED;
        sorted &= i == 0 || a[i].start > a[i - 1].start;
    }
    if (!sorted)
        spans_heapsort();
}

/* The first span that starts at or after v (lk.count if none). */
static size_t span_first_from(uintptr_t v)
{
    size_t lo = 0, hi = lk.count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (lk.spans[mid].start < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The span a word points into (its start, or inside it), or -1, given that
 * the last span starting at or before v is in [lo - 1, hi). */
static long span_find_in(size_t lo, size_t hi, uintptr_t v)
{
    while (lo < hi) { /* the first span starting after v */
        size_t mid = (lo + hi) / 2;
        if (lk.spans[mid].start <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const span_t *s = &lk.spans[lo - 1];
    return v < span_end(s) || v == s->start ? (long)(lo - 1) : -1;
}

/* The span a word points into (its start, or inside it), or -1. */
static long span_find(uintptr_t v)
{
    return span_find_in(0, lk.count, v);
}

#define GRANULE_BYTES ((uintptr_t)4096)
#define GRANULES       (SEGMENT_SIZE / GRANULE_BYTES)

/* Build lk.units and lk.granules over the sorted spans: a word's search
 * then starts among the spans of its 4 KiB, found in two small arrays,
 * where the binary search over all the spans took a cache miss a step
 * (1.6 million spans: a fifth of the report). Mapped apart (its size is
 * known only now); without it, span_find searches all. */
static void spans_index(void)
{
    size_t units = 0;
    for (size_t i = 0; i < lk.count; i++)
        units += i == 0 || lk.spans[i].start >> SEGMENT_SHIFT != lk.spans[i - 1].start >> SEGMENT_SHIFT;
    if (units == 0)
        return;
    size_t bytes = units * (sizeof(uintptr_t) + (GRANULES + 1) * sizeof(uint32_t));
    bytes = (bytes + os_info.page_size - 1) & ~(os_info.page_size - 1);
    uint8_t *mem = os_map_aligned(bytes, os_info.page_size, 0);
    if (mem == NULL)
        return;
    lk.units = (uintptr_t *)mem;
    lk.granules = (uint32_t *)(lk.units + units);
    lk.index_bytes = bytes;
    size_t i = 0;
    for (size_t u = 0; u < units; u++) {
        uintptr_t unit = lk.spans[i].start & ~(uintptr_t)SEGMENT_MASK;
        lk.units[u] = unit;
        uint32_t *g = lk.granules + u * (GRANULES + 1);
        for (size_t k = 0; k <= GRANULES; k++) {
            uintptr_t from = unit + k * GRANULE_BYTES;
            while (i < lk.count && lk.spans[i].start < from)
                i++;
            g[k] = (uint32_t)i;
        }
    }
    lk.unit_count = units;
}

/* span_find, starting from the index: the same answer. */
static long span_find_indexed(uintptr_t v)
{
    if (lk.units == NULL)
        return span_find(v);
    uintptr_t unit = v & ~(uintptr_t)SEGMENT_MASK;
    size_t lo = 0, hi = lk.unit_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (lk.units[mid] < unit)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == lk.unit_count || lk.units[lo] != unit)
        return span_find(v); /* inside a huge block, past its first unit */
    const uint32_t *g = lk.granules + lo * (GRANULES + 1) + ((v & SEGMENT_MASK) / GRANULE_BYTES);
    /* Spans before g[0] start before v's granule, spans from g[1] after
     * it: the last starting at or before v is in [g[0] - 1, g[1]). */
    return span_find_in(g[0], g[1], v);
}

/* The bounds mark_word tests before it searches. A block of size 0 still
 * has its start to point to, hence the + 1. */
static void spans_bound(void)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0, huge_lo = UINTPTR_MAX, huge_hi = 0;
    for (size_t i = 0; i < lk.count; i++) {
        const span_t *s = &lk.spans[i];
        uintptr_t end = span_end(s) > s->start ? span_end(s) : s->start + 1;
        lo = s->start < lo ? s->start : lo;
        hi = end > hi ? end : hi;
        if (s->flags & SPAN_HUGE) {
            huge_lo = s->start < huge_lo ? s->start : huge_lo;
            huge_hi = end > huge_hi ? end : huge_hi;
        }
    }
    lk.lo = lo;
    lk.range = hi > lo ? hi - lo : 0;
    lk.huge_lo = huge_lo;
    lk.huge_range = huge_hi > huge_lo ? huge_hi - huge_lo : 0;
}

/* ---------------------------------------------------------------------------
 * 2, 3. Marking
 * ------------------------------------------------------------------------- */
/* Most scanned words are no pointer into a block (zeros, small numbers,
 * pointers to code and to other data): two range tests and a segment-map
 * lookup turn them away before the binary search, which took 120
 * instructions a word with 4,000 blocks (a forked child's report over its
 * parent's 4 MiB heap took 45 ms, nearly all of it here). */
static void mark_word(uintptr_t v)
{
    if (v - lk.lo >= lk.range)
        return;
    if (v - lk.huge_lo >= lk.huge_range && !segment_map_contains((const void *)v))
        return;
    long i = span_find_indexed(v);
    if (i < 0 || (lk.spans[i].flags & SPAN_MARKED))
        return;
    lk.spans[i].flags |= SPAN_MARKED;
    lk.work[lk.work_len++] = (uint32_t)i;
}

/* Scan [start, end) for words pointing into spans, reading through the
 * kernel so that memory unmapped meanwhile is skipped. */
static void scan_range(uintptr_t start, uintptr_t end)
{
    uintptr_t *buf = scratch.words;
    start = (start + sizeof(uintptr_t) - 1) & ~(uintptr_t)(sizeof(uintptr_t) - 1);
    while (start + sizeof(uintptr_t) <= end) {
        size_t n = (size_t)(end - start) / sizeof(uintptr_t);
        if (n > sizeof scratch.words / sizeof scratch.words[0])
            n = sizeof scratch.words / sizeof scratch.words[0];
        ssize_t got = read_own_some(buf, start, n * sizeof(uintptr_t));
        if (got <= 0) { /* unreadable: skip a page */
            start = (start | (os_info.page_size - 1)) + 1;
            continue;
        }
        size_t words = (size_t)got / sizeof(uintptr_t);
        for (size_t k = 0; k < words; k++)
            mark_word(buf[k]);
        start += words * sizeof(uintptr_t);
        if (words == 0)
            break;
    }
}

/* Above this, a block is scanned only where its pages are used. */
#define HUGE_SCAN_DIRECT ((uintptr_t)64 << 20)

/* Scan the used pages of the page-aligned [page, end) by Linux 6.7's
 * PAGEMAP_SCAN (os_pagemap_scan: the ranges whose pages are present or
 * swapped out, found by walking the page tables, so a range with no page
 * tables costs nothing); the address it got to (end when done; page when the
 * kernel has no such ioctl). */
static uintptr_t scan_used_pages_by_ioctl(int fd, uintptr_t page, uintptr_t start, uintptr_t end)
{
    os_page_region_t *regions = scratch.regions;
    static bool unsupported;
    uintptr_t stop = (end + os_info.page_size - 1) & ~(uintptr_t)(os_info.page_size - 1);
    while (!unsupported && page < stop) {
        uintptr_t walk_end;
        long n = os_pagemap_scan(fd, page, stop, regions,
                                 sizeof scratch.regions / sizeof scratch.regions[0], &walk_end);
        if (n < 0) {
            unsupported = n == -ENOTTY || n == -EINVAL;
            return page;
        }
        for (long k = 0; k < n; k++) {
            uintptr_t a = regions[k].start > start ? regions[k].start : start;
            uintptr_t b = regions[k].end < end ? regions[k].end : end;
            if (a < b)
                scan_range(a, b);
        }
        if (walk_end <= page)
            return page;
        page = walk_end;
    }
    return page < stop ? page : end;
}

/* Gathering runs of used pages of [start, end), page by page in ascending
 * order, each run scanned as it ends (scan_used_pages, scan_resident_pages). */
typedef struct page_runs_s {
    uintptr_t start, run; /* run: where the current run began, 0: none */
} page_runs_t;

static void page_runs_add(page_runs_t *r, uintptr_t page, bool used)
{
    if (used && r->run == 0) {
        r->run = page;
    } else if (!used && r->run != 0) {
        scan_range(r->run > r->start ? r->run : r->start, page);
        r->run = 0;
    }
}

/* The rest of [from, end) is scanned whole (from: where the page-by-page
 * walk stopped, or the current run's start), or only the current run. */
static void page_runs_finish(page_runs_t *r, uintptr_t end, uintptr_t from)
{
    if (r->run != 0)
        from = r->run;
    if (from != 0 && from < end)
        scan_range(from > r->start ? from : r->start, end);
}

/* Memory whose used pages could not be found is read whole up to these,
 * in all, in one report; the rest is left unread, and counted (the report
 * says INCOMPLETE). Reading untouched private memory maps the zero page
 * (page tables: 2 MiB a GiB, and time: 16 GiB took 2.3 s; a 64 TiB mapping
 * would take hours and 128 GiB of page tables); reading a hole of a shared
 * mapping makes the kernel fill it with a page of memory (a 128 MiB memory
 * file became 128 MiB of memory: tests/debug/leak_big_shared_root.c). */
#define WHOLE_PRIVATE_MAX ((uintptr_t)4 << 30)
#define WHOLE_SHARED_MAX  ((uintptr_t)64 << 20)

/* [start, end), whose used pages could not be found: read whole if it fits
 * in what may still be (lk.whole_*_left), else left unread, and counted.
 * False if left unread. */
static bool scan_unfound(uintptr_t start, uintptr_t end, bool shared)
{
    if (start >= end)
        return true;
    uintptr_t *left = shared ? &lk.whole_shared_left : &lk.whole_private_left;
    if (end - start > *left) {
        lk.unread_bytes += end - start;
        return false;
    }
    *left -= end - start;
    scan_range(start, end);
    return true;
}

/* Scan [start, end) where pages are present or swapped out: an untouched 32
 * GiB block took 45 s to read whole. By PAGEMAP_SCAN where the kernel has it,
 * else by reading pagemap (bits 63 and 62), a run of used pages at a time;
 * without pagemap (or after a read of it failed), what is left of it is read
 * whole within bounds (scan_unfound; before 2026-12-06, at any size). A
 * short read of pagemap is taken as far as it goes (the kernel reads whole
 * entries only). `shared`: a shared root's, whose pages in memory mincore
 * could not find (scan_resident_pages). */
static void scan_used_pages(uintptr_t start, uintptr_t end, bool shared)
{
    uint64_t *entries = scratch.entries;
    static int fd = -2;
    if (fd == -2)
        fd = os_open_read("/proc/self/pagemap");
    if (fd < 0) {
        scan_unfound(start, end, shared);
        return;
    }
    size_t ps = os_info.page_size;
    uintptr_t page = scan_used_pages_by_ioctl(fd, start & ~(uintptr_t)(ps - 1), start, end);
    page_runs_t r = {start, 0};
    while (page < end) {
        size_t n = (size_t)((end - page + ps - 1) / ps);
        if (n > sizeof scratch.entries / sizeof scratch.entries[0])
            n = sizeof scratch.entries / sizeof scratch.entries[0];
        ssize_t got = os_pread(fd, entries, n * sizeof entries[0], (off_t)(page / ps * sizeof entries[0]));
        if (got < (ssize_t)sizeof entries[0]) {
            page_runs_add(&r, page, false); /* the run so far */
            scan_unfound(page > start ? page : start, end, shared);
            return;
        }
        n = (size_t)got / sizeof entries[0];
        for (size_t k = 0; k < n; k++, page += ps)
            page_runs_add(&r, page, (entries[k] >> 62) != 0);
    }
    page_runs_finish(&r, end, 0);
}

/* Scan the pages of [start, end), part of a shared mapping, that are in
 * memory (mincore: in the page cache, whether or not this process maps
 * them now; the page tables do not say, a child has none for the shared
 * mappings it inherited). A run of them at a time; the holes are not read
 * (reading one would make the kernel fill it). What is swapped out is not
 * seen. Where mincore fails (refused by a sandbox; or part of the range
 * unmapped meanwhile), the rest is read whole within WHOLE_SHARED_MAX
 * (before 2026-12-06, at any size: a 128 MiB memory file's holes became 128
 * MiB of memory); past it, only where this process maps pages
 * (scan_used_pages), and counted: the report says INCOMPLETE. */
static void scan_resident_pages(uintptr_t start, uintptr_t end)
{
    size_t ps = os_info.page_size;
    uintptr_t page = start & ~(uintptr_t)(ps - 1);
    page_runs_t r = {start, 0};
    while (page < end) {
        size_t n = (size_t)((end - page + ps - 1) / ps);
        if (n > sizeof scratch.resident)
            n = sizeof scratch.resident;
        if (!os_mincore((const void *)page, n * ps, scratch.resident)) {
            page_runs_add(&r, page, false); /* the run so far */
            uintptr_t from = page > start ? page : start;
            if (end - from <= lk.whole_shared_left) {
                scan_unfound(from, end, true); /* unmapped parts are skipped */
            } else {
                uint64_t unread = lk.unread_bytes; /* what pagemap too left unread */
                scan_used_pages(from, end, true);
                lk.mapped_only_bytes += (end - from) - (lk.unread_bytes - unread);
            }
            return;
        }
        for (size_t k = 0; k < n; k++, page += ps)
            page_runs_add(&r, page, scratch.resident[k] & 1);
    }
    page_runs_finish(&r, end, 0);
}

/* Above this, a root range is scanned only where its pages are used
 * (private: present or swapped out in this process; shared: in memory): a
 * page never touched holds no pointer, and reading it makes the kernel map
 * it (a shared mapping's holes become page cache: PostgreSQL's 128 MiB of
 * shared buffers, in every backend's report). */
#define ROOT_SCAN_DIRECT ((uintptr_t)256 << 10)

/* Where ebb's own memory ends in a unit the segment map lists. A segment
 * fills its unit. A huge mapping (live or cached) starts at its unit and ends
 * at its map size: short of the unit's end, the rest of the unit is the
 * program's to map, and a root like any; past it, the block and the tail
 * behind it, neither a root (a walk that enters the mapping past its first
 * unit skips the same: span_own_end). The header is read through the
 * kernel (read_own), as everything here: another thread may unmap the mapping meanwhile (then the
 * whole unit is skipped, as before it was unmapped). */
static uintptr_t ebb_unit_end(uintptr_t unit)
{
    /* The header's first bytes, up to kind and map_size, whichever ends later. */
    enum {
        KIND_END = offsetof(segment_t, kind) + sizeof(uint32_t),
        MAP_SIZE_END = offsetof(segment_t, map_size) + sizeof(size_t),
    };
    unsigned char head[KIND_END > MAP_SIZE_END ? KIND_END : MAP_SIZE_END];
    if (!read_own(head, unit, sizeof head))
        return unit + SEGMENT_SIZE;
    uint32_t kind;
    size_t map_size;
    memcpy(&kind, head + offsetof(segment_t, kind), sizeof kind);
    memcpy(&map_size, head + offsetof(segment_t, map_size), sizeof map_size);
    if (kind != SEGMENT_HUGE || map_size < os_info.page_size)
        return unit + SEGMENT_SIZE;
    return unit + map_size;
}

/* A root range, minus ebb's own memory: segments and huge mappings (each
 * starting a 4 MiB unit the segment map lists; ebb_unit_end), the huge cache
 * and its spare pages, and live blocks (reached by marking). */
static void scan_root(uintptr_t start, uintptr_t end, bool shared)
{
    while (start < end) {
        uintptr_t unit = start & ~(uintptr_t)SEGMENT_MASK;
        if (segment_map_contains((void *)(unit + 64))) {
            uintptr_t own_end = ebb_unit_end(unit);
            if (start < own_end) {
                start = own_end;
                continue;
            }
        }
        /* Up to ebb's next segment: one step over a mapping of many units
         * (a 64 TiB one is 16 million of them). */
        uintptr_t stop = segment_map_next(unit + SEGMENT_SIZE, end);
        bool skipped = false;
        for (size_t k = 0; k < lk.skip_count && !skipped; k++) {
            if (start >= lk.skip[k][0] && start < lk.skip[k][1]) {
                start = lk.skip[k][1];
                skipped = true;
            } else if (lk.skip[k][0] > start && lk.skip[k][0] < stop) {
                stop = lk.skip[k][0];
            }
        }
        if (skipped)
            continue;
        /* Inside a live block, or behind a huge one in its mapping (a maps
         * line may start there, when part of the mapping was split off):
         * skip it. */
        size_t lo = span_first_from(start + 1); /* the first block after start */
        if (lo > 0 && span_own_end(&lk.spans[lo - 1]) > start) {
            start = span_own_end(&lk.spans[lo - 1]);
            continue;
        }
        /* Up to the next live block (one that starts at `start` has no
         * bytes unless it is huge: a block of size 0, tested above). */
        if (lo < lk.count && lk.spans[lo].start < stop)
            stop = lk.spans[lo].start;
        if (stop - start >= ROOT_SCAN_DIRECT && shared)
            scan_resident_pages(start, stop);
        else if (stop - start >= ROOT_SCAN_DIRECT)
            scan_used_pages(start, stop, false);
        else
            scan_range(start, stop);
        start = stop;
    }
}

/* RELRO regions. dl_iterate_phdr holds the loader's module-list lock
 * around its callbacks, and a forked child inherits that lock as it was: held
 * by whichever thread of the parent was listing modules at the fork, a thread
 * the child does not have (tests/debug/leak_fork_beside_module_walk.c: the
 * child's report waited for it for ever). So a child's report walks the
 * loader's list of modules (_r_debug.r_map) itself, without the lock. The
 * child may have started threads of its own that load and unload modules
 * meanwhile, and a module may have been half-linked at the fork: every
 * word of the list, and each module's ELF header and program headers
 * (mapped at its load address: its first PT_LOAD starts at file offset 0
 * and address 0, as in every shared object and PIE; the main program's come
 * from the auxiliary vector), is read through the kernel (read_own), so a list
 * changing under the walk costs regions (the report then says INCOMPLETE),
 * never a crash, and the walk stops after RELRO_WALK_MAX modules. */
#define RELRO_WALK_MAX 4096
static int scan_relro_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size, (void)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_RELRO) {
            uintptr_t start = info->dlpi_addr + ph->p_vaddr;
            scan_root(start & ~(uintptr_t)7, start + ph->p_memsz, false);
        }
    }
    return 0;
}

/* The RELRO regions of a module whose phnum program headers are at `phdr`,
 * loaded at `bias` (the main program: bias -1, worked out from its PT_PHDR;
 * a static non-PIE program has none and is loaded at 0). False if the
 * headers could not be read. */
static bool scan_relro_of(uintptr_t bias, uintptr_t phdr, size_t phnum)
{
    static ElfW(Phdr) ph[64] ebb_cold_bss; /* under the report (one at a time) */
    if (phnum > sizeof ph / sizeof ph[0] || !read_own(ph, phdr, phnum * sizeof ph[0]))
        return false;
    if (bias == (uintptr_t)-1) {
        bias = 0;
        for (size_t i = 0; i < phnum; i++)
            if (ph[i].p_type == PT_PHDR)
                bias = phdr - ph[i].p_vaddr;
    }
    struct dl_phdr_info info = {.dlpi_addr = bias, .dlpi_phdr = ph, .dlpi_phnum = (ElfW(Half))phnum};
    scan_relro_cb(&info, sizeof info, NULL);
    return true;
}

/* A forked child's RELRO regions: the program's from the auxiliary vector
 * (a static program has no loader list), the shared objects' from the
 * loader's list. False if a module's headers could not be read. */
static bool scan_relro_by_list(void)
{
    size_t phnum;
    uintptr_t phdr = os_exe_phdr(&phnum);
    bool whole = phdr != 0 && scan_relro_of((uintptr_t)-1, phdr, phnum);
    uintptr_t at = (uintptr_t)_r_debug.r_map;
    for (int n = 0; at != 0; n++) {
        struct link_map m;
        char name0;
        if (n == RELRO_WALK_MAX || !read_own(&m, at, sizeof m))
            return false;
        at = (uintptr_t)m.l_next;
        if (m.l_name == NULL)
            continue; /* the program (done above) */
        if (!read_own(&name0, (uintptr_t)m.l_name, 1)) {
            whole = false; /* a module whose name is gone: changed under the walk */
            continue;
        }
        if (name0 == '\0')
            continue; /* the program (done above) */
        ElfW(Ehdr) eh;
        if (!read_own(&eh, m.l_addr, sizeof eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
            whole = false;
            continue;
        }
        whole &= scan_relro_of(m.l_addr, m.l_addr + eh.e_phoff, eh.e_phnum);
    }
    return whole;
}

/* The RELRO regions, listed by dl_iterate_phdr before the report closes its
 * gate (debug.c), and scanned after: a thread inside a dl_iterate_phdr
 * callback (or in dlclose, which frees memory under the loader's lock) that
 * calls the allocator waits at the gate holding that lock, and the report's
 * own dl_iterate_phdr then waited for it: exit hung (review finding). The
 * walk above, which takes no lock, misses what it cannot read (a module with
 * more than 64 program headers, one whose first segment is not at its load
 * address, a static-pie program's own: review of the first fix, which used
 * it everywhere); it stays a forked child's. */
#define RELRO_MAX 1024
static struct {
    uintptr_t range[RELRO_MAX][2];
    size_t count;
    bool cut; /* more than RELRO_MAX */
} relro ebb_cold_bss;

static int relro_list_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size, (void)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_GNU_RELRO)
            continue;
        if (relro.count == RELRO_MAX) {
            relro.cut = true;
            continue;
        }
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        relro.range[relro.count][0] = start & ~(uintptr_t)7;
        relro.range[relro.count][1] = start + ph->p_memsz;
        relro.count++;
    }
    return 0;
}

/* Before the gate closes (leak_report_make). */
static void relro_list(void)
{
    relro.count = 0;
    relro.cut = false;
    if (debug_fork_depth == 0)
        dl_iterate_phdr(relro_list_cb, NULL);
}

/* Scan the RELRO regions. False if some were left out. */
static bool scan_relro(void)
{
    if (debug_fork_depth > 0)
        return scan_relro_by_list();
    for (size_t i = 0; i < relro.count; i++)
        scan_root(relro.range[i][0], relro.range[i][1], false);
    return !relro.cut;
}

/* The dead part of the stack the report runs on, [low, sp): left out of the
 * roots, as stale copies of lost pointers linger there. */
typedef struct dead_stack_s {
    uintptr_t low, sp;
} dead_stack_t;

/* Below sp, down to the start of the stack it lies in, which may share its
 * mapping with other data, a root: on an alternate signal stack (exit from a
 * handler), that stack's start, which may lie in a program's .bss
 * (tests/debug/leak_exit_on_altstack.c); in a thread other than the main
 * one, its stack's start as the C library knows it, which may be a stack
 * the program carved from a mapping of its own
 * (tests/debug/leak_exit_on_carved_stack.c); for the main thread, its
 * stack's lowest address as its size limit allows, at or below the start of
 * its mapping, which is its stack alone (asked of every thread alike: in a
 * child forked by another thread, that thread is the process's first).
 * Before the report takes any lock: pthread_getattr_np allocates. */
static dead_stack_t dead_stack_below(uintptr_t sp)
{
    dead_stack_t d = {0, sp};
    stack_t ss;
    if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK) &&
        sp >= (uintptr_t)ss.ss_sp && sp - (uintptr_t)ss.ss_sp < ss.ss_size) {
        d.low = (uintptr_t)ss.ss_sp;
        return d;
    }
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return d;
    void *addr;
    size_t size;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0 && sp >= (uintptr_t)addr &&
        sp - (uintptr_t)addr < size)
        d.low = (uintptr_t)addr;
    pthread_attr_destroy(&attr);
    return d;
}

/* One line of /proc/self/maps: "start-end perms offset dev inode path". */
static size_t scan_maps_lines; /* read by this report's scan_roots */

static void scan_maps_line(const char *line, size_t len, void *arg)
{
    const dead_stack_t *dead = arg;
    scan_maps_lines++;
    os_maps_line_t m;
    if (!os_maps_line_parse(line, len, &m) || m.perms[0] != 'r' || m.perms[1] != 'w')
        return;
    uintptr_t start = m.start, end = m.end;
    bool shared = m.perms[3] == 's';
    /* Our own stack: only the live part. On a stack the C library does not
     * know (a coroutine's, carved from a mapping of the program's), where
     * it starts is not known, and what lies below it in its mapping (other
     * coroutines' stacks) is a root: the whole mapping is scanned, the
     * dead part too (review finding: a block held only by a suspended
     * coroutine's frame was counted lost). */
    if (dead->sp >= start && dead->sp < end && dead->low != 0) {
        if (dead->low > start)
            scan_root(start, dead->low, shared);
        start = dead->sp;
    }
    scan_root(start, end, shared);
}

/* The roots. False if some could not be listed: /proc/self/maps not read to
 * its end, or empty (a process has a mapping or two: an empty file is one
 * this thread could not read, os.c's proc_own), a module's headers in
 * a forked child (scan_relro_by_list), or more RELRO regions than listed
 * (scan_relro). */
static bool scan_roots(dead_stack_t dead)
{
    scan_maps_lines = 0;
    bool whole = os_for_each_line("/proc/self/maps", scratch.maps, sizeof scratch.maps,
                                  scan_maps_line, &dead) &&
                 scan_maps_lines > 0;
    /* A stack that is a block of the heap (a coroutine's, or a thread's
     * given by pthread_attr_setstack) is in no root: the block is in use,
     * and reachable, whatever points to it; scanned whole, with its frames
     * and the registers spilled there (review finding). */
    mark_word(dead.sp);
    return scan_relro() && whole;
}

static void mark_registers(const os_registers_t *regs, void *arg)
{
    (void)arg;
    for (size_t i = 0; i < regs->count; i++)
        mark_word(regs->words[i]);
}

/* Roots in the registers of the other threads, still running (os.c asks
 * each with a signal; EBB_DEBUG_LEAK_REGISTERS=0: not). Ours are on our
 * stack (__builtin_unwind_init), and a process that never created a thread
 * has no others. Returns how many threads' registers could not be read,
 * UINT_MAX if none could; *listed_whole false if /proc/self/task could not
 * be listed to its end (the threads left unlisted, not counted, unread). */
static unsigned scan_registers(bool *listed_whole)
{
    *listed_whole = true;
    if (os_single_threaded() || option_get(OPT_DEBUG_LEAK_REGISTERS) == 0)
        return 0;
    return os_other_threads_registers(scratch.regs, purge_thread_tid(), PURGE_THREAD_NAME,
                                      mark_registers, NULL, listed_whole);
}

/* Small blocks are read a window at a time: one os_read_own a block
 * took 7-9 us, most of a report over a heap of many small blocks (a forked
 * child's over its parent's 2,000 blocks: 18 ms), and blocks allocated
 * together lie together. A window is an aligned WINDOW_BYTES, which never
 * crosses a slice (so it lies in one segment, mapped as a whole); the last
 * WINDOWS read are kept. A block is scanned from the copy of its window
 * read when the first block in it was: with other threads still freeing and
 * writing (the report runs as the process exits, they may), that copy can
 * be older than one read for the block alone. */
_Static_assert(SLICE_SIZE % WINDOW_BYTES == 0, "a window lies in one slice");

/* The window slot holding the WINDOW_BYTES at base, read now if no slot
 * does (its len: the bytes read, 0 if none could be). count_refused: a
 * refusal counts for the report (span_still_listed's fallback read counts
 * its own). */
static unsigned window_of(uintptr_t base, bool count_refused)
{
    unsigned w = 0;
    while (w < WINDOWS && scratch.win.base[w] != base)
        w++;
    if (w == WINDOWS) {
        w = scratch.win.next;
        scratch.win.next = (scratch.win.next + 1) % WINDOWS;
        ssize_t got = count_refused ? read_own_some(scratch.win.buf[w], base, WINDOW_BYTES)
                                    : os_read_own(scratch.win.buf[w], (const void *)base, WINDOW_BYTES);
        scratch.win.base[w] = base;
        scratch.win.len[w] = got > 0 ? (size_t)got : 0;
    }
    return w;
}

/* Scan a block's bytes [start, end): a window's copy for a small one. */
static void scan_block(uintptr_t start, uintptr_t end, bool huge)
{
    uintptr_t base = start & ~(WINDOW_BYTES - 1);
    if (huge || end > base + WINDOW_BYTES) {
        if (end - start > HUGE_SCAN_DIRECT)
            scan_used_pages(start, end, false);
        else
            scan_range(start, end);
        return;
    }
    unsigned w = window_of(base, true);
    if (end - base > scratch.win.len[w]) { /* not all of it could be read: alone, then */
        scan_range(start, end);
        return;
    }
    size_t from = (start - base + sizeof(uintptr_t) - 1) / sizeof(uintptr_t);
    size_t to = (end - base) / sizeof(uintptr_t);
    for (size_t k = from; k < to; k++)
        mark_word(scratch.win.buf[w][k]);
}

static void scan_span(const span_t *s)
{
    scan_block(s->start, span_end(s), s->flags & SPAN_HUGE);
}

/* Scan every marked span, and those they mark in turn, until none is left.
 * A generation at a time (the spans marked while the one before was
 * scanned), in address order: taken as marked (depth first, before
 * 2026-12-06), the blocks of a hash table came in the order of its buckets,
 * each in another window than the block before, and every block cost a 16
 * KiB read (a soak's gawk with 1.5 million live blocks: 4.4 s of report,
 * most of it copying windows). In address order, the blocks sharing a
 * window are scanned one after the other, from one read. A span enters
 * the queue once (when marked), so lk.work has room for all; a long chain
 * is as many generations of one span each, each sorted at no cost. */
static void mark_all(void)
{
    memset(scratch.win.base, 0, sizeof scratch.win.base);
    size_t next = 0;
    while (next < lk.work_len) {
        size_t generation_end = lk.work_len, n = generation_end - next;
        if (n < lk.count / 16) {
            index_sort(lk.work + next, n, NULL);
            for (; next < generation_end; next++)
                scan_span(&lk.spans[lk.work[next]]);
            continue;
        }
        /* A big generation: flagged, then found by one pass over all the
         * spans, cheaper than its sort (a generation of 600,000 took
         * 0.1 s to sort). */
        for (; next < generation_end; next++)
            lk.spans[lk.work[next]].flags |= SPAN_QUEUED;
        for (size_t i = 0; i < lk.count; i++) {
            if (lk.spans[i].flags & SPAN_QUEUED) {
                lk.spans[i].flags &= (uint8_t)~SPAN_QUEUED;
                scan_span(&lk.spans[i]);
            }
        }
    }
}

/* Blocks allocated after the listing are roots. Other threads run on
 * while the report marks, and what they allocate is in no span: neither
 * judged nor, being inside ebb's segments, scanned as a root. A pointer
 * they move into such a block (a vector grown, a table copied and the old
 * one freed, a node pushed on a list) hid every block behind it, which were
 * counted lost (review finding: 1,000 reachable blocks of a table a worker
 * kept copying, 55,000-78,000 nodes of a list another thread pushed onto,
 * reported lost in every run). So after marking, every live block not
 * listed (by its start and header check) is scanned as a root, and marking
 * goes on from what it reaches; twice, for what was allocated meanwhile.
 * What it cannot see is a pointer moved from one listed block not yet
 * scanned into another already scanned (the report does not stop the
 * program's threads): counted lost. */
static size_t unlisted_found ebb_cold_bss;

/* Whether the block at h is live and not listed; its user bytes then. */
static bool unlisted_live(debug_header_t *h, uintptr_t map_end, uintptr_t *start, uintptr_t *end)
{
    debug_header_t c;
    if (!debug_header_intact(h, &c))
        return false;
    if (map_end == 0 && c.size >= SEGMENT_SIZE)
        return false;
    *start = (uintptr_t)h + debug_offset(&c);
    *end = *start + c.size;
    long i = span_find(*start);
    return i < 0 || lk.spans[i].start != *start || lk.spans[i].check != c.check;
}

/* A block's bytes are read after it was found live (its header), never
 * from an older copy: a window read before the block was allocated, or
 * before its contents were copied in, held none of its pointers (the copy
 * of a table a thread kept replacing was found empty, and its 1,000
 * blocks lost, one run in three). So the small blocks of a window are
 * found first, then the window is read, then those still live are
 * scanned from it. */
#define WINDOW_BLOCKS_MAX (WINDOW_BYTES / sizeof(debug_header_t) + 1)

static void unlisted_of_page(page_t *page, void *arg)
{
    (void)arg;
    uintptr_t start, end;
    if (page->kind == PAGE_LARGE) {
        if (unlisted_live((debug_header_t *)page_start(page), 0, &start, &end)) {
            unlisted_found++;
            scan_range(start, end);
        }
        return;
    }
    if (page->kind != PAGE_SMALL || page->block_size < sizeof(debug_header_t))
        return;
    uintptr_t first = (uintptr_t)page_start(page), bs = page->block_size;
    size_t k = 0, n = page->capacity;
    while (k < n) {
        uintptr_t base = (first + k * bs) & ~(WINDOW_BYTES - 1);
        uint64_t in_window[(WINDOW_BLOCKS_MAX + 63) / 64] = {0};
        size_t from = k, found = 0;
        for (; k < n && first + k * bs < base + WINDOW_BYTES; k++) {
            if (!unlisted_live((debug_header_t *)(first + k * bs), 0, &start, &end))
                continue;
            unlisted_found++;
            if (end > base + WINDOW_BYTES) {
                scan_range(start, end); /* read now, alone */
            } else {
                in_window[(k - from) / 64] |= (uint64_t)1 << ((k - from) % 64);
                found++;
            }
        }
        if (found == 0)
            continue;
        memset(scratch.win.base, 0, sizeof scratch.win.base); /* read it now */
        window_of(base, true);
        for (size_t j = from; j < k; j++) {
            if (!(in_window[(j - from) / 64] >> ((j - from) % 64) & 1))
                continue;
            /* Live before the read and after it: the copy is of its contents. */
            if (unlisted_live((debug_header_t *)(first + j * bs), 0, &start, &end) &&
                end <= base + WINDOW_BYTES)
                scan_block(start, end, false);
        }
    }
}

static void unlisted_of_segment(segment_t *seg, void *arg)
{
    segment_for_each_page(seg, unlisted_of_page, arg);
}

static void unlisted_of_huge(segment_t *seg, void *arg)
{
    (void)arg;
    uintptr_t start, end;
    if (unlisted_live((debug_header_t *)((uint8_t *)seg + seg->block_offset),
                      (uintptr_t)seg + seg->map_size, &start, &end)) {
        unlisted_found++;
        scan_block(start, end, true);
    }
}

/* Scan the blocks allocated since the listing as roots, and mark from them
 * (above). */
static void mark_from_unlisted(void)
{
    for (int round = 0; round < 2; round++) {
        unlisted_found = 0;
        segment_for_each(unlisted_of_segment, NULL);
        huge_for_each_live(unlisted_of_huge, NULL);
        if (unlisted_found == 0)
            return;
        mark_all();
    }
}

/* ---------------------------------------------------------------------------
 * 4. The report
 * ------------------------------------------------------------------------- */
typedef struct group_s {
    uint32_t trace;
    uint16_t context;       /* the blocks' ebb_debug_set_context label, 0: none */
    bool marked, inherited; /* inherited: lost blocks only */
    uint64_t count, bytes;
} group_t;

static void add_count(text_t *t, uint64_t bytes, uint64_t blocks)
{
    text_add_u64(t, bytes, 0);
    text_add(t, bytes == 1 ? " byte in " : " bytes in ");
    text_add_u64(t, blocks, 0);
    text_add(t, blocks == 1 ? " block" : " blocks");
}

/* The groups, largest first: a heapsort (no allocation, no recursion) on a
 * heap whose root is the smallest, so that each smallest goes to the end. */
static bool group_before(const group_t *a, const group_t *b)
{
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes;
    return a->trace != b->trace ? a->trace < b->trace : a->context < b->context;
}

static void groups_sift_down(group_t *g, size_t i, size_t n)
{
    for (;;) {
        size_t last = i, l = 2 * i + 1, r = l + 1;
        if (l < n && group_before(&g[last], &g[l]))
            last = l;
        if (r < n && group_before(&g[last], &g[r]))
            last = r;
        if (last == i)
            return;
        group_t tmp = g[i];
        g[i] = g[last];
        g[last] = tmp;
        i = last;
    }
}

static void groups_sort(group_t *g, size_t n)
{
    for (size_t start = n / 2; start-- > 0;)
        groups_sift_down(g, start, n);
    for (size_t end = n; end-- > 1;) {
        group_t tmp = g[0];
        g[0] = g[end];
        g[end] = tmp;
        groups_sift_down(g, 0, end);
    }
}

/* The group of (trace, context, marked, inherited), found through an open-addressing
 * index of `slots` (a power of two, at least twice the groups' room: 0 is an
 * empty slot, else a group's index + 1), or added; NULL when full. */
static group_t *group_of(group_t *g, size_t *n, size_t cap, uint32_t *index, size_t slots,
                         uint32_t trace, uint16_t context, bool marked, bool inherited)
{
    uint64_t key = (uint64_t)trace << 18 | (uint64_t)context << 2 | (uint64_t)marked << 1 |
                   (uint64_t)inherited;
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (slots - 1);
    for (;; i = (i + 1) & (slots - 1)) {
        if (index[i] == 0)
            break;
        group_t *x = &g[index[i] - 1];
        if (x->trace == trace && x->context == context && x->marked == marked &&
            x->inherited == inherited)
            return x;
    }
    if (*n == cap)
        return NULL;
    g[*n] = (group_t){.trace = trace, .context = context, .marked = marked, .inherited = inherited};
    index[i] = (uint32_t)++*n;
    return &g[*n - 1];
}

/* Print the groups of one kind (g sorted by groups_sort). */
static void print_groups(text_t *t, group_t *g, size_t n, bool marked, bool inherited)
{
    /* Symbolized 16 groups at a time: one addr2line run per module for all
     * their frames, not one per group. */
    enum { AHEAD = 16 };
    uint32_t ahead[AHEAD];
    size_t symbolized = 0;
    for (size_t i = 0; i < n; i++) {
        if (g[i].marked != marked || g[i].inherited != inherited)
            continue;
        if (i >= symbolized) {
            int k = 0;
            for (symbolized = i; symbolized < n && k < AHEAD; symbolized++)
                if (g[symbolized].marked == marked && g[symbolized].inherited == inherited)
                    ahead[k++] = g[symbolized].trace;
            trace_symbolize(ahead, k);
        }
        text_add(t, "==ebb== ");
        add_count(t, g[i].bytes, g[i].count);
        text_add(t, marked ? " still reachable" : inherited ? " lost, inherited through fork()" : " lost");
        const char *ctx = debug_context_name(g[i].context);
        if (ctx) {
            text_add(t, ", context \"");
            text_add(t, ctx);
            text_add(t, "\"");
        }
        text_add(t, ", allocated at:\n");
        trace_print(t, g[i].trace, "    ");
    }
}

/* A one-line report instead of the leak report. */
static void leak_report_message(const char *msg)
{
    debug_report_lock();
    bool opened;
    int fd = debug_log_open(&opened);
    os_write_fd(fd, msg, strlen(msg));
    debug_log_close(fd, opened);
    debug_report_unlock();
}

/* EBB_DEBUG_LEAK_EXITCODE: exit now with it, if set. For a report that found
 * lost blocks of the process's own, and one that could not be made: a
 * report that could not look cannot say that nothing was lost (fail-closed;
 * before 2026-12, a report refused its memory exited 0). */
static void leak_exit_code_apply(void)
{
    long code = option_get(OPT_DEBUG_LEAK_EXITCODE);
    if (code <= 0)
        return;
    /* What exit would still do after this destructor: flush every stdio
     * stream (a program writing to a pipe or a file would lose its last
     * output). glibc's fcloseall is the very routine exit runs for that
     * (_IO_cleanup), and closes nothing. It waits where exit would: not for
     * a thread that holds a stream's lock, but for a write of its buffer to
     * a full pipe. */
    fcloseall();
    os_exit_now((int)code);
}

/* The report cannot be made: this thread is exiting from a signal handler
 * that interrupted ebb holding a lock. It checked nothing, so the exit code
 * applies (fail-closed). */
static void leak_report_skipped_for_lock(void)
{
    /* With the closing line every report has, so that a tool reading for
     * it takes this one as whole, not cut short (review finding). */
    leak_report_message("==ebb== LEAK REPORT skipped: the process is exiting from a signal "
                        "handler that interrupted ebb holding a lock (an allocator call, a "
                        "purge pass or a heap snapshot)\n==ebb== end of leak report\n");
    leak_exit_code_apply();
}

/* A report's first words, "==ebb== LEAK REPORT (pid N): ", into out->t, with
 * the report lock taken and the log opened: leak_report_end closes both. */
typedef struct report_out_s {
    text_t t;
    int fd;
    bool opened;
} report_out_t;

static void leak_report_begin(report_out_t *out)
{
    debug_report_lock();
    out->fd = debug_log_open(&out->opened);
    text_init(&out->t, out->fd);
    text_add(&out->t, "==ebb== LEAK REPORT (pid ");
    text_add_u64(&out->t, (uint64_t)os_getpid(), 0);
    text_add(&out->t, "): ");
}

/* The closing marker: a report without it was cut short. */
static void leak_report_end(report_out_t *out)
{
    text_add(&out->t, "==ebb== end of leak report\n");
    text_flush(&out->t);
    debug_log_close(out->fd, out->opened);
    debug_report_unlock();
}

/* "==ebb== INCOMPLETE: <bytes><rest>" if bytes is not 0: memory the report
 * left unread, or read in part. */
static void incomplete_bytes(text_t *t, uint64_t bytes, const char *rest)
{
    if (bytes == 0)
        return;
    text_add(t, "==ebb== INCOMPLETE: ");
    text_add_u64(t, bytes, 0);
    text_add(t, rest);
}

/* "==ebb== INCOMPLETE: <what><n><one or many><rest>" if n is not 0. */
static void incomplete_count(text_t *t, uint64_t n, const char *what, const char *one,
                             const char *many, const char *rest)
{
    if (n == 0)
        return;
    text_add(t, "==ebb== INCOMPLETE: ");
    text_add(t, what);
    text_add_u64(t, n, 0);
    text_add(t, n == 1 ? one : many);
    text_add(t, rest);
}

/* The report when its arrays could not be mapped (`bytes` for `blocks`
 * live blocks): a header, the reason, and the closing marker, so that it
 * reads as a whole report that checked nothing, not as one cut short. */
static void leak_report_not_made(size_t bytes, size_t blocks)
{
    report_out_t out;
    leak_report_begin(&out);
    text_t *t = &out.t;
    text_add(t, "not made\n==ebb== INCOMPLETE: no memory for the leak report (");
    text_add_u64(t, bytes, 0);
    text_add(t, " bytes for ");
    text_add_u64(t, blocks, 0);
    text_add(t, blocks == 1 ? " live block" : " live blocks");
    text_add(t, " refused); no block was checked\n");
    leak_report_end(&out);
}

static void leak_report_make(dead_stack_t dead, long mode);

/* The calling thread's registers are roots too: the callee-saved ones may
 * hold the only pointer to a block (the C library's path from exit or
 * quick_exit to here spills only those it uses). __builtin_unwind_init
 * makes this function's prologue save every one of them in its frame, and
 * the scan of this stack starts at the stack pointer read here, below that
 * spill area. Not at the address of a local: GCC for aarch64 lays the spill
 * area below the locals (x86-64 pushes it above them), so d8-d15 and x28
 * went unscanned there (tests/debug/leak_pointer_in_own_register.c). This
 * frame is small and every slot of it written; the report's own, large one
 * (leak_report_make) lies below the stack pointer and is not scanned, so
 * whatever earlier calls left in its unwritten slots is not taken for a
 * root either. */
ebb_noinline void leak_report_at_exit(void)
{
    long mode = option_get(OPT_DEBUG_LEAKS);
    if (!debug_enabled || mode == 0)
        return;
    if (debug_report_held_here()) {
        /* Exit from a signal handler that interrupted this thread's report:
         * no report can be made (the report lock is ours, its output maybe
         * blocked), nor a line written. It checked nothing, so the exit code
         * applies, as to a report skipped below (review of 723bdb3: this
         * one exited with the handler's status;
         * tests/debug/leak_exitcode_exit_during_report.c). */
        leak_exit_code_apply();
        return;
    }
    if (lock_any_held()) {
        /* Exit from a handler that interrupted this thread inside ebb holding
         * a lock. Asked here, before anything below allocates
         * (pthread_getattr_np in dead_stack_below): an allocation waits for
         * ever for the heap lock the interrupted slow path holds (review of
         * stop 42: a trim's madvise under the heap lock, interrupted by a
         * handler that exits; tests/debug/exit_in_handler_during_pass.c). */
        leak_report_skipped_for_lock();
        return;
    }
    purge_forbid_thread(); /* before dead_stack_below's allocations */
    __builtin_unwind_init(); /* every callee-saved register into this frame */
    uintptr_t sp;
#if defined(__x86_64__)
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
    __asm__ volatile("mov %0, sp" : "=r"(sp));
#else
    volatile uintptr_t sp_anchor = 0; /* where the spill area lies is not known */
    sp = (uintptr_t)&sp_anchor;
#endif
    leak_report_make(dead_stack_below(sp), mode);
}

/* The report itself: below leak_report_at_exit's frame. */
static ebb_noinline void leak_report_make(dead_stack_t dead, long mode)
{
    trace_check_unloads(); /* no ebb lock held yet (trace.c, "Unloaded code") */
    if (!purge_exclusive_begin()) {
        leak_report_skipped_for_lock();
        return;
    }
    relro_list(); /* before the gate: it takes the loader's lock */
    debug_quarantine_hold(true);
    debug_gate_close(); /* other threads' allocator calls wait (debug.c) */
    /* Counted, then listed: blocks other threads allocate between the two
     * walks need the margin. More than it, and the listing had dropped the
     * last blocks of the walk, old ones as much as new, and every block
     * reached only through them was counted lost with no word of it
     * (review finding): now it is made again with room for them, three
     * times at most; what it still has no room for is scanned as a root
     * (mark_from_unlisted) and said. */
    size_t margin = 64, huge_margin = 16, cap, huge_cap, slots, bytes;
    uint8_t *mem;
    group_t *groups;
    uint32_t *group_index;
    for (int attempt = 0;; attempt++) {
        memset(&lk, 0, sizeof lk);
        lk.whole_private_left = WHOLE_PRIVATE_MAX;
        lk.whole_shared_left = WHOLE_SHARED_MAX;
        segment_for_each(spans_of_segment, NULL);
        huge_for_each_live(spans_of_huge, NULL);
        cap = lk.cap + margin;
        huge_cap = lk.huge_cap + huge_margin;
        slots = 2;
        while (slots < 2 * cap)
            slots *= 2;
        /* Mapped as one; only what is used is touched: the spans, the work
         * list as far as spans are marked, the groups found and their
         * index's slots. */
        bytes = cap * (sizeof(span_t) + sizeof(uint32_t) + sizeof(group_t)) + slots * sizeof(uint32_t) +
                huge_cap * sizeof(huge_span_t);
        bytes = (bytes + os_info.page_size - 1) & ~(os_info.page_size - 1);
        mem = cap < UINT32_MAX ? os_map_aligned(bytes, os_info.page_size, 0) : NULL;
        if (mem == NULL) {
            debug_gate_open();
            debug_quarantine_hold(false);
            purge_exclusive_end();
            leak_report_not_made(bytes, lk.cap);
            leak_exit_code_apply();
            return;
        }
        /* In order of alignment: 32-, 24-, 16-byte elements, then 4-byte ones. */
        lk.spans = (span_t *)mem;
        lk.cap = cap;
        groups = (group_t *)(lk.spans + cap);
        lk.huge = (huge_span_t *)(groups + cap);
        lk.huge_cap = huge_cap;
        lk.work = (uint32_t *)(lk.huge + huge_cap);
        group_index = lk.work + cap;
        segment_for_each(spans_of_segment, NULL);
        huge_for_each_live(spans_of_huge, NULL);
        if (lk.unlisted == 0 || attempt == 2)
            break;
        os_unmap(mem, bytes);
        margin = 2 * (margin + lk.unlisted);
        huge_margin = 2 * (huge_margin + lk.unlisted);
    }
    lk.skip[0][0] = (uintptr_t)mem;
    lk.skip[0][1] = (uintptr_t)mem + bytes;
    lk.skip[1][0] = (uintptr_t)&lk;
    lk.skip[1][1] = (uintptr_t)(&lk + 1);
    lk.skip[2][0] = (uintptr_t)&scratch;
    lk.skip[2][1] = (uintptr_t)(&scratch + 1);
    lk.skip_count = 3;
    spans_sort();
    spans_bound();
    spans_index();
    if (lk.units != NULL) {
        lk.skip[lk.skip_count][0] = (uintptr_t)lk.units;
        lk.skip[lk.skip_count][1] = (uintptr_t)lk.units + lk.index_bytes;
        lk.skip_count++;
    }
    huge_for_each_cached(cached_huge, NULL);
    bool threads_listed_whole;
    unsigned regs_missed = scan_registers(&threads_listed_whole);
    bool roots_whole = scan_roots(dead);
    mark_all();
    mark_from_unlisted();

    /* Group by (trace, context, reachable, inherited). A forked child's report lists
     * the blocks it allocated; the lost ones it inherited from its parent
     * (lost there already, as a rule, and reported by the parent at its own
     * exit) are counted in one line, listed with EBB_DEBUG_LEAKS=all only:
     * otherwise every child of a server repeats its parent's leaks, and pays
     * their symbolization (100 ms and more a report) at every exit. */
    size_t ngroups = 0;
    uint64_t lost = 0, lost_bytes = 0, kept = 0, kept_bytes = 0, inh = 0, inh_bytes = 0;
    uint64_t gone = 0;
    /* Windows read from here on are read after marking (span_still_listed). */
    memset(scratch.win.base, 0, sizeof scratch.win.base);
    for (size_t i = 0; i < lk.count; i++) {
        const span_t *s = &lk.spans[i];
        bool marked = s->flags & SPAN_MARKED;
        if (!marked && !span_still_listed(s)) {
            gone++; /* freed (or freed and allocated again) since it was listed */
            continue;
        }
        bool inherited = !marked && (s->flags & SPAN_INHERITED);
        uint64_t size = span_end(s) - s->start;
        if (marked) {
            kept++;
            kept_bytes += size;
        } else if (inherited) {
            inh++;
            inh_bytes += size;
        } else {
            lost++;
            lost_bytes += size;
        }
        if ((marked || inherited) && mode != 2)
            continue;
        group_t *g = group_of(groups, &ngroups, cap, group_index, slots, s->trace, s->context,
                              marked, inherited);
        if (g == NULL)
            continue;
        g->count++;
        g->bytes += size;
    }
    groups_sort(groups, ngroups);
    /* Passes, quarantine evictions and other threads' calls go on once
     * every block is judged (span_still_listed relies on the first two
     * having waited). */
    debug_gate_open();
    debug_quarantine_hold(false);
    purge_exclusive_end();

    report_out_t out;
    leak_report_begin(&out);
    text_t *t = &out.t;
    text_add_u64(t, lost_bytes, 0);
    text_add(t, " bytes lost in ");
    text_add_u64(t, lost, 0);
    text_add(t, lost == 1 ? " block\n" : " blocks\n");
    print_groups(t, groups, ngroups, false, false);
    if (mode == 2) {
        print_groups(t, groups, ngroups, false, true);
        print_groups(t, groups, ngroups, true, false);
    }
    if (inh > 0) {
        text_add(t, "==ebb== lost too: ");
        add_count(t, inh_bytes, inh);
        text_add(t, " allocated before this process was forked");
        text_add(t, mode == 2 ? "\n" : " (EBB_DEBUG_LEAKS=all lists them)\n");
    }
    text_add(t, "==ebb== still reachable: ");
    add_count(t, kept_bytes, kept);
    text_add(t, mode == 2 ? "\n" : " (EBB_DEBUG_LEAKS=all lists them)\n");
    if (gone > 0) {
        text_add(t, "==ebb== freed by other threads while the report ran, not counted: ");
        text_add_u64(t, gone, 0);
        text_add(t, gone == 1 ? " block\n" : " blocks\n");
    }
    /* Registers left unread are roots left unseen: INCOMPLETE, as the
     * other lines of what the report could not see (before 2026-12-06 these
     * lines did not say so). */
    if (regs_missed == UINT_MAX) {
        text_add(t, "==ebb== INCOMPLETE: other threads' registers not read (no real-time signal "
                    "free, or /proc/self/task unreadable): blocks only they point to are counted "
                    "lost\n");
    } else if (!os_single_threaded() && option_get(OPT_DEBUG_LEAK_REGISTERS) == 0) {
        /* Asked for, yet the report must not read as if they were looked at. */
        text_add(t, "==ebb== INCOMPLETE: other threads' registers not read "
                    "(EBB_DEBUG_LEAK_REGISTERS=0): blocks only they point to are counted lost\n");
    } else if (regs_missed > 0) {
        text_add(t, "==ebb== INCOMPLETE: registers of ");
        text_add_u64(t, regs_missed, 0);
        text_add(t, regs_missed == 1 ? " running thread" : " running threads");
        text_add(t, " not read (signals blocked, no answer, or status unreadable): "
                    "blocks only they point to are counted lost\n");
    }
    if (!threads_listed_whole)
        text_add(t, "==ebb== INCOMPLETE: /proc/self/task not listed to its end: the registers of "
                    "the threads not listed were not read; blocks only they point to are counted "
                    "lost\n");
    incomplete_count(t, lk.reads_refused, "the system refused ", " read", " reads",
                     " of memory (process_vm_readv and pipes both refused); blocks reached only "
                     "through what was not read are counted lost\n");
    incomplete_bytes(t, lk.mapped_only_bytes,
                     " bytes of big shared mappings read only where this process maps pages "
                     "(mincore refused; read whole, their holes would become memory); blocks "
                     "reached only through the rest are counted lost\n");
    incomplete_bytes(t, lk.unread_bytes,
                     " bytes of big mappings or blocks not read (the pages they use could not be "
                     "found: /proc/self/pagemap or mincore refused; too big to read whole); "
                     "blocks reached only through them are counted lost\n");
    incomplete_count(t, lk.unlisted, "", " live block", " live blocks",
                     " allocated by other threads while the report listed them were not judged "
                     "(scanned as roots)\n");
    if (!roots_whole)
        text_add(t, "==ebb== INCOMPLETE: not every root could be listed (/proc/self/maps not read "
                    "whole, a module's headers unreadable in a forked child, or more than 1024 "
                    "RELRO regions); blocks reached "
                    "only from those left out are counted lost\n");
    leak_report_end(&out);
    os_unmap(mem, bytes);
    if (lk.units != NULL)
        os_unmap(lk.units, lk.index_bytes);
    if (lost > 0)
        leak_exit_code_apply();
}
