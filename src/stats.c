/*
 * stats.c — what ebb holds, and why: the snapshot (ebb_stats_get), the tally
 * of one segment that both the snapshot and the heap walk (walk.c) build on,
 * the EBB_STATS report at exit and the EBB_STATS_INTERVAL samples.
 *
 * Nothing here adds work to malloc or free: every number is read from what the
 * allocator keeps anyway (page descriptors, the segment bitmaps, the huge
 * list, the OS layer's counters). The price is that numbers read while other
 * threads allocate are approximate (internal.h, "telemetry"): each owner-only
 * field is read once and clamped into its valid range. Nothing here allocates.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"

static uint64_t round_up_u64(uint64_t x, uint64_t to)
{
    return (x + to - 1) / to * to;
}

static uint64_t process_start_ms; /* for the samples' time stamps */

#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))

/* Blocks on a page's xthread_free list, counted without taking it: pushes
 * only ever happen at the head, but the owner may take the whole list at any
 * time and reuse the blocks, so every link is checked to be a block of this
 * page before it is followed, and at most `capacity` are counted. */
ebb_racy_reader static size_t xthread_pending_count(const page_t *page, size_t bs, size_t capacity)
{
    uintptr_t start = (uintptr_t)page_start(page);
    uintptr_t x = atomic_load_explicit(&((page_t *)page)->xthread_free, memory_order_acquire) &
                  ~XTHREAD_FLAGS;
    size_t n = 0;
    while (x != 0 && n < capacity) {
        if (!page_is_carved_block(x, start, bs, capacity))
            break;
        n++;
        x = *(const volatile uintptr_t *)x; /* a block's link (block_t.next) */
    }
    return n;
}

/* What a small page's run may hold resident: its slices written before the
 * page started carving (`prewritten`, the run's bits of the segment's
 * prewritten_slices, bit 0 its first slice) whole, the others as far as the
 * carved blocks (`touched` bytes from the run's start) reach into them.
 * Counting only the carved blocks put committed_bytes below the resident
 * bytes when a new page took dirty slices or a kept page changed class
 * (review finding; tests/test_stats.c). */
static uint64_t run_committed(uint64_t prewritten, size_t slices, uint64_t touched)
{
    uint64_t bytes = 0;
    for (size_t j = 0; j < slices; j++) {
        uint64_t start = (uint64_t)j * SLICE_SIZE;
        if ((prewritten >> j) & 1)
            bytes += SLICE_SIZE;
        else if (touched > start)
            bytes += touched - start < SLICE_SIZE ? touched - start : SLICE_SIZE;
    }
    return bytes;
}

ebb_racy_reader static void tally_small_page(const page_t *page, size_t run_bytes, uint64_t prewritten,
                                             struct ebb_heap_summary *sum)
{
    unsigned cls = READ_ONCE(page->class_idx);
    if (cls >= CLASS_COUNT)
        return;
    size_t bs = class_block_size[cls];
    size_t reserved = run_bytes / bs;
    size_t capacity = READ_ONCE(page->capacity);
    size_t used = READ_ONCE(page->used);
    if (capacity > reserved)
        capacity = reserved;
    if (used > capacity)
        used = capacity;
    size_t remote = xthread_pending_count(page, bs, capacity);
    if (remote > used)
        remote = used;
    size_t live = used - remote;
    /* Blocks a trim dropped are neither live nor free: their memory went
     * back to the OS (page.c, page_trim). The count is an estimate while
     * the owner runs, kept within the page. */
    size_t dropped = page_dropped_count(page);
    if (dropped > capacity - live)
        dropped = capacity - live;
    size_t free_blocks = capacity - live - dropped;
    sum->live_bytes += live * bs;
    sum->live_blocks += live;
    sum->page_free_bytes += free_blocks * bs;
    sum->xthread_pending_bytes += remote * bs;
    uint64_t touched = round_up_u64(capacity * bs, os_info.page_size);
    uint64_t committed = run_committed(prewritten, run_bytes / SLICE_SIZE, touched);
    /* Less the OS pages a trim gave back: under dropped blocks, or past the
     * carved ones (page.c, page_trim_tail). */
    const segment_t *seg = page_segment(page);
    size_t idx = (size_t)(page - seg->pages);
    uint64_t trimmed = 0;
    for (size_t i = 0; i < run_bytes / SLICE_SIZE && idx + i < SLICES_PER_SEGMENT; i++)
        trimmed += slices_count(READ_ONCE(seg->trimmed[idx + i])) * (uint64_t)os_info.page_size;
    sum->committed_bytes += committed > trimmed ? committed - trimmed : 0;
    struct ebb_class_summary *c = &sum->classes[cls];
    c->block_size = bs;
    c->pages++;
    c->empty_pages += live == 0;
    c->used_blocks += live;
    c->free_blocks += free_blocks;
    c->page_bytes += run_bytes;
    if (sum->class_count < cls + 1)
        sum->class_count = cls + 1;
}

ebb_racy_reader void stats_tally_segment(segment_t *seg, struct ebb_heap_summary *sum)
{
    sum->segments++;
    /* The header slice: only the descriptors are ever touched. */
    sum->committed_bytes += round_up_u64(sizeof(segment_t), os_info.page_size);
    uint64_t free_mask = atomic_load_explicit(&seg->free_slices, memory_order_acquire);
    uint64_t dirty = atomic_load_explicit(&seg->dirty_slices, memory_order_relaxed);
    uint64_t prewritten = atomic_load_explicit(&seg->prewritten_slices, memory_order_relaxed);
    size_t run = 0;
    for (size_t i = 1; i < SLICES_PER_SEGMENT; i++) {
        if ((free_mask >> i) & 1) {
            sum->free_slice_bytes += SLICE_SIZE;
            if ((dirty >> i) & 1) {
                sum->committed_bytes += SLICE_SIZE;
                sum->purgeable_bytes += SLICE_SIZE;
            }
            run++;
            if (run * SLICE_SIZE > sum->largest_free_run)
                sum->largest_free_run = run * SLICE_SIZE;
            continue;
        }
        run = 0;
        const page_t *page = &seg->pages[i];
        if (READ_ONCE(seg->slice_offset[i]) != 0)
            continue; /* inside a run: its first slice counts for it */
        size_t slices = READ_ONCE(page->slice_count);
        if (slices == 0 || slices > SLICES_PER_SEGMENT - i)
            slices = 1;
        size_t run_bytes = slices * SLICE_SIZE;
        unsigned kind = READ_ONCE(page->kind);
        if (kind == PAGE_SMALL) {
            tally_small_page(page, run_bytes, prewritten >> i, sum);
        } else if (kind == PAGE_LARGE) {
            size_t bs = READ_ONCE(page->block_size);
            if (bs > run_bytes)
                bs = run_bytes;
            sum->large_blocks++;
            sum->large_bytes += bs;
            sum->live_bytes += bs;
            sum->live_blocks++;
            sum->committed_bytes += run_bytes;
        }
    }
}

static void tally_huge_one(segment_t *seg, void *arg)
{
    struct ebb_heap_summary *sum = arg;
    size_t usable = seg->map_size - seg->block_offset;
    sum->live_bytes += usable;
    sum->live_blocks++;
    sum->large_blocks++;
    sum->large_bytes += usable;
    sum->committed_bytes += seg->map_size;
}

void stats_tally_huge(struct ebb_heap_summary *sum)
{
    huge_for_each_live(tally_huge_one, sum);
}

void stats_summary_finish(struct ebb_heap_summary *sum)
{
    sum->version = EBB_HEAP_WALK_VERSION;
    if (sum->committed_bytes < sum->live_bytes)
        sum->committed_bytes = sum->live_bytes; /* a mix of moments; keep the invariant */
    sum->fragmentation = sum->live_bytes ? (double)sum->committed_bytes / (double)sum->live_bytes : 0;
}

static void tally_segment_cb(segment_t *seg, void *arg)
{
    stats_tally_segment(seg, arg);
}

/* ---------------------------------------------------------------------------
 * The snapshot
 * ------------------------------------------------------------------------- */
/* Under the purge exclusion: a pass moves blocks between lists and counts
 * (collecting remote frees, taking pages of idle heaps) in steps that a
 * snapshot must not see half-done, or it could not be exact when the
 * program's threads are quiescent. False, with everything 0, when called
 * from a signal handler that interrupted the calling thread while it held
 * one of ebb's locks (purge_exclusive_begin): the locks below would wait
 * for it for ever. */
static bool stats_fill(struct ebb_stats *st, uint64_t *segment_live_bytes)
{
    /* Static, used under the exclusion only: 3 KiB on the stack overflowed a
     * signal handler's 4-5 KiB alternate stack (review finding). */
    static struct ebb_heap_summary tally ebb_cold_bss;
    if (!purge_exclusive_begin()) {
        *st = (struct ebb_stats){0};
        *segment_live_bytes = 0;
        return false;
    }
    memset(&tally, 0, sizeof tally);
    segment_for_each(tally_segment_cb, &tally);
    struct tally_copy {
        uint64_t segments, live_bytes, live_blocks, committed_bytes, page_free_bytes,
            xthread_pending_bytes, purgeable_bytes;
    } c = {tally.segments,        tally.live_bytes,      tally.live_blocks,
           tally.committed_bytes, tally.page_free_bytes, tally.xthread_pending_bytes,
           tally.purgeable_bytes};
    const struct tally_copy *sum = &c;
    huge_counts_t huge;
    huge_counts(&huge);
    size_t cached, abandoned, alive, pooled;
    segment_counts(&cached, &abandoned);
    heap_counts(&alive, &pooled);
    purge_exclusive_end();
    *segment_live_bytes = sum->live_bytes;

    *st = (struct ebb_stats){0};
    st->reserved_bytes = os_mapped_bytes();
    /* Mapped memory that is neither a segment, a huge mapping nor the spare of
     * a segment region is metadata (the heaps): count it as committed. */
    uint64_t known = sum->segments * SEGMENT_SIZE + huge.live_bytes + huge.cached_bytes +
                     segment_spare_bytes();
    uint64_t metadata = st->reserved_bytes > known ? st->reserved_bytes - known : 0;
    st->live_bytes = sum->live_bytes + huge.live_usable_bytes;
    st->live_blocks = sum->live_blocks + huge.live;
    st->committed_bytes = sum->committed_bytes + huge.live_bytes + huge.cached_committed_bytes + metadata;
    if (st->committed_bytes < st->live_bytes)
        st->committed_bytes = st->live_bytes;
    if (st->reserved_bytes < st->committed_bytes)
        st->reserved_bytes = st->committed_bytes; /* counters read at other moments */
    st->page_free_bytes = sum->page_free_bytes;
    st->xthread_pending_bytes = sum->xthread_pending_bytes;
    st->purgeable_bytes = sum->purgeable_bytes + huge.cached_unpurged_bytes;
    st->huge_blocks = huge.live;
    st->huge_bytes = huge.live_bytes;
    st->huge_cached = huge.cached;
    st->huge_cached_bytes = huge.cached_bytes;
    st->segments = sum->segments;
    st->segments_cached = cached;
    st->segments_abandoned = abandoned;
    st->heaps_alive = alive;
    st->heaps_pooled = pooled;
    st->os_map_calls = os_map_calls();
    st->os_unmap_calls = os_unmap_calls();
    st->os_purge_calls = os_purge_calls();
    st->os_purged_bytes = os_purged_bytes();
    st->purge_passes = purge_pass_count();
    st->scavenger_wakeups = purge_wakeup_count();
    st->scavenger_running = purge_thread_running();
    st->debug_mode = debug_enabled;
    if (debug_enabled) {
        size_t stored, raw, traces;
        trace_registry_counts(&stored, &raw, &traces);
        st->debug_quarantine_bytes = debug_quarantine_bytes();
        st->debug_reuse_bytes = debug_reuse_bytes();
        st->debug_trace_bytes = stored;
        st->debug_trace_raw_bytes = raw;
        st->debug_traces = traces;
        st->debug_trace_table_bytes = trace_table_bytes();
    }
    return true;
}

EBB_API int ebb_stats_get(struct ebb_stats *stats)
{
    if (stats == NULL || stats->version == 0) {
        errno = EINVAL;
        return -1;
    }
    uint32_t version = stats->version < EBB_STATS_VERSION ? stats->version : EBB_STATS_VERSION;
    struct ebb_stats st;
    uint64_t segment_live;
    if (!stats_fill(&st, &segment_live)) {
        errno = EDEADLK; /* a handler inside this thread's own locked section */
        return -1;
    }
    st.version = version;
    /* Only the fields of the caller's version: its struct may be shorter. */
    st.size = version >= 3   ? (uint32_t)sizeof st
              : version == 2 ? (uint32_t)offsetof(struct ebb_stats, debug_trace_table_bytes)
                             : (uint32_t)offsetof(struct ebb_stats, debug_reuse_bytes);
    memcpy(stats, &st, st.size);
    return 0;
}

/* ---------------------------------------------------------------------------
 * glibc's reporting calls (override.c) read the same snapshot.
 * ------------------------------------------------------------------------- */
void stats_snapshot(struct ebb_stats *st, uint64_t *segment_live_bytes)
{
    (void)stats_fill(st, segment_live_bytes); /* all 0 from a handler inside ebb's locked code */
}

/* ---------------------------------------------------------------------------
 * EBB_STATS and EBB_STATS_INTERVAL: where reports go, and what they say.
 * ------------------------------------------------------------------------- */
/* EBB_STATS_FILE, a relative one made absolute at start (stats_init). */
static const char *stats_file_pattern;

/* Where a report or sample goes: EBB_STATS_FILE's file, opened for it, else
 * stderr (text_report_open says why); -1: nowhere. */
static int stats_open_output(bool *opened)
{
    char path[4096];
    return text_report_open("EBB_STATS_FILE", stats_file_pattern, path, sizeof path, opened);
}

static void line_bytes(text_t *t, const char *name, uint64_t v)
{
    text_add(t, name);
    for (size_t n = strlen(name); n < 24; n++)
        text_add(t, " ");
    text_add_u64(t, v, 14);
    text_add(t, "  (");
    text_add_mib(t, v);
    text_add(t, ")\n");
}

static void line_count(text_t *t, const char *name, uint64_t v)
{
    text_add(t, name);
    for (size_t n = strlen(name); n < 24; n++)
        text_add(t, " ");
    text_add_u64(t, v, 14);
    text_add(t, "\n");
}

/* The class table comes from a walk without pausing anyone (summaries only). */
static void capture_total(const struct ebb_heap_summary *h, void *arg)
{
    if (h->kind == EBB_HEAP_TOTAL)
        memcpy(arg, h, sizeof *h);
}

static void stats_report(int fd, const char *when)
{
    struct ebb_stats st;
    uint64_t segment_live;
    if (!stats_fill(&st, &segment_live)) {
        text_t t;
        text_init(&t, fd);
        text_add(&t, "== ebb stats: pid ");
        text_add_u64(&t, (uint64_t)os_getpid(), 0);
        text_add(&t, ", ");
        text_add(&t, when);
        text_add(&t, ": skipped, the process is exiting from a signal handler that interrupted "
                     "ebb holding a lock (an allocator call, a purge pass or a heap snapshot) ==\n");
        text_flush(&t);
        return;
    }
    static struct ebb_heap_summary total ebb_cold_bss; /* too big for a small thread stack */
    memset(&total, 0, sizeof total);
    ebb_heap_walk(capture_total, NULL, &total);

    /* One write for the whole report (about 3 KiB; 8 with every class in
     * use): the reports of a forking program's processes, sharing a file or
     * a pipe, interleaved mid-line when each went out 512 bytes at a time
     * (review finding). One report at a time in a process (report_begin). */
    static char spool[16384] ebb_cold_bss;
    text_t t;
    text_init_spool(&t, fd, spool, sizeof spool);
    text_add(&t, "== ebb stats: pid ");
    text_add_u64(&t, (uint64_t)os_getpid(), 0);
    text_add(&t, ", ebb ");
    text_add(&t, ebb_version());
    text_add(&t, ", ");
    text_add(&t, when);
    text_add(&t, " ==\n");
    line_bytes(&t, "reserved_bytes", st.reserved_bytes);
    line_bytes(&t, "committed_bytes", st.committed_bytes);
    line_bytes(&t, "live_bytes", st.live_bytes);
    line_count(&t, "live_blocks", st.live_blocks);
    line_bytes(&t, "page_free_bytes", st.page_free_bytes);
    line_bytes(&t, "xthread_pending_bytes", st.xthread_pending_bytes);
    line_bytes(&t, "purgeable_bytes", st.purgeable_bytes);
    line_count(&t, "huge_blocks", st.huge_blocks);
    line_bytes(&t, "huge_bytes", st.huge_bytes);
    line_count(&t, "huge_cached", st.huge_cached);
    line_bytes(&t, "huge_cached_bytes", st.huge_cached_bytes);
    line_count(&t, "segments", st.segments);
    line_count(&t, "segments_cached", st.segments_cached);
    line_count(&t, "segments_abandoned", st.segments_abandoned);
    line_count(&t, "heaps_alive", st.heaps_alive);
    line_count(&t, "heaps_pooled", st.heaps_pooled);
    line_count(&t, "os_map_calls", st.os_map_calls);
    line_count(&t, "os_unmap_calls", st.os_unmap_calls);
    line_count(&t, "os_purge_calls", st.os_purge_calls);
    line_bytes(&t, "os_purged_bytes", st.os_purged_bytes);
    line_count(&t, "purge_passes", st.purge_passes);
    line_count(&t, "scavenger_wakeups", st.scavenger_wakeups);
    if (st.debug_mode) {
        line_bytes(&t, "debug_quarantine_bytes", st.debug_quarantine_bytes);
        line_bytes(&t, "debug_reuse_bytes", st.debug_reuse_bytes);
        line_bytes(&t, "debug_trace_bytes", st.debug_trace_bytes);
        line_bytes(&t, "debug_trace_raw_bytes", st.debug_trace_raw_bytes);
        line_count(&t, "debug_traces", st.debug_traces);
        line_bytes(&t, "debug_trace_table_bytes", st.debug_trace_table_bytes);
    }
    text_add(&t, "fragmentation           ");
    text_add_ratio(&t, st.live_bytes ? (double)st.committed_bytes / (double)st.live_bytes : 0);
    text_add(&t, "  (committed / live)\n");
    text_add(&t, "-- size classes (pages, blocks) --\n");
    text_add(&t, "class  block_size  pages  empty_pages  used_blocks  free_blocks    page_bytes\n");
    for (unsigned c = 0; c < total.class_count && c < EBB_WALK_CLASS_MAX; c++) {
        const struct ebb_class_summary *k = &total.classes[c];
        if (k->pages == 0)
            continue;
        text_add_u64(&t, c, 5);
        text_add_u64(&t, k->block_size, 12);
        text_add_u64(&t, k->pages, 7);
        text_add_u64(&t, k->empty_pages, 13);
        text_add_u64(&t, k->used_blocks, 13);
        text_add_u64(&t, k->free_blocks, 13);
        text_add_u64(&t, k->page_bytes, 14);
        text_add(&t, "\n");
    }
    text_add(&t, "large  ");
    text_add_u64(&t, total.large_blocks, 0);
    text_add(&t, " blocks, ");
    text_add_u64(&t, total.large_bytes, 0);
    text_add(&t, " bytes (slice runs and huge mappings)\n");
    text_add(&t, "== end of ebb stats ==\n");
    text_flush(&t);
}

void stats_print_sample(void)
{
    struct ebb_stats st;
    uint64_t segment_live;
    if (!stats_fill(&st, &segment_live))
        return; /* never in the scavenger, which takes no signal */
    bool opened;
    int fd = stats_open_output(&opened);
    if (fd < 0)
        return; /* no stderr left to write to */
    text_t t;
    text_init(&t, fd);
    text_add(&t, "ebb-sample: ms=");
    text_add_u64(&t, os_now_ms() - process_start_ms, 0); /* since ebb started */
    text_add(&t, " reserved=");
    text_add_u64(&t, st.reserved_bytes, 0);
    text_add(&t, " committed=");
    text_add_u64(&t, st.committed_bytes, 0);
    text_add(&t, " live=");
    text_add_u64(&t, st.live_bytes, 0);
    text_add(&t, " purgeable=");
    text_add_u64(&t, st.purgeable_bytes, 0);
    text_add(&t, " xthread_pending=");
    text_add_u64(&t, st.xthread_pending_bytes, 0);
    text_add(&t, " huge=");
    text_add_u64(&t, st.huge_bytes, 0);
    text_add(&t, " segments=");
    text_add_u64(&t, st.segments, 0);
    text_add(&t, " heaps=");
    text_add_u64(&t, st.heaps_alive, 0);
    text_add(&t, " purges=");
    text_add_u64(&t, st.os_purge_calls, 0);
    text_add(&t, "\n");
    text_flush(&t);
    text_report_close(fd, opened);
}

void stats_init(void)
{
    process_start_ms = os_now_ms();
    if (option_get(OPT_STATS) || option_get(OPT_STATS_INTERVAL) > 0) {
        static char absolute[4096] ebb_cold_bss;
        stats_file_pattern = text_absolute_path(option_get_text(OPT_STATS_FILE), absolute,
                                                sizeof absolute);
        text_stderr_keep(); /* where reports go if the program closes fd 2 */
    }
    if (option_get(OPT_STATS_INTERVAL) > 0 && !option_get(OPT_BACKGROUND)) {
        static const char msg[] = "ebb: EBB_STATS_INTERVAL needs the background thread, "
                                  "which EBB_BACKGROUND=0 turns off: no samples\n";
        os_write_stderr(msg, sizeof msg - 1);
    }
}

/* The reports at exit (this one, then debug mode's leak report): a destructor
 * of the library, so it runs after main returns or exit() is called, after
 * the atexit handlers and the destructors of everything loaded after ebb.
 * Other threads may still be running. quick_exit runs no destructor: the
 * same reports are an at_quick_exit handler too, registered by ebb's
 * constructor (stats_register_quick_exit), so they run after the handlers
 * the program registers later. */
/* One report at a time in a process: exit in one thread and quick_exit in
 * another both run the reports, which share static buffers (the spool, the
 * class table); side by side, one printed the other's figures, cut mid-line
 * (review finding). A later one waits for the first, up to 5 s (a thread
 * cancelled inside a write never lets go); a handler that interrupted its own
 * thread's report makes none. True if this thread may report. */
static _Atomic(int) report_owner; /* the reporting thread's id, 0: none */

static bool report_begin(void)
{
    int me = os_gettid();
    for (int waited_ms = 0;; waited_ms++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&report_owner, &expected, me))
            return true;
        if (expected == me)
            return false;
        if (waited_ms >= 5000)
            return true; /* unowned for good: better a report than none */
        os_sleep_ms(1);
    }
}

static void report_end(void)
{
    int me = os_gettid();
    atomic_compare_exchange_strong(&report_owner, &me, 0);
}

__attribute__((destructor)) static void stats_at_exit(void)
{
    if (option_get(OPT_STATS) && report_begin()) {
        bool opened;
        int fd = stats_open_output(&opened);
        if (fd >= 0) {
            stats_report(fd, "at exit");
            text_report_close(fd, opened);
        }
        report_end();
    }
    trace_process_exiting();
    leak_report_at_exit(); /* debug mode (leak.c); last: it may end the process */
}

void stats_register_quick_exit(void)
{
    if (option_get(OPT_STATS) || (debug_enabled && option_get(OPT_DEBUG_LEAKS) != 0))
        at_quick_exit(stats_at_exit);
}
