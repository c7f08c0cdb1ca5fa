/*
 * walk.c — ebb_heap_walk: every heap summarized (per size class: pages, used
 * and free blocks, empty pages; fragmentation; the largest free run), and,
 * on request, every live block visited.
 *
 * The walk holds the purge exclusion for its whole length, so no purge pass
 * or scavenger visit runs meanwhile, then visits, in the lock order of heap.c:
 *   1. each thread heap, under its lock (its pages cannot change kind, its
 *      segment list cannot change); to visit blocks, the heap is also paused
 *      with the scavenger's quiescing protocol (heap.c), so that its free
 *      lists hold still — except the caller's own heap, whose owner is busy
 *      walking;
 *   2. the abandoned segments, under the abandoned list's lock (no thread can
 *      reclaim one meanwhile); a segment that moved between a heap and that
 *      list during 1 or 2 (an exit, a reclaim) makes the walk inexact
 *      (segment_moves_read);
 *   3. the huge blocks, under the huge lock (none can be freed or moved);
 *   4. the whole process: every segment (cached ones too) and the huge blocks,
 *      summarized without pausing anyone (a tally of its own, not the sum of
 *      1-3: cached segments are in no heap; include/ebb.h says what it counts).
 * A live block is a carved block that is neither on its page's free list nor
 * on its remote-free list. Remote frees keep arriving during the walk (only at
 * a list's head, so the part already read stays valid); a block freed that
 * way after its list was read is reported live, as it was a moment before.
 */
#include <errno.h>
#include <string.h>

#include "debug.h"

typedef struct walk_s {
    ebb_heap_visit_fn on_heap;
    ebb_block_visit_fn on_block;
    void *arg;
    bool all_exact;
    struct ebb_heap_summary sum; /* the summary being built */
} walk_t;

/* One live block to the callback. In debug mode a block of the underlying
 * heap starts with debug mode's header: the program's block is the user
 * pointer with its requested size, and a freed block waiting in the
 * quarantine is not live. */
static void visit_block(walk_t *w, void *block, size_t size)
{
    if (ebb_unlikely(debug_enabled)) {
        debug_header_t *h = block, c; /* c: the header as held (a realloc in place may change it) */
        if (size >= sizeof *h && debug_header_intact(h, &c))
            w->on_block((uint8_t *)h + debug_offset(&c), c.size, w->arg);
        return;
    }
    w->on_block(block, size, w->arg);
}

/* The most blocks a small page holds: 16-byte blocks in a page of the most
 * slices (a wide page an emptied class kept can go to the 16-byte class,
 * page_take_retained). The walk skipped such pages' blocks when this was one
 * slice's worth. */
#define PAGE_BLOCKS_MAX (PAGE_MAX_SLICES * SLICE_SIZE / MIN_ALIGN)

/* Mark the blocks on one free list in `is_free`; stops at anything that is not
 * a block of this page (a corrupted link must not send the walk astray). */
ebb_racy_reader static void mark_free_list(const block_t *b, uintptr_t start, size_t bs, size_t capacity,
                           uint64_t *is_free)
{
    for (size_t n = 0; b != NULL && n < capacity; n++) {
        uintptr_t x = (uintptr_t)b;
        if (!page_is_carved_block(x, start, bs, capacity))
            return;
        size_t i = (x - start) / bs;
        is_free[i / 64] |= (uint64_t)1 << (i % 64);
        b = b->next;
    }
}

/* The page's owner is paused (or is us), or the segment is abandoned and
 * its list locked: `free` holds still, `xthread_free` only grows at its head.
 * (Racy reader only for ThreadSanitizer, which cannot see the pause: it is
 * ordered by membarrier, heap.c.) */
ebb_racy_reader static void visit_small_page_blocks(walk_t *w, page_t *page)
{
    size_t bs = page->block_size;
    size_t capacity = page->capacity;
    if (bs == 0 || capacity == 0 || capacity > PAGE_BLOCKS_MAX)
        return;
    uintptr_t start = (uintptr_t)page_start(page);
    /* Static: 4 KiB overflowed a signal handler's small alternate stack
     * (review finding); the purge exclusion makes walks one at a time. */
    static uint64_t is_free[PAGE_BLOCKS_MAX / 64] ebb_cold_bss;
    memset(is_free, 0, (capacity + 63) / 64 * sizeof is_free[0]);
    mark_free_list(page->free, start, bs, capacity, is_free);
    uintptr_t x = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
    mark_free_list((const block_t *)(x & ~XTHREAD_FLAGS), start, bs, capacity, is_free);
    bool dropped = page_has_dropped(page); /* a trim's dropped blocks are not live either */
    for (size_t i = 0; i < capacity; i++) {
        if (!((is_free[i / 64] >> (i % 64)) & 1) && !(dropped && page_block_dropped(page, i)))
            visit_block(w, (void *)(start + i * bs), bs);
    }
}

static void visit_page_blocks(page_t *page, void *arg)
{
    walk_t *w = arg;
    if (page->kind == PAGE_SMALL)
        visit_small_page_blocks(w, page);
    else if (page->kind == PAGE_LARGE)
        visit_block(w, page_start(page), page->block_size);
}

static void visit_segment_blocks(walk_t *w, segment_t *seg)
{
    segment_for_each_page(seg, visit_page_blocks, w);
}

static void summary_begin(walk_t *w, uint32_t kind, uint64_t thread)
{
    memset(&w->sum, 0, sizeof w->sum);
    w->sum.kind = kind;
    w->sum.thread = thread;
    w->sum.blocks_exact = 1;
}

static void summary_end(walk_t *w)
{
    stats_summary_finish(&w->sum);
    if (w->on_heap)
        w->on_heap(&w->sum, w->arg);
}

/* 1. */
static void walk_heap(heap_t *h, bool paused, void *arg)
{
    walk_t *w = arg;
    summary_begin(w, EBB_HEAP_THREAD, h->thread_id);
    for (segment_t *seg = h->segments; seg; seg = seg->next) {
        stats_tally_segment(seg, &w->sum);
        if (w->on_block && paused)
            visit_segment_blocks(w, seg);
    }
    if (w->on_block && !paused) {
        w->sum.blocks_exact = 0;
        w->all_exact = false;
    }
    summary_end(w);
}

/* 2. */
static void walk_abandoned_segment(segment_t *seg, void *arg)
{
    walk_t *w = arg;
    stats_tally_segment(seg, &w->sum);
    if (w->on_block)
        visit_segment_blocks(w, seg);
}

/* 3. */
static void walk_huge_block(segment_t *seg, void *arg)
{
    walk_t *w = arg;
    if (w->on_block)
        visit_block(w, (uint8_t *)seg + seg->block_offset, seg->map_size - seg->block_offset);
}

/* 4. */
static void walk_any_segment(segment_t *seg, void *arg)
{
    stats_tally_segment(seg, arg);
}

EBB_API int ebb_heap_walk(ebb_heap_visit_fn on_heap, ebb_block_visit_fn on_block, void *arg)
{
    if (on_heap == NULL && on_block == NULL) {
        errno = EINVAL;
        return -1;
    }
    /* Static: the summary is 3 KiB, too much for a small thread stack; the
     * purge exclusion makes walks one at a time. */
    static walk_t w ebb_cold_bss;
    if (!purge_exclusive_begin()) {
        errno = EDEADLK; /* a handler inside this thread's own locked section */
        return -1;
    }
    w = (walk_t){.on_heap = on_heap, .on_block = on_block, .arg = arg, .all_exact = true};
    unsigned long moves = segment_moves_read();

    heap_for_each(walk_heap, &w, on_block != NULL);

    summary_begin(&w, EBB_HEAP_ABANDONED, 0);
    segment_for_each_abandoned(walk_abandoned_segment, &w);
    if (w.sum.segments > 0)
        summary_end(&w);
    /* A thread that exited after its heap was visited had its segments
     * visited again in 2; one that reclaimed an abandoned segment into a
     * heap visited before took it out of 2's sight: blocks listed twice or
     * not at all (review finding: both, with blocks_exact = 1). Such a walk
     * is not exact. */
    if (segment_moves_read() != moves)
        w.all_exact = false;

    summary_begin(&w, EBB_HEAP_HUGE, 0);
    stats_tally_huge(&w.sum);
    if (w.sum.live_blocks > 0) {
        huge_for_each_live(walk_huge_block, &w);
        summary_end(&w);
    }

    summary_begin(&w, EBB_HEAP_TOTAL, 0);
    segment_for_each(walk_any_segment, &w.sum);
    stats_tally_huge(&w.sum);
    w.sum.blocks_exact = w.all_exact;
    summary_end(&w);
    purge_exclusive_end();
    return 0;
}
