/*
 * large.c — huge blocks: requests above LARGE_MAX, and alignments a slice run
 * cannot honour. Each is its own mapping, with a segment header (kind
 * SEGMENT_HUGE, thread_id 0) at its start, so free finds it with the same mask
 * as any block and no thread owns it: any thread frees it by unmapping.
 *
 * Layout of a mapping:  [header page(s) | block ...]
 *   - alignment < SEGMENT_SIZE: the mapping starts on a segment boundary and
 *     the block at offset max(page size, alignment);
 *   - alignment >= SEGMENT_SIZE: the block must itself start on a segment
 *     boundary, so the header sits exactly one segment below it (ptr_segment
 *     masks p - 1 for this reason).
 * realloc grows a mapping in place with mremap when the address space after it
 * is free, else moves it with mremap onto a new reservation aligned the same
 * way — the kernel moves page tables, no byte is copied.
 *
 * The huge cache. A loop of malloc/free of a few MiB must not become an
 * mmap/munmap storm, so a freed mapping waits in a small cache (at most
 * HUGE_CACHE_MAX mappings and HUGE_CACHE_MAX_BYTES) and the next huge request
 * takes the closest one, resized with mremap. The purge pass purges a cached
 * mapping one purge delay after its free and unmaps it after the unmap delay;
 * a full cache evicts its oldest entry.
 *
 * Transparent huge pages (EBB_HUGE_PAGES=1, off by default): each new mapping
 * is marked MADV_HUGEPAGE (and unmarked while it waits purged in the cache),
 * so that a block the program writes faults in 2 MiB at a time: about half the page faults on seed "big", a fifth on
 * bench_large (2.6x faster); "big"'s time varies either way, because its
 * cuts split huge pages. A block written sparsely is resident 2 MiB at a
 * time, which is why it is not the default (docs/memory-return.md).
 */
#include <string.h>

#include "internal.h"

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) & ~(to - 1);
}

/* Where the block sits in the mapping, and how the mapping is aligned. */
static void huge_layout(size_t alignment, size_t *offset, size_t *map_align, size_t *align_offset)
{
    if (alignment >= SEGMENT_SIZE) {
        *offset = SEGMENT_SIZE;
        *map_align = alignment;
        *align_offset = SEGMENT_SIZE;
    } else {
        *offset = alignment > os_info.page_size ? alignment : os_info.page_size;
        *map_align = SEGMENT_SIZE;
        *align_offset = 0;
    }
}

static lock_t huge_lock = LOCK_INIT; /* the cache and the live list */
/* Under huge_lock: the live huge blocks, linked through seg->next/prev (which
 * only normal segments use otherwise), for the heap walk and the statistics. */
static segment_t *huge_live_first;
static size_t huge_live_count;
static size_t huge_live_bytes; /* their mappings */

static void huge_link_live_locked(segment_t *seg)
{
    seg->prev = NULL;
    seg->next = huge_live_first;
    if (huge_live_first)
        huge_live_first->prev = seg;
    huge_live_first = seg;
    huge_live_count++;
    huge_live_bytes += seg->map_size;
}

static void huge_unlink_live_locked(segment_t *seg)
{
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        huge_live_first = seg->next;
    if (seg->next)
        seg->next->prev = seg->prev;
    seg->next = seg->prev = NULL;
    huge_live_count--;
    huge_live_bytes -= seg->map_size;
}

static void huge_count_live(segment_t *seg, bool add)
{
    lock_acquire(&huge_lock);
    if (add)
        huge_link_live_locked(seg);
    else
        huge_unlink_live_locked(seg);
    lock_release(&huge_lock);
}

void huge_for_each_live(void (*fn)(segment_t *seg, void *arg), void *arg)
{
    lock_acquire(&huge_lock);
    for (segment_t *seg = huge_live_first; seg; seg = seg->next)
        fn(seg, arg);
    lock_release(&huge_lock);
}

/* Purge a freed mapping's block; its header page stays. With EBB_HUGE_PAGES
 * the mark goes too while the mapping waits (huge_alloc sets it again when it
 * is taken): khugepaged could otherwise fold the resident header page and the
 * purged pages around it back into a resident huge page. */
static void huge_purge_cached(segment_t *seg)
{
    seg->huge_zero = os_purge((uint8_t *)seg + seg->block_offset, seg->map_size - seg->block_offset);
    seg->huge_purged = true;
    if (option_get(OPT_HUGE_PAGES))
        os_no_huge_pages(seg, seg->map_size);
}

static segment_t *huge_cache[HUGE_CACHE_MAX]; /* oldest first */
static size_t huge_count;
static size_t huge_bytes;

static void huge_cache_remove_locked(size_t i)
{
    huge_bytes -= huge_cache[i]->map_size;
    huge_count--;
    memmove(&huge_cache[i], &huge_cache[i + 1], (huge_count - i) * sizeof huge_cache[0]);
}

/* Take the cached mapping that fits `total` best (same layout): as it is if
 * it is big enough and exceeds `total` by at most half the block's part of it
 * (total - offset; HUGE_TAKE_SLACK_DIV), else resized to `total`; NULL if
 * none. *zero: its block reads as zero. */
static segment_t *huge_cache_take(size_t total, size_t offset, size_t alignment, bool *zero)
{
    lock_acquire(&huge_lock);
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < huge_count; i++) {
        segment_t *c = huge_cache[i];
        if (c->block_offset != offset || (c->alignment >= SEGMENT_SIZE) != (alignment >= SEGMENT_SIZE) ||
            c->alignment < alignment)
            continue;
        if (best == SIZE_MAX)
            best = i;
        size_t have = huge_cache[best]->map_size;
        /* Prefer the smallest that is big enough, else the biggest. */
        if ((c->map_size >= total && (have < total || c->map_size < have)) ||
            (have < total && c->map_size > have))
            best = i;
    }
    segment_t *seg = NULL;
    if (best != SIZE_MAX) {
        seg = huge_cache[best];
        huge_cache_remove_locked(best);
    }
    lock_release(&huge_lock);
    if (seg == NULL)
        return NULL;
    *zero = seg->huge_zero;
    /* Big enough and at most 1.5 times the size: take it as it is. Its pages
     * may still be resident (not purged yet), and cutting its tail now would
     * only mean faulting fresh pages in at the next bigger request: a loop of
     * varying sizes would page-fault on every allocation. */
    if (seg->map_size >= total && seg->map_size - total <= (total - offset) / HUGE_TAKE_SLACK_DIV)
        return seg;
    if (seg->map_size != total) {
        if (os_remap_inplace(seg, seg->map_size, total)) {
            seg->map_size = total;
        } else {
            size_t off, map_align, align_offset;
            huge_layout(seg->alignment, &off, &map_align, &align_offset);
            void *target = os_reserve_aligned(total, map_align, align_offset);
            if (target == NULL || !os_remap_move(seg, seg->map_size, total, target)) {
                if (target)
                    os_unreserve(target, total);
                os_unmap(seg, seg->map_size);
                return NULL;
            }
            seg = target;
            seg->map_size = total;
        }
    }
    return seg;
}

void *huge_alloc(size_t size, size_t alignment, bool *zero)
{
    size_t offset, map_align, align_offset;
    huge_layout(alignment, &offset, &map_align, &align_offset);
    size_t ps = os_info.page_size;
    if (size > SIZE_MAX - offset - ps)
        return NULL;
    size_t total = offset + round_up(size ? size : 1, ps);
    segment_t *seg = huge_cache_take(total, offset, alignment, zero);
    if (seg) {
        if (seg->huge_purged && option_get(OPT_HUGE_PAGES))
            os_huge_pages(seg, seg->map_size);
        seg->alignment = alignment;
        segment_map_set(seg, true);
        huge_count_live(seg, true);
        return (uint8_t *)seg + offset;
    }
    *zero = true;
    purge_want_thread();
    seg = os_map_aligned(total, map_align, align_offset);
    if (seg == NULL && segment_cache_release())
        seg = os_map_aligned(total, map_align, align_offset);
    if (seg == NULL)
        return NULL;
    /* EBB_HUGE_PAGES: the flag is the mapping's, so it stays with it when
     * mremap grows or moves it and while it waits in the cache. */
    if (option_get(OPT_HUGE_PAGES))
        os_huge_pages(seg, total);
    seg->kind = SEGMENT_HUGE;
    seg->map_size = total;
    seg->block_offset = offset;
    seg->alignment = alignment;
    segment_map_set(seg, true);
    huge_count_live(seg, true);
    return (uint8_t *)seg + offset;
}

void huge_free(segment_t *seg)
{
    huge_count_live(seg, false);
    segment_map_set(seg, false);
    size_t size = seg->map_size;
    if (size > HUGE_CACHE_MAX_BYTES / 2) {
        os_unmap(seg, size);
        return;
    }
    seg->huge_freed_at_ms = os_now_ms();
    seg->huge_purged = false;
    seg->huge_zero = false;
    if (option_get(OPT_PURGE_DELAY) == 0) /* at once, before anyone can take it */
        huge_purge_cached(seg);
    segment_t *evict[HUGE_CACHE_MAX];
    size_t n = 0;
    lock_acquire(&huge_lock);
    while (huge_count > 0 && (huge_count == HUGE_CACHE_MAX || huge_bytes + size > HUGE_CACHE_MAX_BYTES)) {
        evict[n++] = huge_cache[0];
        huge_cache_remove_locked(0);
    }
    huge_cache[huge_count++] = seg;
    huge_bytes += size;
    lock_release(&huge_lock);
    for (size_t i = 0; i < n; i++)
        os_unmap(evict[i], evict[i]->map_size);
    purge_wake();
}

void huge_for_each_cached(void (*fn)(segment_t *seg, void *arg), void *arg)
{
    lock_acquire(&huge_lock);
    for (size_t i = 0; i < huge_count; i++)
        fn(huge_cache[i], arg);
    lock_release(&huge_lock);
}

void huge_counts(huge_counts_t *out)
{
    *out = (huge_counts_t){0};
    size_t hdr = os_info.page_size;
    lock_acquire(&huge_lock);
    out->live = huge_live_count;
    out->live_bytes = huge_live_bytes;
    for (segment_t *seg = huge_live_first; seg; seg = seg->next)
        out->live_usable_bytes += seg->map_size - seg->block_offset;
    out->cached = huge_count;
    out->cached_bytes = huge_bytes;
    for (size_t i = 0; i < huge_count; i++) {
        segment_t *seg = huge_cache[i];
        if (seg->huge_purged) {
            out->cached_committed_bytes += hdr;
        } else {
            out->cached_committed_bytes += seg->map_size;
            out->cached_unpurged_bytes += seg->map_size - seg->block_offset;
        }
    }
    lock_release(&huge_lock);
}

bool huge_cache_pending(void)
{
    lock_acquire(&huge_lock);
    bool pending = huge_count > 0;
    lock_release(&huge_lock);
    return pending;
}

bool huge_cache_decay(uint64_t now_ms, bool force)
{
    long purge_delay = option_get(OPT_PURGE_DELAY);
    uint64_t unmap_delay = (uint64_t)option_get(OPT_UNMAP_DELAY);
    segment_t *drop[HUGE_CACHE_MAX];
    size_t n = 0;
    lock_acquire(&huge_lock);
    for (size_t i = 0; i < huge_count;) {
        segment_t *seg = huge_cache[i];
        uint64_t age = now_ms - seg->huge_freed_at_ms;
        if (force || age >= unmap_delay) {
            drop[n++] = seg;
            huge_cache_remove_locked(i);
            continue;
        }
        if (!seg->huge_purged && purge_delay >= 0 && age >= (uint64_t)purge_delay) {
            huge_purge_cached(seg); /* under the lock, so nobody takes it meanwhile */
        }
        i++;
    }
    bool pending = huge_count > 0;
    lock_release(&huge_lock);
    for (size_t i = 0; i < n; i++)
        os_unmap(drop[i], drop[i]->map_size);
    return pending;
}

void huge_fork_lock(void)
{
    lock_acquire(&huge_lock);
}

void huge_fork_unlock(void)
{
    lock_release(&huge_lock);
}

size_t huge_usable_size(segment_t *seg)
{
    return seg->map_size - seg->block_offset;
}

/* A mapping resized in place: its size, with the live total, under the lock. */
static void huge_set_size(segment_t *seg, size_t map_size)
{
    lock_acquire(&huge_lock);
    huge_live_bytes = huge_live_bytes - seg->map_size + map_size;
    seg->map_size = map_size;
    lock_release(&huge_lock);
}

void *huge_realloc(segment_t *seg, void *p, size_t size)
{
    size_t ps = os_info.page_size;
    size_t offset = seg->block_offset;
    if (size > SIZE_MAX - offset - ps)
        return NULL;
    size_t old_total = seg->map_size;
    size_t new_total = offset + round_up(size, ps);
    if (new_total == old_total)
        return p;
    if (new_total < old_total) {
        if (!os_remap_inplace(seg, old_total, new_total))
            return NULL;
        huge_set_size(seg, new_total);
        return p;
    }
    if (os_remap_inplace(seg, old_total, new_total)) {
        huge_set_size(seg, new_total);
        return p;
    }
    size_t off, map_align, align_offset;
    huge_layout(seg->alignment, &off, &map_align, &align_offset);
    void *target = os_reserve_aligned(new_total, map_align, align_offset);
    if (target == NULL)
        return NULL;
    segment_map_set(seg, false);
    huge_count_live(seg, false); /* its header moves with the mapping */
    if (!os_remap_move(seg, old_total, new_total, target)) {
        huge_count_live(seg, true);
        segment_map_set(seg, true);
        os_unreserve(target, new_total);
        return NULL;
    }
    seg = target;
    seg->map_size = new_total;
    huge_count_live(seg, true);
    segment_map_set(seg, true);
    return (uint8_t *)seg + offset;
}
