/*
 * page.c — pages and their free lists, and the heap's page queues.
 *
 * A small page serves one size class. Its free blocks live on two lists:
 *   free         malloc pops from here and the owner's frees push here (LIFO:
 *                the block just freed is the next one handed out, still warm
 *                in the cache, when malloc pops from the page it went to: the
 *                first of the class queue, or for a hot class the page of the
 *                owner's last free, internal.h PAGE_HOT);
 *   xthread_free other threads' frees, pushed with one CAS, collected by the
 *                owner with one exchange when `free` runs dry.
 * (mimalloc keeps a third, owner-only list so that a page in a steady
 * malloc/free cycle still reaches the slow path for housekeeping; here, memory
 * can only grow through the slow path, which does the housekeeping, so a page
 * that never runs dry needs none, and a working set the size of a page does not
 * turn every malloc into a slow path.)
 * Blocks are carved from the page lazily (page_extend) so RSS follows use.
 *
 * The full-page protocol. A page found with no free block moves from its class
 * queue to the heap's `full` list, so the slow path does not scan it again. It
 * must come back as soon as any block is freed into it:
 *   - by the owner: the free fast path sees `in_full` and calls
 *     page_free_local_slow, which moves it back;
 *   - by another thread: that thread cannot touch the owner's lists. So:
 *     1. the owner marks the page full by setting XTHREAD_IN_FULL in
 *        xthread_free with a CAS that only succeeds while the list is empty
 *        (if a remote block arrived first, the page is not full after all);
 *     2. a remote freer pushes its block with a CAS that keeps the bit; if the
 *        bit was set and the list was empty, it is the first since the page
 *        went full, and it sets heap->xfull_pending (release) after its push;
 *     3. the owner's slow path exchanges xfull_pending to 0 (acquire) and then
 *        scans `full`, moving back every page whose xthread_free has blocks
 *        (the exchange to 0 of xthread_free also clears the bit).
 *     A push that happens before step 3's exchange is seen by the scan; one that
 *     happens after it sees the flag already consumed and sets it again. The bit
 *     and the list are one word, so no push can slip between "list empty" and
 *     "bit set". A stale heap pointer (the owner exited) only wastes a scan:
 *     heaps are never unmapped.
 *
 * Whom a remote free tells. A block pushed on xthread_free must reach someone
 * who will collect it: the page's owner (through its heap, page->heap), or,
 * while the page has no owner, the scavenger's pass over abandoned segments
 * (segment_abandoned_touch). Ownership changes under a freer's feet: the owner
 * exits, or another thread reclaims the segment. So the freer decides from the
 * very word its CAS replaces, in which each change of owner is an atomic write:
 *     4. a thread abandoning a segment sets page->heap to NULL, then sets
 *        XTHREAD_ABANDONED in each small page in use (release), then lists the
 *        segment, and only then touches the abandoned list
 *        (segment_abandon_all, page_mark_abandoned);
 *     5. a thread reclaiming it sets page->heap to its own heap, then swaps
 *        the word (acq_rel) for an empty one of the next generation (the
 *        word's top bits, XTHREAD_GEN_MASK): it takes the blocks, clears both
 *        bits, and makes the word differ from any it held before step 4
 *        (page_adopt). The scavenger's pass, which collects an abandoned page
 *        without owning it, leaves XTHREAD_ABANDONED and the generation
 *        instead (page_collect_abandoned): the page stays ownerless. Every
 *        other write of the word by an owner keeps the generation;
 *     6. a remote freer reads the word, then page->heap (again after every
 *        failed CAS), and pushes with a CAS that keeps both bits. If the word
 *        it replaced had XTHREAD_ABANDONED, the page had no owner when the
 *        block landed: a first block touches the abandoned list, and the pass
 *        (or a reclaim's step 5, whichever comes first) takes it. Otherwise the
 *        block landed before step 4's bit, and the exiting thread's touch
 *        comes after it; or after step 5's swap, whose release made the
 *        heap read after it the adopter's; or in a page that never changed
 *        hands: a first block tells that heap.
 *     A freer that read the word before a step 4 or 5 fails its CAS and decides
 *     again, also when both come between its read and its CAS: without the
 *     generation, the exit set the bit and the reclaim cleared it, the word
 *     held its old value again (with XTHREAD_IN_FULL too, once the adopter
 *     marked the page full), and the CAS succeeded with the old decision: the
 *     exited owner's heap was told, and the block waited for the adopter's
 *     next collection of that class, or a forced one (second review, with the
 *     test hook holding the free 400 ms; test_purge_hooks). The generation
 *     wraps after 128 reclaims of one page inside one freer's window.
 *     (Before, the freer decided from seg->thread_id and page->heap read
 *     before its CAS: one racing its owner's exit told the exiting heap, which
 *     nobody visits once it is back in the pool, and not the abandoned list,
 *     whose pass had run already; one racing a reclaim had read no heap and
 *     told nobody, and the reclaimer, idle, never looked. The block, its page
 *     and often its segment stayed until a forced collection: review finding,
 *     tests/test_purge.c, "stale decisions in cross-thread frees".) A freer
 *     that finds the bit also records the class's room in the segment before
 *     its push (segment_abandoned_room_lock), so that reclaims find the page:
 *     that too is decided from the word, again at each retry.
 */
#include <string.h>

#include "internal.h"

/* ---------------------------------------------------------------------------
 * Page queues
 * ------------------------------------------------------------------------- */
static void queue_remove(page_queue_t *q, page_t *page)
{
    if (page->prev)
        page->prev->next = page->next;
    else
        q->first = page->next;
    if (page->next)
        page->next->prev = page->prev;
    else
        q->last = page->prev;
    page->next = page->prev = NULL;
}

static void queue_push_front(page_queue_t *q, page_t *page)
{
    page->prev = NULL;
    page->next = q->first;
    if (q->first)
        q->first->prev = page;
    else
        q->last = page;
    q->first = page;
}

static void queue_push_back(page_queue_t *q, page_t *page)
{
    page->next = NULL;
    page->prev = q->last;
    if (q->last)
        q->last->next = page;
    else
        q->first = page;
    q->last = page;
}

/* Point the direct slots of class `cls` at the first page of its queue. Slot w
 * serves sizes (16(w-1), 16w], which all round to the class of size 16w. */
void heap_direct_update(heap_t *heap, unsigned cls)
{
    uint32_t size = class_block_size[cls];
    /* While the scavenger holds the heap quiesced, every slot must stay at
     * page_empty (heap.c, step 2): it restores them all when it is done. */
    if (atomic_load_explicit(&heap->revoked, memory_order_relaxed))
        return;
    page_t *page = heap->queues[cls].first ? heap->queues[cls].first : &page_empty;
    atomic_store_explicit(&heap->direct_class[cls], page, memory_order_release);
    if (size > DIRECT_MAX)
        return;
    if (atomic_load_explicit(&heap->direct[size / 16], memory_order_relaxed) == page)
        return; /* the class's slots always change together */
    size_t lo = cls == 0 ? 0 : class_block_size[cls - 1] / 16 + 1;
    for (size_t w = lo; w <= size / 16; w++)
        atomic_store_explicit(&heap->direct[w], page, memory_order_release);
}

/* The in_full value of a page of class `cls` that sits in `heap`'s class
 * queue with nothing to signal: PAGE_HOT for a hot class (internal.h), 0
 * otherwise and in a debug heap, whose frees never take the fast path's
 * branch (alloc_release is a plain release of blocks the quarantine let go:
 * following them would gain nothing). */
static inline uint8_t page_queued_state(const heap_t *heap, unsigned cls)
{
    return class_block_size[cls] >= PAGE_HOT_MIN && !(heap->thread_id & THREAD_ID_DEBUG) ? PAGE_HOT
                                                                                        : 0;
}

/* Owner: the empty page kept for class `cls` (page_free_local_slow), or none.
 * The pages' `kept` flags follow, so that the scavenger can tell a kept page
 * without reading retained[] (which the owner writes without the lock). */
static void retained_set(heap_t *heap, unsigned cls, page_t *page)
{
    page_t *old = heap->retained[cls];
    if (old) /* release: our reads of it come before a steal's writes */
        atomic_store_explicit(&old->kept, 0, memory_order_release);
    heap->retained[cls] = page;
    if (page) {
        atomic_store_explicit(&page->kept, 1, memory_order_relaxed);
        heap->retained_mask |= (uint64_t)1 << cls;
    } else {
        heap->retained_mask &= ~((uint64_t)1 << cls);
    }
}

/* ---------------------------------------------------------------------------
 * Free lists
 * ------------------------------------------------------------------------- */

static void page_untrim(page_t *page, size_t from, size_t to);

/* Tests (page_inject_extend_pause): the thread whose id is extend_pause_owner
 * sleeps extend_pause_ms in its next carve without its heap's lock (a fork
 * waits for a carve under the lock) of a page that has blocks carved
 * already, between the two stores below; extend_pausing is 1 meanwhile. */
static atomic_long extend_pause_ms;
static _Atomic(uintptr_t) extend_pause_owner;
static atomic_int extend_pausing;

void page_inject_extend_pause(long ms)
{
    atomic_store(&extend_pause_owner, thread_id_self());
    atomic_store(&extend_pause_ms, ms);
}

bool page_extend_pausing(void)
{
    return atomic_load(&extend_pausing) != 0;
}

static ebb_noinline void page_extend_pause(const page_t *page, size_t carved_before)
{
    heap_t *heap = atomic_load_explicit(&page->heap, memory_order_relaxed);
    if (carved_before == 0 || atomic_load(&extend_pause_owner) != thread_id_self() ||
        heap == NULL || atomic_load(&heap->lock.held) != 0)
        return;
    long ms = atomic_exchange(&extend_pause_ms, 0);
    atomic_store(&extend_pausing, 1);
    os_sleep_ms(ms);
    atomic_store(&extend_pausing, 0);
}

/* Carve up to PAGE_EXTEND_BYTES of not-yet-used blocks onto the (empty) free
 * list, in address order. A trim may have given back the OS pages they lie
 * on (page_trim_tail): the blocks are in use from now on, not dropped, so
 * those marks go (the pages fault back in as the blocks are written).
 * The owner carves without the lock too (page_refill_first), so a fork() on
 * another thread may copy the page between any two of its stores, and the
 * child reclaims the page (fork_child abandons this thread's heap): the
 * blocks count as carved before they go on the list, so that a cut there
 * only leaves them on no list. The other way round, the child found them on
 * its free list and past its capacity, and carved them again once the list
 * ran dry: the same blocks handed out twice (review finding, seen with a
 * pause injected between the stores). A release fence: the stores must also
 * reach memory in that order on CPUs that reorder stores. */
static void page_extend(page_t *page)
{
    size_t bs = page->block_size;
    size_t n = PAGE_EXTEND_BYTES / bs;
    if (n == 0)
        n = 1;
    size_t left = (size_t)page->reserved - page->capacity;
    if (n > left)
        n = left;
    /* A page with nothing carved has no marks (page_init_small cleared them,
     * and the owner carves its first blocks under the lock it made the page
     * under: no trim came between). */
    if (page->capacity != 0)
        page_untrim(page, (size_t)page->capacity * bs, ((size_t)page->capacity + n) * bs);
    uint8_t *first = page_start(page) + (size_t)page->capacity * bs;
    uint8_t *b = first;
    for (size_t i = 1; i < n; i++, b += bs)
        ((block_t *)b)->next = (block_t *)(b + bs);
    ((block_t *)b)->next = page->free;
    size_t carved_before = page->capacity;
    page->capacity += (uint16_t)n;
    atomic_thread_fence(memory_order_release);
    if (ebb_unlikely(atomic_load_explicit(&extend_pause_ms, memory_order_relaxed) > 0))
        page_extend_pause(page, carved_before);
    page->free = (block_t *)first;
}

/* Debug mode: whether `link`, read from a block of a remote-free list, is a
 * block of `page`. The list's links are the freed blocks' first words,
 * which a write into freed memory (or past the end of the block below) can
 * change once the quarantine has let a block go: such a link is not
 * followed, the list ends at the block holding it (the rest is lost), and
 * debug mode reports it. Release mode follows links unchecked, as it does
 * its own free lists. */
static bool page_link_ok(page_t *page, const block_t *block)
{
    uintptr_t link = (uintptr_t)block->next;
    return link == 0 ||
           page_is_carved_block(link, (uintptr_t)page_start(page), page->block_size, page->reserved);
}

/* The same, cutting the list at a changed link, which debug mode reports. */
static bool page_link_sound(page_t *page, block_t *block)
{
    if (page_link_ok(page, block))
        return true;
    uintptr_t link = (uintptr_t)block->next;
    debug_note_cut_list(block, link);
    block->next = NULL;
    return false;
}

/* Put a list taken from xthread_free (its flags masked off) onto `free`. */
static void page_take_remote(page_t *page, block_t *list)
{
    if (list) {
        uint32_t count = 1;
        block_t *tail = list;
        bool checked = debug_enabled;
        while ((!ebb_unlikely(checked) || page_link_sound(page, tail)) && tail->next) {
            tail = tail->next;
            count++;
        }
        tail->next = page->free;
        page->free = list;
        page->used -= count;
    }
}

/* Owner: move remote frees onto `free` (clearing XTHREAD_IN_FULL with them;
 * an owned page never has XTHREAD_ABANDONED). */
static void page_collect(page_t *page)
{
    if (atomic_load_explicit(&page->xthread_free, memory_order_relaxed) & ~XTHREAD_FLAGS) {
        /* The list and XTHREAD_IN_FULL go; the generation stays. */
        uintptr_t x = atomic_fetch_and_explicit(&page->xthread_free, XTHREAD_GEN_MASK,
                                                memory_order_acquire);
        page_take_remote(page, (block_t *)(x & ~XTHREAD_FLAGS));
    }
}

/* ---------------------------------------------------------------------------
 * The full list
 * ------------------------------------------------------------------------- */

/* Step 1 of the protocol: false if remote frees arrived (collect them instead). */
static bool page_to_full(heap_t *heap, page_t *page)
{
    /* Empty but for its generation, which it keeps. */
    uintptr_t expected =
        atomic_load_explicit(&page->xthread_free, memory_order_relaxed) & XTHREAD_GEN_MASK;
    if (!atomic_compare_exchange_strong_explicit(&page->xthread_free, &expected,
                                                 expected | XTHREAD_IN_FULL, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return false;
    queue_remove(&heap->queues[page->class_idx], page);
    queue_push_back(&heap->full, page);
    page->in_full = PAGE_IN_FULL;
    heap_direct_update(heap, page->class_idx);
    return true;
}

/* The page had blocks freed into it since it was last full or trimmed: it may come to
 * hold free blocks under live ones, which only a trim gives back. Mark it
 * for the scavenger's visit once the owner idles (heap.c, heap_scavenge);
 * the first mark of a heap wakes the scavenger. */
static void page_watch_sparse(heap_t *heap, page_t *page)
{
    segment_t *seg = page_segment(page);
    seg->sparse_watch |= (uint64_t)1 << (page - seg->pages);
    if (heap != NULL &&
        !(atomic_load_explicit(&heap->sparse_pending, memory_order_relaxed) & SPARSE_MARKED) &&
        !(atomic_fetch_or(&heap->sparse_pending, SPARSE_MARKED) & SPARSE_MARKED))
        purge_wake();
}

/* A new page is watched from the start: it may never fill up, and then no
 * free into it would ever mark it (page_unfull marks a page that was full),
 * yet blocks freed among live ones in it stay resident. A thread that took
 * 6 blocks of each of 15 sizes from 2 KiB to 64 KiB, freed 5 of each and
 * slept held +2.2 MiB for good, against glibc's +0.45 (before 2026-12-06,
 * stop 38; test_purge, pages_that_never_filled_are_trimmed_at_idle). The
 * owner's visit at idle trims it (heap.c, heap_scavenge). A hot class's
 * page (above 1 KiB: 64-512 KiB pages) wakes a running scavenger once per
 * heap until the visit, but starts none (purge_nudge): a new page is not
 * memory to give back yet, and a forked child that allocates a buffer
 * before its exec must not start a thread for it; a scavenger that starts
 * later looks for SPARSE_FRESH_HOT first thing (purge.c, scavenger_main). A
 * smaller class's page (one 64 KiB slice) wakes nothing: a thread's first
 * mallocs, all small as a rule, make no system call for it; its
 * SPARSE_FRESH asks for the next visit made for another reason. So a hot
 * page's wake is skipped only where one was given since the last visit
 * (SPARSE_FRESH_HOT, or SPARSE_MARKED, whose setter wakes the scavenger),
 * not for a small page's mark: skipping it for any mark, as first written,
 * left the hot pages of a thread whose first page was small to a sleeping
 * scavenger (review of 3f86810; test_purge,
 * new_pages_above_1k_wake_a_sleeping_scavenger). */
static void page_watch_new(heap_t *heap, page_t *page)
{
    segment_t *seg = page_segment(page);
    seg->sparse_watch |= (uint64_t)1 << (page - seg->pages);
    int pending = atomic_load_explicit(&heap->sparse_pending, memory_order_relaxed);
    if (page->block_size < PAGE_HOT_MIN) {
        if (!pending) /* else a visit is asked for already */
            atomic_fetch_or(&heap->sparse_pending, SPARSE_FRESH);
        return;
    }
    const int woken = SPARSE_MARKED | SPARSE_FRESH_HOT;
    if (!(pending & woken) && !(atomic_fetch_or(&heap->sparse_pending, SPARSE_FRESH_HOT) & woken))
        purge_nudge();
}

/* Owner: bring a page back from the full list to the back of its queue: it
 * has few free blocks, and the pages in front should serve first (putting it
 * in front makes a page that flips between full and not full on every
 * malloc/free pair, each flip a trip through the slow path). */
static void page_unfull(heap_t *heap, page_t *page)
{
    queue_remove(&heap->full, page);
    page->in_full = page_queued_state(heap, page->class_idx);
    page_collect(page); /* the exchange clears XTHREAD_IN_FULL */
    if (atomic_load_explicit(&page->xthread_free, memory_order_relaxed) & XTHREAD_IN_FULL)
        atomic_fetch_and_explicit(&page->xthread_free, ~XTHREAD_IN_FULL, memory_order_relaxed);
    queue_push_back(&heap->queues[page->class_idx], page);
    heap_direct_update(heap, page->class_idx);
    page_watch_sparse(heap, page);
}

/* Step 3 of the protocol. */
static void heap_unfull_pending(heap_t *heap)
{
    if (!atomic_exchange_explicit(&heap->xfull_pending, 0, memory_order_acquire))
        return;
    page_t *next;
    for (page_t *page = heap->full.first; page; page = next) {
        next = page->next;
        if (atomic_load_explicit(&page->xthread_free, memory_order_acquire) & ~XTHREAD_FLAGS)
            page_unfull(heap, page);
    }
}

/* ---------------------------------------------------------------------------
 * Page lifetime
 * ------------------------------------------------------------------------- */
/* Owner: make `page` (a free run, or an empty page of another class) a page of
 * class `cls`, as many blocks as its slices hold, none carved yet. */
static void page_init_small(heap_t *heap, page_t *page, unsigned cls)
{
    page->kind = PAGE_SMALL;
    page->rotated = 0;
    page->class_idx = (uint8_t)cls;
    page->block_size = class_block_size[cls];
    page->reserved = page->slice_count == class_slice_count[cls]
                         ? class_page_blocks[cls]
                         : (uint16_t)(page->slice_count * SLICE_SIZE / page->block_size);
    page->capacity = 0;
    page->used = 0;
    page->free = NULL;
    page->in_full = page_queued_state(heap, cls);
    page_trimmed_clear(page); /* nothing carved: nothing dropped */
    atomic_store_explicit(&page->heap, heap, memory_order_relaxed);
    queue_push_front(&heap->queues[cls], page);
    page_watch_new(heap, page);
}

/* Owner, lock held: a new page for class `cls`. A class whose pages span
 * several slices (blocks of 10 KiB up) takes a shorter page when the heap's
 * segments have no resident run long enough, but one of a slice or more that
 * holds a block: the freed slices are still written, and a page there adds
 * nothing to the process's RSS, where a full-size run elsewhere would write
 * fresh memory. Pages of one slice (up to 8 KiB blocks, and the odd page of
 * bigger ones) go back to the segment all the time, between pages of eight,
 * and the eight-slice classes found no run of eight among them: a thread
 * growing strings by realloc through every class (bench_realloc str: 256
 * strings, about 5 MB live) mapped five segments and peaked at 17.4 MB, with
 * 4 to 6 MB of freed slices waiting for the purge beside its new pages. Now
 * 11.9 MB (mimalloc 12.1, glibc 7.4); random 1..64 KiB blocks with 64 live
 * (bench_core rand 1024 65536) 6.4 -> 5.4 MB; the same times. Not for the
 * classes the direct slots serve, whose two-slice pages (640 B to 1 KiB) are
 * there to hold a FIFO of 127 blocks (internal.h, PAGE_DIRECT_MIN_BLOCKS): a
 * FIFO of 100 blocks of 1 KiB on a one-slice page, taken among freed slices,
 * took 68 ms against 38-45 (test_api,
 * fifos_of_1_kib_blocks_keep_full_pages_among_freed_slices); peaks of
 * realloc str, larson, python and frag moved by under 2%. */
static page_t *page_new_small(heap_t *heap, unsigned cls)
{
    size_t want = class_slice_count[cls];
    size_t least = (class_block_size[cls] + SLICE_SIZE - 1) / SLICE_SIZE;
    page_t *page = want > least && class_block_size[cls] > DIRECT_MAX
                       ? segment_alloc_resident_run(heap, least, want)
                       : NULL;
    if (page == NULL)
        page = segment_alloc_run(heap, want, 1);
    if (page != NULL)
        page_init_small(heap, page, cls);
    return page;
}

/* Owner, lock held: give class `cls` the empty page another class kept
 * (page_free_local_slow) rather than a new run of slices. A thread whose
 * requests wander over the size classes (seed 000: malloc(1..70,000) + memset
 * + free) then writes over the memory it wrote last, instead of keeping a
 * written page for every class it visits: one such thread peaked at +600 KiB
 * without this, +148 KiB with it, and +84 KiB once 24..64 KiB blocks got
 * 512 KiB pages (alloc.c, PAGE_SLICES; test_purge).
 * A kept page serves if it is still empty (its own class may have reused it),
 * has enough slices, and never had more than one carving of blocks (one block
 * above PAGE_EXTEND_BYTES, PAGE_EXTEND_BYTES of smaller ones): a page that held
 * one block at a time, as in that pattern. A page that held many would hand
 * over memory written in the old class's layout, and its class would then
 * write a new page: random 1..64 KiB blocks with 64 live (bench_core rand)
 * peaked 6% higher when pages written up to a new page's span could serve,
 * 2.5% with this rule. Of those, the one with the fewest slices. */
static page_t *page_take_retained(heap_t *heap, unsigned cls)
{
    size_t need = class_slice_count[cls];
    page_t *best = NULL;
    for (uint64_t m = heap->retained_mask; m; m &= m - 1) {
        page_t *page = heap->retained[__builtin_ctzll(m)];
        if (page->used == 0 && page->slice_count >= need &&
            (page->capacity <= 1 || page->capacity * page->block_size <= PAGE_EXTEND_BYTES) &&
            (best == NULL || page->slice_count < best->slice_count))
            best = page;
    }
    if (best == NULL)
        return NULL;
    unsigned old = best->class_idx;
    /* What the old class carved stays resident; the new class starts with
     * nothing carved, so the telemetry learns it here (review finding). */
    segment_run_mark_prewritten(best, (size_t)best->capacity * best->block_size);
    retained_set(heap, old, NULL);
    queue_remove(best->in_full == PAGE_IN_FULL ? &heap->full : &heap->queues[old], best);
    heap_direct_update(heap, old);
    page_init_small(heap, best, cls);
    return best;
}

/* Owner, lock held: for a request of class `cls` (above DIRECT_MAX) whose
 * class has no page, the one block of another class's kept empty page, if
 * that block is at most WIDER_BLOCK_RATIO times the class's size: the block
 * is served as it is, in its own class, and the page stays that class's.
 *
 * Why: a thread whose requests wander over the classes with one block live
 * at a time (seed 000, the FastMM scenario: malloc(1..70,000) + memset +
 * free) had page_take_retained turn the one page it wrote over to each new
 * class in turn: the page, two class queues, two direct slots and the
 * segment's marks rewritten, about 300 instructions and a dozen cache lines
 * that each memset of 35 KiB had pushed out of L1. Served from the page as
 * it is, the page changes class only for a request bigger than its block.
 * bench_seeds fastmm 0 100000, 13 alternated runs, time over glibc's (the
 * fastest there): 1.032 before, 1.001 with this (1.016 with a ratio of 4,
 * 0.992 with 16).
 *
 * Only where the heap has no full page and the class no page at all: a
 * thread with many blocks live (64 of random 1..64 KiB sizes, bench_core
 * rand 1024 65536) otherwise put block after block of a class into other
 * classes' pages, each wasting up to the ratio, and peaked 12-15% higher;
 * with these two tests its peak fell instead, 6.0 -> 5.4 MiB (its classes'
 * pages turn over less). A page qualifies as page_take_retained's do, with
 * exactly one block carved (a page that held one block at a time) and that
 * block on its free list (not dropped by a trim). What it costs in memory:
 * each block served this way is at most WIDER_BLOCK_RATIO times its class,
 * and takes a page that was kept (and so resident, within the bound of one
 * kept page per class) already. */
#define WIDER_BLOCK_RATIO 8
static page_t *page_retained_wider(heap_t *heap, unsigned cls)
{
    uint64_t wider = heap->retained_mask & (~(uint64_t)0 << (cls + 1));
    for (; wider; wider &= wider - 1) {
        unsigned c = (unsigned)__builtin_ctzll(wider);
        if (class_block_size[c] > WIDER_BLOCK_RATIO * class_block_size[cls])
            return NULL; /* the classes are in size order: none fits after */
        page_t *page = heap->retained[c];
        if (page->used == 0 && page->capacity == 1 && page->free != NULL)
            return page;
    }
    return NULL;
}

void page_init_large(heap_t *heap, page_t *page, size_t slices, bool zero)
{
    page->kind = PAGE_LARGE;
    page->block_size = (uint32_t)(slices * SLICE_SIZE);
    page->reserved = page->capacity = 1;
    page->used = 1;
    page->is_zero = zero;
    atomic_store_explicit(&page->heap, heap, memory_order_relaxed);
}

/* Owner: give an empty page's slices back to its segment; the segment stays
 * with the heap. */
static void page_free_run(heap_t *heap, page_t *page)
{
    if (page->kind == PAGE_SMALL) {
        unsigned cls = page->class_idx;
        if (atomic_load_explicit(&page->kept, memory_order_relaxed))
            retained_set(heap, cls, NULL);
        queue_remove(page->in_full == PAGE_IN_FULL ? &heap->full : &heap->queues[cls], page);
        page->in_full = 0;
        heap_direct_update(heap, cls);
    }
    segment_free_run(page);
}

/* Owner: give an empty page's slices back to its segment, and the segment
 * back too if that left it entirely free (unless it is the heap's last). */
static void page_free(heap_t *heap, page_t *page)
{
    segment_t *seg = page_segment(page);
    page_free_run(heap, page);
    segment_maybe_release(heap, seg);
}

/* Slices of `page`'s run, as a mask of its segment's slices. */
static inline uint64_t page_slice_mask(const page_t *page)
{
    size_t idx = (size_t)(page - page_segment(page)->pages);
    return (((uint64_t)1 << page->slice_count) - 1) << idx;
}

/* Owner, lock held, after a page of `seg` emptied: if the thread holds no page
 * in `seg` any more but the empty pages it keeps (retained[]), and the segment
 * has at least SEGMENT_HANDOFF_SLICES freed slices not yet purged besides the
 * run just freed (`just_freed`), free those kept pages and hand the segment to
 * the shared cache, where the next thread that needs memory takes it before
 * mapping a new one. A thread that ends a burst of large blocks and then
 * waits (seed "medium": 8 threads, each with 8 live blocks of 64..512 KiB)
 * otherwise pins a written segment until the purge delay, while the threads
 * still working fault in new ones. (Only the owner may free kept pages: its
 * fast paths reach them through the direct slots.)
 *
 * The run just freed does not count: a thread that allocates and frees one
 * block of 1 MiB or more in a loop would otherwise give its segment away and
 * take it back on every pair (82-102 ns a pair before, 131-162 ns with it).
 * Nor does the hand-off happen when the segment would be unmapped rather than
 * cached (EBB_PURGE_DELAY=-1 or 0 with the cache full).
 *
 * This runs when the owner frees a page to its segment (a large block, or a
 * second empty page of a class). When a page empties and is kept instead, it
 * runs only in a segment where a large block was freed while other pages were
 * in use (seg->handoff_watch): malloc/free of random 1..64 KiB blocks empties
 * a page every eight pairs, and testing every segment there cost 3% more
 * instructions. */
static bool page_hand_off_segment(heap_t *heap, segment_t *seg, uint64_t just_freed)
{
    uint64_t free = atomic_load_explicit(&seg->free_slices, memory_order_acquire);
    uint64_t dirty = atomic_load_explicit(&seg->dirty_slices, memory_order_relaxed);
    uint64_t resident = free & dirty & ~just_freed;
    if (resident == 0 || slices_count(resident) < SEGMENT_HANDOFF_SLICES) {
        seg->handoff_watch = false; /* its freed runs were reused or purged */
        return false;
    }
    uint64_t used = SLICES_ALL & ~free;
    if (used != 0) { /* only kept pages may hold the rest */
        if (heap->retained_mask == 0)
            return false;
        uint64_t kept = 0;
        for (uint64_t m = heap->retained_mask; m; m &= m - 1) {
            page_t *page = heap->retained[__builtin_ctzll(m)];
            if (page_segment(page) == seg && page->used == 0)
                kept |= page_slice_mask(page);
        }
        if (used & ~kept)
            return false;
    }
    if (!segment_cache_keeps())
        return false; /* it would be unmapped, not reused */
    for (uint64_t m = heap->retained_mask; m; m &= m - 1) {
        page_t *page = heap->retained[__builtin_ctzll(m)];
        if (page_segment(page) == seg && page->used == 0)
            page_free_run(heap, page);
    }
    segment_hand_off(heap, seg);
    return true;
}

/* ---------------------------------------------------------------------------
 * Slow paths
 * ------------------------------------------------------------------------- */
static inline void *page_pop(page_t *page)
{
    block_t *block = page->free;
    page->free = block->next;
    page->used++;
    return block;
}

/* A page (the one behind a class's first) has blocks freed into it, by its
 * owner or by other threads. */
static inline bool page_has_freed(const page_t *page)
{
    return page != NULL &&
           (page->free != NULL ||
            (atomic_load_explicit(&page->xthread_free, memory_order_relaxed) & ~XTHREAD_FLAGS));
}

/* The common case, without the lock: the class's first page has blocks on its
 * other lists, or blocks not carved yet. New blocks are carved only when no
 * remote frees came back and the page behind has no freed blocks either (then
 * the locked path takes that page): a producer whose blocks other threads free
 * reuses them instead of writing over the rest of its page (carving on every
 * refill: seed prodcons peak 6.9 MB; carving when this page got nothing back:
 * 6.4 MB; now 5.7 MB). Looking further than the page behind, on every carve,
 * cost 36% more instructions on malloc/free pairs of 16 KiB (64 live), whose
 * pages carve one block at a time. (Each step leaves the page consistent or
 * merely leaks blocks if a fork interrupts it: the child reclaims this
 * thread's pages, so page_extend orders its stores for it.) */
static void *page_refill_first(heap_t *heap, unsigned cls)
{
    page_t *page = heap->queues[cls].first;
    if (page == NULL)
        return NULL;
    if (page->free == NULL) {
        page_collect(page);
        if (page->free == NULL && page->capacity < page->reserved && !page_has_freed(page->next))
            page_extend(page);
        if (page->free == NULL)
            return NULL;
    }
    /* The slot may name another page of a hot class, the one a free pointed
     * it at (alloc.h), now dry: back to the first. */
    atomic_store_explicit(&heap->direct_class[cls], page, memory_order_relaxed);
    return page_pop(page);
}

static inline void heap_note_slow(heap_t *heap)
{
    uint64_t n = atomic_load_explicit(&heap->slow_count, memory_order_relaxed);
    atomic_store_explicit(&heap->slow_count, n + 1, memory_order_relaxed);
}

static bool page_restore_dropped(page_t *page);

/* Owner, lock held: the first page of `q` with freed blocks (remote frees
 * collected on the way; pages found full move to the full list), else the
 * first with blocks not carved yet, extended. NULL if no page has room.
 *
 * A full page goes to the back of the queue the first time it is found, and
 * to the full list only if it is found full again. In a FIFO of blocks a
 * little deeper than a page (a queue of 100 messages of 1 KiB on the pages of
 * 64 they had then; 128 since: internal.h, PAGE_DIRECT_MIN_BLOCKS), the page
 * that just ran dry holds the oldest blocks, the next ones freed:
 * sent to the full list, it came back through page_unfull at the next free,
 * each turn of the FIFO a trip through both slow paths and the lock, about
 * 500 instructions. bench_core ring 1024 100: 74.0 -> 69.3 ms, ring 768 100
 * 70.9 -> 63.6 ms, ring 512 200 63.2 -> 58.6 ms (7 interleaved runs; tcmalloc
 * 43-46); docs/benchmarks.md. A page that stays full costs one more visit
 * before the full list takes it, and is marked for the idle trim as a page
 * leaving the full list is. */
static page_t *queue_find_room(heap_t *heap, page_queue_t *q)
{
    page_t *page = q->first, *carve = NULL;
    while (page) {
        page_t *next = page->next;
        page_collect(page);
        if (page->free) {
            page->rotated = 0;
            return page;
        }
        if (page->capacity < page->reserved) {
            if (carve == NULL)
                carve = page; /* unless a page further on has freed blocks */
        } else if (page_restore_dropped(page)) {
            page->rotated = 0; /* it has blocks again, as a page with freed ones */
            return page;
        } else if (!page->rotated && next != NULL) {
            queue_remove(q, page); /* the scan reaches it again at the end */
            queue_push_back(q, page);
            page->rotated = 1;
            /* The blocks freed into it from now on take the fast path: mark
             * it for the idle trim now, as page_unfull does at the first
             * free into a page of the full list. */
            page_watch_sparse(heap, page);
        } else if (!page_to_full(heap, page)) {
            page_collect(page); /* remote frees arrived just now */
            if (page->free)
                return page;
        }
        page = next;
    }
    if (carve != NULL)
        page_extend(carve);
    return carve;
}

/* Owner, lock held: the class has no page with room. Before it carves a new
 * run, the heap takes an abandoned segment (threads that exited with live
 * blocks left them) that has a page of this class with room, and adopts its
 * pages into our queues. Before this, a segment reclaimed for a run had its
 * pages adopted and then passed over: a thread that exited leaving one
 * 64-byte block used a slice of an abandoned segment for it, and once their
 * slices ran out, every such thread mapped a new 4 MiB segment (review
 * finding: 4000 threads, 3441 segments, 13.8 GB reserved). Only a segment
 * with room is taken: taking whatever came first let one busy thread absorb
 * every abandoned segment and pin what other threads later freed into them
 * (review finding: 251 MiB resident while it ran, instead of 3.4). And only
 * by a heap with no resident free run of its own for the page
 * (segment_reclaim_for_class): a joiner that frees each thread's data and
 * then needs pages took every segment that way, with the megabytes freed into
 * it, and the next threads mapped fresh memory (soak finding, perl ithreads:
 * 70 MiB peak against glibc's 27; test_thread_churn,
 * a_joiner_with_free_memory_leaves_abandoned_segments_to_new_threads). */
static page_t *page_take_reclaimed(heap_t *heap, unsigned cls)
{
    page_t *page = NULL;
    for (int i = 0; page == NULL && i < RECLAIM_MAX_PER_REQUEST && segment_reclaim_for_class(heap, cls); i++)
        page = queue_find_room(heap, &heap->queues[cls]);
    return page;
}

void *page_alloc_slow(heap_t *heap, unsigned cls)
{
    heap_note_slow(heap);
    busy_enter();
    /* Acquire: after a quiesce (heap.c), see the pages as the scavenger left them. */
    if (!atomic_load_explicit(&heap->revoked, memory_order_acquire) &&
        !atomic_load_explicit(&heap->xfull_pending, memory_order_relaxed) &&
        !atomic_load_explicit(&heap->collect_asked, memory_order_relaxed)) {
        void *block = page_refill_first(heap, cls);
        if (block) {
            busy_leave();
            return block;
        }
    }
    busy_leave();

    lock_acquire(&heap->lock);
    heap_collect_if_asked(heap);
    if (atomic_load_explicit(&heap->xfull_pending, memory_order_relaxed))
        heap_unfull_pending(heap);
    page_queue_t *q = &heap->queues[cls];
    page_t *page = queue_find_room(heap, q);
    if (page == NULL && class_block_size[cls] > DIRECT_MAX && q->first == NULL &&
        heap->full.first == NULL) {
        page_t *wider = page_retained_wider(heap, cls);
        if (wider != NULL) {
            void *block = page_pop(wider);
            lock_release(&heap->lock);
            purge_poll(true);
            return block;
        }
    }
    if (page == NULL) {
        page = page_take_retained(heap, cls);
        if (page != NULL)
            page_extend(page);
    }
    if (page == NULL)
        page = page_take_reclaimed(heap, cls);
    if (page == NULL) {
        page = page_new_small(heap, cls);
        if (page == NULL) {
            lock_release(&heap->lock);
            return NULL;
        }
        page_extend(page);
    }
    if (q->first != page) {
        queue_remove(q, page);
        queue_push_front(q, page);
    }
    heap_direct_update(heap, cls);
    void *block = page_pop(page);
    lock_release(&heap->lock);
    purge_poll(true);
    return block;
}

/* Owner: whether the other pages of `page`'s class queue have room for a
 * page's worth of blocks (free, not carved yet, or dropped by a trim),
 * looking at the first QUEUE_ROOM_SCAN pages only, so that a class with many
 * pages does not make every emptied page a long walk. */
#define QUEUE_ROOM_SCAN 8
static bool queue_room_for_a_page(const heap_t *heap, const page_t *page)
{
    size_t room = 0;
    int seen = 0;
    for (const page_t *p = heap->queues[page->class_idx].first; p != NULL && seen < QUEUE_ROOM_SCAN;
         p = p->next, seen++) {
        if (p == page)
            continue;
        room += (size_t)p->reserved - p->used;
        if (room >= page->reserved)
            return true;
    }
    return false;
}

/* Called from the free fast path inside its busy window (heap.c explains
 * why the window must cover this too) when the free emptied the page, and
 * from page_free_local_flagged; ends the window.
 *
 * An emptied page is kept, at the front of its queue, when its class has no
 * other empty page: a working set that swings around a page boundary then
 * reuses warm memory instead of freeing and re-carving a page each swing. At
 * most one empty page per class is kept this way (heap->retained), another
 * class that needs a page may take it (page_take_retained), and the
 * scavenger takes it back once this thread stays idle for a purge delay.
 *
 * A page that empties while the class's other pages still have room for a
 * page's worth of blocks is not kept (unless it is the kept page already):
 * it goes back to its segment, whose slices any class reuses and the purge
 * gives back. Kept, it went to the front and malloc filled it again, so a
 * class whose live blocks had outgrown one page for a while (a wave of
 * strings growing by realloc through it) kept every page it had then, each
 * partly used, while the blocks to fill one were spread over all of them.
 * bench_realloc str (256 strings, 5,000,000 appends): peak 19.2 -> 17.4 MiB
 * with EBB_PURGE_DELAY=-1 (the default delay's peak on a quiet machine: it
 * comes before the first purge), 14.4 -> 12.6 MiB with EBB_PURGE_DELAY=0;
 * no change in instructions (bench/callgrind.sh; bench_core pair 2560, 4096,
 * 16384, rand 1024 65536), docs/benchmarks.md. The kept page itself is left
 * out of the test: a FIFO ring of blocks above 1 KiB empties it once a
 * round (the straggler block of the page the ring's first malloc carved),
 * and the walk would cost that ring 1-2 instructions a pair; freeing it
 * too raised the peak above (17.7 MiB). */
void page_free_local_slow(heap_t *heap, page_t *page)
{
    if (ebb_unlikely(heap == &heap_empty)) {
        /* No heap, yet the segment carries this thread's id: a dead thread's
         * on the same stack left it (heap.c, "Heaps of threads that died",
         * step 3). heap_empty is shared; hand that heap back instead. */
        busy_leave();
        heaps_of_dead_thread_hand_back(thread_id_self());
        return;
    }
    heap_note_slow(heap);
    if (page->used == 0 && page->kind == PAGE_SMALL) {
        unsigned cls = page->class_idx;
        page_t *kept = heap->retained[cls];
        /* The page kept already stays kept; another is kept only where a
         * scavenger will take it back (purge.c; a call) and the class's
         * other pages lack room for its blocks (above; a walk: asked last). */
        if (kept == page || ((kept == NULL || kept->used != 0) && purge_keeps_empty_pages() &&
                             !queue_room_for_a_page(heap, page))) {
            retained_set(heap, cls, page);
            /* Not for PAGE_HOT, which a page of a hot class holds in its
             * queue. */
            if ((page->in_full & (PAGE_IN_FULL | PAGE_FREE_SIGNAL)) ||
                heap->queues[cls].first != page) {
                lock_acquire(&heap->lock);
                if (page->in_full == PAGE_IN_FULL)
                    page_unfull(heap, page);
                else if (page->in_full == PAGE_FREE_SIGNAL) /* empty: nothing to trim */
                    page->in_full = page_queued_state(heap, cls);
                page_queue_t *q = &heap->queues[cls];
                if (q->first != page) {
                    queue_remove(q, page);
                    queue_push_front(q, page);
                    heap_direct_update(heap, cls);
                }
                lock_release(&heap->lock);
            }
            if (ebb_unlikely(page_segment(page)->handoff_watch)) {
                lock_acquire(&heap->lock);
                page_hand_off_segment(heap, page_segment(page), 0);
                lock_release(&heap->lock);
            }
            if (!atomic_load_explicit(&heap->retained_pending, memory_order_relaxed)) {
                atomic_store(&heap->retained_pending, 1);
                purge_wake();
            }
            if (ebb_unlikely(atomic_load_explicit(&heap->collect_asked, memory_order_relaxed))) {
                /* An owner whose slow paths all end here (it frees the last
                 * block of a page, then takes it again) serves the request too. */
                lock_acquire(&heap->lock);
                heap_collect_asked(heap);
                lock_release(&heap->lock);
            }
            busy_leave();
            return;
        }
    }
    lock_acquire(&heap->lock);
    if (page->used == 0) {
        segment_t *seg = page_segment(page);
        bool large = page->kind == PAGE_LARGE;
        uint64_t run = page_slice_mask(page);
        page_free_run(heap, page);
        if (page_hand_off_segment(heap, seg, run))
            ; /* gone to the cache */
        else if (atomic_load_explicit(&seg->free_slices, memory_order_acquire) == SLICES_ALL)
            segment_maybe_release(heap, seg);
        else if (large)
            seg->handoff_watch = true;
    } else {
        if (page->in_full == PAGE_IN_FULL) {
            page_unfull(heap, page);
        } else if (page->in_full == PAGE_FREE_SIGNAL) {
            page->in_full = page_queued_state(heap, page->class_idx);
            page_watch_sparse(heap, page); /* freed into since its trim */
        }
        /* A hot class's next malloc pops the block just freed, here too
         * (the free fast path, alloc.h; the lock keeps the scavenger out). */
        if (page->in_full == PAGE_HOT)
            atomic_store_explicit(&heap->direct_class[page->class_idx], page,
                                  memory_order_relaxed);
    }
    heap_collect_if_asked(heap); /* after the last use of page and seg */
    lock_release(&heap->lock);
    busy_leave();
    purge_poll(false);
}

/* Called from the free fast path inside its busy window when the free left
 * block p's page in use and the page's in_full is not 0, other than a hot
 * class's page (internal.h, PAGE_HOT), which the fast path points its
 * class's direct slot at itself (alloc.h); ends the window. A hot page comes
 * here only in a thread without a heap (heap_empty, which is shared:
 * page_free_local_slow says how it gets here). The page is found again from
 * the block (alloc.h says why). */
void page_free_local_flagged(heap_t *heap, segment_t *seg, void *p)
{
    page_free_local_slow(heap, segment_page_of(seg, p));
}

/* Tests: the calling thread's next remote free of a small block sleeps `ms`
 * between its reads of the page (list word, heap) and its first CAS, the
 * window in which the page's owner may exit or a reclaim adopt the page.
 * One shot; 0 turns it off. Off, it costs the remote path one load of the
 * thread's own TLS block. */
void page_inject_remote_free_pause(long ms)
{
    tls.remote_free_pause_ms = (uint16_t)(ms <= 0 ? 0 : ms > UINT16_MAX ? UINT16_MAX : ms);
}

ebb_noinline void page_remote_free_pause(void)
{
    long ms = tls.remote_free_pause_ms;
    tls.remote_free_pause_ms = 0;
    os_sleep_ms(ms);
}

void page_free_remote(segment_t *seg, page_t *page, block_t *block)
{
    if (page->kind == PAGE_LARGE) {
        segment_free_large_remote(seg, page);
        return;
    }
    /* Step 6 of "whom a remote free tells", and step 2 of the full-page
     * protocol. Read the heap before the push: once our block is on the list
     * the page may be emptied and freed, and its segment unmapped, by another
     * thread. And read it after the list word, again after every failed CAS:
     * a thread that reclaims the segment sets page->heap and then clears the
     * word (step 5, acq_rel) and may mark the page full (step 1, acq_rel), so
     * a freer that sees either (acquire) sees that heap. Reading the heap
     * first, a freer could find it NULL (still abandoned), then push onto the
     * bit the reclaimer had just set, and tell nobody: the page stayed on the
     * full list with free blocks (review finding, from the code). Release:
     * the owner that takes the list must see the block's link. */
    unsigned cls = page->class_idx;
    bool room_locked = false;
    uintptr_t old = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
    heap_t *heap = atomic_load_explicit(&page->heap, memory_order_acquire);
    if (ebb_unlikely(tls.remote_free_pause_ms != 0))
        page_remote_free_pause();
    for (;;) {
        /* Abandoned: record the class's room before the block lands (held
         * across the CAS; the segment may go once the block is pushed). */
        if (ebb_unlikely(old & XTHREAD_ABANDONED) && !room_locked &&
            segment_abandoned_room_unknown(seg, cls)) {
            segment_abandoned_room_lock(seg, cls);
            room_locked = true;
        }
        /* A relaxed atomic store, the same instruction as a plain one: in
         * debug mode ebb_debug_verify may be loading this word beside us, as
         * the magic of the block that was here (debug.c, "Claiming a block"). */
        __atomic_store_n(&block->next, (block_t *)(old & ~XTHREAD_FLAGS), __ATOMIC_RELAXED);
        if (atomic_compare_exchange_weak_explicit(&page->xthread_free, &old,
                                                  (uintptr_t)block | (old & XTHREAD_FLAGS),
                                                  memory_order_release, memory_order_acquire))
            break;
        heap = atomic_load_explicit(&page->heap, memory_order_acquire);
    }
    if (room_locked)
        segment_abandoned_room_unlock(); /* touches nothing in the segment */
    if ((old & ~XTHREAD_FLAGS) != 0)
        return; /* not the first: whoever pushed the first one did the rest */
    /* The first remote block on this page since its last collection: if the
     * owner sleeps, only the scavenger will notice (purge.c, step 5). */
    if (old & XTHREAD_ABANDONED) {
        segment_abandoned_touch(); /* no owner when it landed (step 6) */
        return;
    }
    if (heap == NULL)
        return; /* step 4 under way (heap cleared, bit not set): its touch follows */
    if ((old & ~XTHREAD_GEN_MASK) == XTHREAD_IN_FULL)
        atomic_store_explicit(&heap->xfull_pending, 1, memory_order_release);
    atomic_store(&heap->remote_pending, 1);
    purge_wake();
}

/* Count a remote-free list (its blocks are stable while the caller holds the
 * owner's lock or owns the page: only pushes happen at its head). */
static uint32_t xthread_count(page_t *page, block_t *list)
{
    uint32_t n = 0;
    for (; list; list = list->next) {
        n++;
        /* Debug mode: a changed link is not followed (page_link_sound);
         * n then falls short, and the page is left to its owner, whose
         * collection reports it. */
        if (ebb_unlikely(debug_enabled) && !page_link_ok(page, list))
            return 0;
    }
    return n;
}

/* Scavenger, without quiescing: steal a page of the full list if every one of
 * its blocks is on xthread_free. A page enters the full list with all its
 * blocks handed out (used + dropped == reserved) and leaves it, under the lock, as soon
 * as the owner frees one of them; so a list of `reserved` blocks means all are
 * free, and the owner's lock-free paths cannot touch the page. */
static void page_steal_if_free(heap_t *heap, page_t *page)
{
    /* A kept page that filled up again: freeing it would write retained[],
     * which the owner may be writing now. Left for a quiesced visit. */
    if (atomic_load_explicit(&page->kept, memory_order_acquire))
        return;
    uintptr_t x = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
    uint32_t remote = xthread_count(page, (block_t *)(x & ~XTHREAD_FLAGS));
    if (remote + page_dropped_count(page) != page->reserved)
        return;
    /* Take the list; a push since the load means a block came back twice. */
    if (!atomic_compare_exchange_strong_explicit(&page->xthread_free, &x, x & XTHREAD_GEN_MASK,
                                                 memory_order_acquire, memory_order_relaxed))
        return;
    page->used = 0;
    page_free(heap, page);
}

void heap_steal_free_pages(heap_t *heap)
{
    page_t *next;
    for (page_t *page = heap->full.first; page; page = next) {
        next = page->next;
        page_steal_if_free(heap, page);
    }
}

/* A page nobody owns (its segment off the abandoned list, held by the
 * caller): take its remote frees, and free it if that emptied it (then
 * true). `adopt`: the caller adopts the page (step 5): the word becomes
 * empty with the next generation; else it stays abandoned, generation and
 * all. Acquire: the blocks' links; release: a freer that reads the new word
 * sees the page->heap stored before. */
static bool page_collect_unowned(page_t *page, bool adopt)
{
    uintptr_t x = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
    uintptr_t next;
    do {
        next = adopt ? (x + XTHREAD_GEN_ONE) & XTHREAD_GEN_MASK
                     : (x & XTHREAD_GEN_MASK) | XTHREAD_ABANDONED;
    } while (!atomic_compare_exchange_weak_explicit(&page->xthread_free, &x, next,
                                                    memory_order_acq_rel, memory_order_relaxed));
    page_take_remote(page, (block_t *)(x & ~XTHREAD_FLAGS)); /* XTHREAD_IN_FULL goes too */
    page->in_full = 0;
    if (page->used != 0) {
        if (x & ~XTHREAD_FLAGS) /* blocks came back: a candidate for the trim */
            page_watch_sparse(NULL, page);
        return false;
    }
    segment_free_run(page);
    return true;
}

bool page_collect_abandoned(page_t *page)
{
    return page_collect_unowned(page, false);
}

/* Step 4, for one page, after its heap was cleared. */
void page_mark_abandoned(page_t *page)
{
    atomic_fetch_or_explicit(&page->xthread_free, XTHREAD_ABANDONED, memory_order_release);
}

/* Owner: collect every page; free the empty ones (with `force` also the one
 * page per class kept for reuse). Lock held by the caller. */
void heap_collect_pages(heap_t *heap, bool force)
{
    page_t *next;
    /* Step 3 of the full-page protocol (top of this file): the flag is taken
     * before the scan. Cleared after it, it erased the flag of a first remote
     * free into a page the scan had passed already, and that page stayed on
     * the full list with blocks free until some later collection (review
     * finding). */
    atomic_exchange_explicit(&heap->xfull_pending, 0, memory_order_acquire);
    for (page_t *page = heap->full.first; page; page = next) {
        next = page->next;
        if (atomic_load_explicit(&page->xthread_free, memory_order_acquire) & ~XTHREAD_FLAGS)
            page_unfull(heap, page);
    }
    for (unsigned cls = 0; cls < CLASS_COUNT; cls++) {
        for (page_t *page = heap->queues[cls].first; page; page = next) {
            next = page->next;
            uint16_t used = page->used;
            page_collect(page);
            if (page->used < used && page->in_full == PAGE_FREE_SIGNAL) {
                /* remote frees since its trim: mark it again */
                page->in_full = page_queued_state(heap, cls);
                page_watch_sparse(heap, page);
            }
            if (page->used == 0 && (force || page != heap->queues[cls].first || next))
                page_free(heap, page);
        }
    }
}

/* ---------------------------------------------------------------------------
 * Trimming pages that still hold live blocks (malloc_trim(0), ebb_collect(true))
 *
 * A page with one live block keeps its run: its free blocks would otherwise
 * stay resident however many there are (review finding: 300,000 blocks of
 * 1,000 B with every 50th kept live held 302 MiB after malloc_trim(0),
 * for 5.9 MiB live). A trim gives back, within the blocks carved so far,
 * each OS page whose bytes all belong to free blocks: the blocks it overlaps
 * are DROPPED (off the free list, the OS page's bit set in
 * segment_t.trimmed, so that every block overlapping a set bit is known to
 * be dropped). A block whose link word lies in a page given back may read
 * back as zero (or anything, with MADV_FREE), so it cannot stay on the list.
 * One that only has pages inside it given back (a block of several OS pages
 * that starts in a page a live block shares) could, but then nothing would
 * say its inside is gone: the next trim purged it again and malloc_trim
 * returned 1 with nothing new freed, and committed_bytes counted it as
 * resident (issue 3). Dropping it too keeps one rule: a set bit is an OS
 * page given back whose blocks have not been handed out since, so no trim
 * purges a page twice unless its blocks went back on the list in between,
 * and the telemetry subtracts exactly the set bits. `used` still counts
 * the live blocks alone: the free that empties the page sees used reach 0
 * as ever, and the whole run goes back (dropped blocks included), clearing
 * the bits. Blocks dropped by an earlier trim count as free, so a later
 * trim can drop the OS pages beside them; it skips the pages already given
 * back. When the page's free list runs dry, its owner takes the dropped
 * blocks back before it would call the page full (page_restore_dropped): a
 * trimmed page serves malloc again, so a trim costs a busy thread page
 * faults, never memory.
 *
 * Who trims: malloc_trim(0) and ebb_collect(true) every such page (the
 * caller's heap, quiesced heaps, abandoned segments); the scavenger, without
 * being asked, the pages marked in segment_t.sparse_watch, those that are
 * new (page_watch_new: a page that never fills up gets no other mark) or had
 * blocks freed into them since they were last full (page_unfull) or last
 * trimmed (the trim sets PAGE_FREE_SIGNAL, so that the owner's next free
 * into the page takes the slow path, and the idle visit's collection of
 * remote frees looks at it too), and the abandoned segments' collected
 * pages, once their heap has taken no slow path
 * for SPARSE_IDLE_FACTOR purge delays and can be quiesced (heap.c,
 * heap_scavenge), or their owner has been gone as long (segment.c,
 * segment_abandoned_collect). The mark is the
 * signal the free fast path cannot give: a page whose blocks are freed one
 * by one, none of them its last, takes one slow path, the first free into it
 * while full or since its trim (review finding: 300,000 blocks of 1,000 B, all freed but every
 * 50th, kept 302 MiB resident in an idle process until malloc_trim).
 * ------------------------------------------------------------------------- */

/* The blocks a trim tracks on its stack, at most (two bitmaps, 1 KiB): every
 * page of up to 64 KiB; pages with more blocks (16-byte ones in a bigger
 * run, if a class ever gets one) are left as they are. */
#define TRIM_BLOCKS_MAX 4096

/* OS pages per slice, or 0 where segment_t.trimmed cannot describe them. */
static size_t trim_pages_per_slice(void)
{
    size_t ps = os_info.page_size;
    if (ps < SLICE_SIZE / 16 || ps > SLICE_SIZE)
        return 0;
    return SLICE_SIZE / ps;
}

/* Whether the OS page at byte offset `off` of segment `seg` was trimmed. */
static bool trimmed_test(const segment_t *seg, size_t off)
{
    size_t per = trim_pages_per_slice();
    size_t g = off / os_info.page_size;
    return per != 0 && ((seg->trimmed[g / per] >> (g % per)) & 1);
}

/* Mark (or unmark) the OS page at byte offset `off` of `seg` as trimmed. */
static void trimmed_mark(segment_t *seg, size_t off, bool trimmed)
{
    size_t per = trim_pages_per_slice();
    if (per == 0)
        return;
    size_t g = off / os_info.page_size;
    uint16_t bit = (uint16_t)(1u << (g % per));
    seg->trimmed[g / per] = trimmed ? (uint16_t)(seg->trimmed[g / per] | bit)
                                    : (uint16_t)(seg->trimmed[g / per] & ~bit);
}

/* Unmark the OS pages of bytes [from, to) of the page's run. A slice with no
 * mark costs one load (page_extend calls this on every carve). */
static void page_untrim(page_t *page, size_t from, size_t to)
{
    segment_t *seg = page_segment(page);
    size_t ps = os_info.page_size, idx = (size_t)(page - seg->pages);
    for (size_t s = from / SLICE_SIZE; s * SLICE_SIZE < to; s++) {
        if (ebb_likely(seg->trimmed[idx + s] == 0))
            continue;
        size_t lo = s * SLICE_SIZE > from ? s * SLICE_SIZE : from / ps * ps;
        size_t hi = (s + 1) * SLICE_SIZE < to ? (s + 1) * SLICE_SIZE : to;
        for (size_t off = lo; off < hi; off += ps)
            trimmed_mark(seg, idx * SLICE_SIZE + off, false);
    }
}

ebb_racy_reader bool page_has_dropped(const page_t *page)
{
    const segment_t *seg = page_segment(page);
    size_t idx = (size_t)(page - seg->pages);
    size_t count = page->slice_count;
    for (size_t i = 0; i < count && idx + i < SLICES_PER_SEGMENT; i++)
        if (seg->trimmed[idx + i])
            return true;
    return false;
}

ebb_racy_reader bool page_block_dropped(const page_t *page, size_t i)
{
    const segment_t *seg = page_segment(page);
    size_t ps = os_info.page_size;
    size_t first = (size_t)(page_start(page) - (uint8_t *)seg) + i * page->block_size;
    size_t last = first + page->block_size - 1;
    for (size_t off = first / ps * ps; off <= last; off += ps)
        if (trimmed_test(seg, off))
            return true;
    return false;
}

ebb_racy_reader size_t page_dropped_count(const page_t *page)
{
    size_t per = trim_pages_per_slice();
    size_t bs = page->block_size, capacity = page->capacity;
    if (per == 0 || bs == 0 || !page_has_dropped(page))
        return 0;
    const segment_t *seg = page_segment(page);
    size_t idx = (size_t)(page - seg->pages), ps = os_info.page_size;
    size_t run = (size_t)page->slice_count * per, n = 0, next = 0; /* next: first block not counted */
    for (size_t k = 0; k < run; k++) {
        size_t s = idx + k / per;
        if (s >= SLICES_PER_SEGMENT || !((seg->trimmed[s] >> (k % per)) & 1))
            continue;
        size_t i0 = k * ps / bs, i1 = ((k + 1) * ps - 1) / bs;
        if (i0 < next)
            i0 = next;
        if (i1 >= capacity)
            i1 = capacity - 1;
        if (i0 <= i1 && i0 < capacity) {
            n += i1 - i0 + 1;
            next = i1 + 1;
        }
    }
    return n;
}

static inline bool bit_get(const uint64_t *map, size_t i)
{
    return (map[i / 64] >> (i % 64)) & 1;
}

static inline void bit_set(uint64_t *map, size_t i)
{
    map[i / 64] |= (uint64_t)1 << (i % 64);
}

/* Byte offset, from the page's start, of its tail: the OS pages wholly past its
 * last block, which no block ever covers. */
static size_t page_tail_start(const page_t *page)
{
    size_t ps = os_info.page_size;
    return ((size_t)page->reserved * page->block_size + ps - 1) / ps * ps;
}

/* Give back what lies past the blocks a page holding live blocks has carved,
 * where its slices were written before the page took them
 * (prewritten_slices), once. Two parts:
 *   - its tail, past its last block: a class of eight-slice pages takes a
 *     shorter run of freed, written slices (page_new_small), and one 40 KiB
 *     block on one slice left 24 KiB written behind it that no trim reached
 *     while the block lived (review of a499784: 40 such blocks held +0.9 MiB
 *     after malloc_trim(0); test_purge,
 *     short_pages_on_freed_slices_keep_no_written_tail);
 *   - the blocks not carved yet (page_extend carves a few at a time): one
 *     block of 5 KiB on a freed slice left the other 59 KiB written (test_purge,
 *     uncarved_blocks_on_freed_slices_go_back: one block of each of 17 classes
 *     held +1.30 MiB once idle).
 * Its OS pages are marked in segment_t.trimmed like a trim's. No carved
 * block overlaps them, so page_dropped_count and page_restore_dropped never
 * see them, and the telemetry leaves them out; page_extend unmarks those it
 * carves blocks over. Not at the page's creation: a madvise for every new
 * page on written slices would cost far more than the page it saves. */
static void page_trim_tail(page_t *page, os_purge_batch_t *batch)
{
    size_t ps = os_info.page_size;
    segment_t *seg = page_segment(page);
    size_t idx = (size_t)(page - seg->pages);
    size_t start_off = idx * SLICE_SIZE, end = (size_t)page->slice_count * SLICE_SIZE;
    size_t carved_end = ((size_t)page->capacity * page->block_size + ps - 1) / ps * ps;
    uint64_t written = atomic_load_explicit(&seg->prewritten_slices, memory_order_relaxed);
    for (size_t off = carved_end; off < end; off += ps) {
        size_t at = start_off + off;
        if (!((written >> (at / SLICE_SIZE)) & 1) || trimmed_test(seg, at))
            continue;
        trimmed_mark(seg, at, true);
        os_purge_add(batch, (uint8_t *)seg + at, ps);
    }
}

void page_trim(page_t *page, os_purge_batch_t *batch)
{
    size_t per = trim_pages_per_slice();
    size_t bs = page->block_size, capacity = page->capacity, ps = os_info.page_size;
    segment_t *seg = page_segment(page);
    seg->sparse_watch &= ~((uint64_t)1 << (page - seg->pages));
    /* Blocks freed into the page from now on may make more OS pages free:
     * the owner's next free marks it again (page_free_local_slow), as the
     * first free into a full page does. Without this, a trim that found
     * little to give back (half the blocks live) unmarked the page for good,
     * and whatever its thread freed into it later stayed resident while it
     * idled (review of a87ac0c: 30 MiB instead of 3). */
    if (page->kind == PAGE_SMALL && page->in_full != PAGE_IN_FULL && page->used != 0)
        page->in_full = PAGE_FREE_SIGNAL;
    if (per != 0 && page->kind == PAGE_SMALL && page->used != 0)
        page_trim_tail(page, batch); /* a full page too: its tail is no block */
    if (per == 0 || page->kind != PAGE_SMALL || page->free == NULL || page->used == 0 ||
        capacity > TRIM_BLOCKS_MAX || (capacity - page->used) * bs < ps)
        return;
    uintptr_t start = (uintptr_t)page_start(page);
    size_t start_off = start - (uintptr_t)seg;
    uint64_t on_list[TRIM_BLOCKS_MAX / 64], dropped[TRIM_BLOCKS_MAX / 64];
    size_t words = (capacity + 63) / 64;
    memset(on_list, 0, words * sizeof on_list[0]);
    memset(dropped, 0, words * sizeof dropped[0]);
    /* The free list, bounded and checked: a changed link (debug mode
     * reports those where it finds them) or a cycle leaves the page as it is. */
    size_t listed = 0;
    for (block_t *b = page->free; b != NULL; b = b->next) {
        uintptr_t x = (uintptr_t)b;
        if (!page_is_carved_block(x, start, bs, capacity))
            return;
        size_t i = (x - start) / bs;
        if (bit_get(on_list, i) || ++listed > capacity)
            return;
        bit_set(on_list, i);
    }
    if (page_has_dropped(page))
        for (size_t i = 0; i < capacity; i++)
            if (page_block_dropped(page, i))
                bit_set(dropped, i);
    /* OS page by OS page of the carved blocks, into the caller's batch.
     * The batch keeps them until the caller flushes it (after this returns:
     * nothing writes a dropped block meanwhile, it is on no list). */
    size_t carved = capacity * bs;
    bool changed = false;
    for (size_t off = 0; off + ps <= carved; off += ps) {
        if (trimmed_test(seg, start_off + off))
            continue; /* given back by an earlier trim */
        size_t i0 = off / bs, i1 = (off + ps - 1) / bs;
        bool all_free = true;
        for (size_t i = i0; i <= i1 && all_free; i++)
            all_free = bit_get(on_list, i) || bit_get(dropped, i);
        if (!all_free)
            continue;
        trimmed_mark(seg, start_off + off, true);
        for (size_t i = i0; i <= i1; i++)
            bit_set(dropped, i);
        changed = true;
        os_purge_add(batch, (void *)(start + off), ps);
    }
    if (!changed)
        return;
    /* The list again, in address order, without the dropped blocks. Their
     * links were read above; they are not written again. */
    block_t *head = NULL;
    for (size_t i = capacity; i-- > 0;) {
        if (bit_get(on_list, i) && !bit_get(dropped, i)) {
            block_t *b = (block_t *)(start + i * bs);
            b->next = head;
            head = b;
        }
    }
    page->free = head;
}

/* Owner (or quiesced), lock held, after heap_collect_pages: the pages with
 * free blocks are in the class queues (a page of the full list has none). */
void heap_trim_pages(heap_t *heap)
{
    os_purge_batch_t batch;
    os_purge_batch_init(&batch);
    for (unsigned cls = 0; cls < CLASS_COUNT; cls++)
        for (page_t *page = heap->queues[cls].first; page; page = page->next)
            page_trim(page, &batch);
    /* Full pages have no free block, but may have a written tail. */
    for (page_t *page = heap->full.first; page; page = page->next)
        page_trim(page, &batch);
    os_purge_flush(&batch);
}

static bool page_watched(const page_t *page)
{
    const segment_t *seg = page_segment(page);
    return (seg->sparse_watch >> (page - seg->pages)) & 1;
}

void heap_trim_watched(heap_t *heap)
{
    os_purge_batch_t batch;
    os_purge_batch_init(&batch);
    for (unsigned cls = 0; cls < CLASS_COUNT; cls++)
        for (page_t *page = heap->queues[cls].first; page; page = page->next)
            if (page_watched(page))
                page_trim(page, &batch);
    /* A new page watched since its creation may have filled up: its tail. */
    for (page_t *page = heap->full.first; page; page = page->next)
        if (page_watched(page))
            page_trim(page, &batch);
    os_purge_flush(&batch);
}

void page_trim_if_watched(segment_t *seg, size_t i, os_purge_batch_t *batch)
{
    if ((seg->sparse_watch >> i) & 1)
        page_trim(&seg->pages[i], batch);
}

/* Owner, lock held: the page's free list is empty and all its blocks are
 * carved. Put the blocks a trim dropped back on the list (they are free: a
 * trim drops only blocks on the list, and nothing hands out a dropped
 * block) and forget the trim; their OS pages fault back in as they are
 * written. False if the page has none. */
static bool page_restore_dropped(page_t *page)
{
    if (page->kind != PAGE_SMALL || !page_has_dropped(page))
        return false;
    uintptr_t start = (uintptr_t)page_start(page);
    block_t *head = page->free;
    for (size_t i = page->capacity; i-- > 0;) {
        if (page_block_dropped(page, i)) {
            block_t *b = (block_t *)(start + i * page->block_size);
            b->next = head;
            head = b;
        }
    }
    /* Forget the trim of the blocks; the tail's marks stay (page_trim_tail). */
    page_untrim(page, 0, page_tail_start(page));
    page->free = head;
    return head != NULL;
}

/* Reclaim: the page belongs to a segment `heap` just took over. */
void page_adopt(heap_t *heap, page_t *page)
{
    atomic_store_explicit(&page->heap, heap, memory_order_relaxed);
    page->next = page->prev = NULL;
    if (page_collect_unowned(page, true)) /* step 5: the page is ours from here */
        return;
    page->in_full = page_queued_state(heap, page->class_idx);
    queue_push_back(&heap->queues[page->class_idx], page);
    if (heap->queues[page->class_idx].first == page)
        heap_direct_update(heap, page->class_idx);
    /* Marked for a trim (by its exited owner, or just now: remote frees) that
     * the abandoned pass had not made yet: now the new owner's, once it idles.
     * Without telling the heap, the page waited for a visit made for another
     * reason (review finding). */
    if (page_watched(page))
        page_watch_sparse(heap, page);
}
