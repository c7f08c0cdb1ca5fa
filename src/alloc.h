/*
 * alloc.h — the malloc and free fast paths, inlined into both the ebb_ entry
 * points (alloc.c) and the standard names (override.c).
 *
 * malloc: one TLS load, one indexed load of the page (by size up to
 *         DIRECT_MAX, by size class above), pop its free list.
 * free:   mask to the segment; if this thread owns it, push on the page's free
 *         list; otherwise (another thread's, abandoned, huge) the generic path.
 *         A page of a hot class (above DIRECT_MAX: internal.h, PAGE_HOT)
 *         then becomes its class's direct page; one whose in_full is
 *         otherwise not 0 (full, trimmed) takes a call after the push.
 * Everything else — empty lists, new pages, big sizes, first call of a thread —
 * is in the out-of-line slow paths.
 */
#ifndef EBB_ALLOC_H
#define EBB_ALLOC_H

#include "internal.h"

/* Pop a block from the page in `slot` (NULL if it has none), inside the busy
 * window the scavenger's quiescing protocol watches (heap.c). */
static ebb_always_inline void *alloc_pop(_Atomic(page_t *) *slot)
{
    busy_enter();
    page_t *page = atomic_load_explicit(slot, memory_order_acquire);
    block_t *block = page->free;
    if (ebb_likely(block != NULL)) {
        page->free = block->next;
        page->used++;
    }
    busy_leave();
    return block;
}

static ebb_always_inline void *alloc_malloc_inline(size_t size)
{
    heap_t *heap = tls.heap;
    void *p = NULL;
    if (ebb_likely(size <= DIRECT_MAX))
        p = alloc_pop(&heap->direct[(size + 15) >> 4]);
    else if (ebb_likely(size <= SMALL_MAX))
        p = alloc_pop(&heap->direct_class[size_class(size)]);
    if (ebb_likely(p != NULL))
        return p;
    return alloc_malloc_slow(size);
}

/* Free p into its page if `owner` (a heap's thread id) owns its segment: push
 * it on the page's free list, then the slow path if the page emptied, the
 * direct slot's update if the page is a hot class's, or
 * page_free_local_flagged if its in_full is otherwise not 0. False, with
 * nothing done, if the segment is not the owner's.
 * `heap` is the owner's heap, read only off the common branch. */
static ebb_always_inline bool alloc_free_owned(heap_t *const *heap, uintptr_t owner, segment_t *seg,
                                               void *p)
{
    busy_enter();
    if (ebb_likely(atomic_load_explicit(&seg->thread_id, memory_order_acquire) == owner)) {
        page_t *page = segment_page_of(seg, p);
        block_t *block = (block_t *)p;
        block->next = page->free;
        page->free = block;
        if (ebb_unlikely(--page->used == 0)) {
            /* The empty asm statements here and below hide a value from
             * GCC, which otherwise computed the page's address (and loaded
             * in_full into a register) on the common branch for these two
             * rare ones: one or two more instructions on every free
             * (bench/callgrind.sh 46.0 -> 47.0 or 48.0 at 64 bytes). So
             * this branch finds its page again from the segment. */
            segment_t *own = seg;
            __asm__("" : "+r"(own));
            page_free_local_slow(*heap, segment_page_of(own, p)); /* ends the busy window */
            return true;
        }
        if (ebb_unlikely(page->in_full)) {
            heap_t *h = *heap;
            page_t *hot = page;
            __asm__("" : "+r"(hot));
            /* A hot class's page (internal.h, PAGE_HOT) comes here on every
             * free: its direct slot names the page now, so that the class's
             * next malloc pops the block just freed. Without the lock,
             * inside the busy window: the scavenger's quiescing looks for a
             * slot written under its feet (heap.c, step 4). Inline, not in
             * page_free_local_flagged: the call and its second look-up of
             * the page took 12 instructions a pair (bench_core pair 4096). */
            if (ebb_likely(hot->in_full == PAGE_HOT && h != &heap_empty)) {
                atomic_store_explicit(&h->direct_class[hot->class_idx], hot,
                                      memory_order_relaxed);
                busy_leave();
                return true;
            }
            page_free_local_flagged(h, seg, block); /* ends the busy window */
            return true;
        }
        busy_leave();
        return true;
    }
    busy_leave();
    return false;
}

static ebb_always_inline void alloc_free_inline(void *p)
{
    if (ebb_unlikely(p == NULL))
        return;
    if (ebb_unlikely(debug_enabled)) { /* before touching p (debug.c) */
        debug_free(p, 0, 0, DEBUG_FREE_PLAIN);
        return;
    }
    segment_t *seg = ptr_segment(p);
    if (ebb_likely(alloc_free_owned(&tls.heap, thread_id_self(), seg, p)))
        return;
    free_generic(seg, p);
}

#endif /* EBB_ALLOC_H */
