/*
 * segment.c — segments: mapping them, handing out runs of slices, the segment
 * map ("is this pointer ours?"), abandonment at thread exit and reclaim by
 * other threads, and the small cache of fully free segments.
 *
 * Who may touch a segment's free-slice set (free_slices):
 *   - the owner claims slices with a CAS (segment_claim_slices);
 *   - any thread releases slices with an atomic OR, after resetting their
 *     descriptors (release order, so the next claimer sees them reset);
 *   - the purge pass claims free slices with a CAS, purges them, and ORs them
 *     back, so purging never races an allocation of the same slices. While
 *     it holds them the segment does not read as entirely free to whoever
 *     empties it meanwhile: the pass tells them once it gives the slices
 *     back (segment_freed_under_a_hold).
 *
 * Freeing a run also marks its slices dirty (free but resident) and lists the
 * segment for the purge pass (purge.c describes that protocol); claiming a run
 * clears its dirty bits.
 *
 * When may a segment be unmapped? Only when all its slices are free, and only
 * by a thread that knows nobody else will touch it afterwards:
 *   - its owner (a remote freer's last access to a segment owned by a live
 *     thread is its OR of free_slices; it reads nothing after);
 *   - for an abandoned segment, the thread holding abandoned_lock that sees
 *     it still on the abandoned list (segment_try_release_abandoned).
 */
#include <string.h>

#include "internal.h"

/* ---------------------------------------------------------------------------
 * Locks
 * ------------------------------------------------------------------------- */
/* Spin while the holder is likely running and about to drop the lock (the
 * critical sections are a few list operations; the longest, a huge
 * mapping's purge, ends in a syscall); then mark the lock contended and
 * sleep until lock_release wakes us. A woken thread takes the lock as 2, not
 * 1: other sleepers may remain, and its own release must wake them. */
#define LOCK_SPINS 100

__thread unsigned tls_locks_held __attribute__((tls_model("initial-exec")));

void lock_acquire(lock_t *l)
{
    lock_count_up(); /* before the first try: internal.h */
    for (unsigned spins = 0; spins < LOCK_SPINS; spins++) {
        int expected = 0;
        if (atomic_load_explicit(&l->held, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->held, &expected, 1,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        cpu_relax();
    }
    while (atomic_exchange_explicit(&l->held, 2, memory_order_acquire) != 0)
        os_futex_wait(&l->held, 2);
}

void lock_wake(lock_t *l)
{
    os_futex_wake_one(&l->held);
}

static lock_t abandoned_lock = LOCK_INIT; /* the abandoned list, in_abandoned */
static lock_t cache_lock = LOCK_INIT;     /* the segment cache */
static lock_t segments_lock = LOCK_INIT;  /* the list of all segments */

static segment_t *abandoned_first, *abandoned_last;
/* Counts segments moved between a heap and the abandoned list (an exit, a
 * reclaim), each before the abandoned_lock release that publishes the move:
 * a heap walk that read it before and after (taking that lock in between)
 * knows whether a segment may have been listed twice or not at all. */
static atomic_ulong segment_moves;

unsigned long segment_moves_read(void)
{
    return atomic_load_explicit(&segment_moves, memory_order_acquire);
}

/* How many are on the list (written under abandoned_lock): a reclaim that
 * finds none looks no further, without the lock. */
static atomic_size_t abandoned_count;
/* Per class, how many listed segments have its room bit (under the lock): a
 * reclaim for a class none has looks no further, without the lock. */
static atomic_uint abandoned_with_room[CLASS_COUNT];

static void room_counts_add(uint64_t room, int delta)
{
    for (; room; room &= room - 1)
        atomic_fetch_add_explicit(&abandoned_with_room[__builtin_ctzll(room)], (unsigned)delta,
                                  memory_order_relaxed);
}
static segment_t *cache[SEGMENT_CACHE_MAX];
static size_t cache_count;
/* Under cache_lock: free segments beyond the cache, oldest first, linked
 * through seg->next and seg->prev (segment_release). */
static segment_t *overflow_first, *overflow_last;
static size_t overflow_count;
/* cache_count + overflow_count, stored under cache_lock whenever they change,
 * read without it: a thread looking for resident slices in cached segments
 * skips the lock when there are none (segment_alloc_run). */
static atomic_size_t cache_entries;
static segment_t *all_segments;

/* ---------------------------------------------------------------------------
 * The segment map: one bit per SEGMENT_SIZE unit of a 48-bit address space
 * (8 MiB of bss; only the words for ranges we use are ever touched). A bit is
 * set for the unit holding a segment or huge-mapping header.
 * ------------------------------------------------------------------------- */
#define MAP_ADDRESS_BITS 48
#define MAP_UNITS        ((size_t)1 << (MAP_ADDRESS_BITS - SEGMENT_SHIFT))
/* Page-aligned: a page of the map covers an aligned 128 GiB of address space,
 * so the segments of a process usually need one page of it, not two. */
static _Atomic(uint64_t) segment_map[MAP_UNITS / 64] ebb_cold_bss __attribute__((aligned(4096)));

void segment_map_set(const void *seg, bool present)
{
    size_t unit = (uintptr_t)seg >> SEGMENT_SHIFT;
    if (unit >= MAP_UNITS)
        return;
    uint64_t bit = (uint64_t)1 << (unit % 64);
    if (present)
        atomic_fetch_or_explicit(&segment_map[unit / 64], bit, memory_order_release);
    else
        atomic_fetch_and_explicit(&segment_map[unit / 64], ~bit, memory_order_release);
}

bool segment_map_contains(const void *p)
{
    if (p == NULL)
        return false;
    size_t unit = (uintptr_t)ptr_segment(p) >> SEGMENT_SHIFT;
    if (unit >= MAP_UNITS)
        return false;
    uint64_t word = atomic_load_explicit(&segment_map[unit / 64], memory_order_acquire);
    return (word >> (unit % 64)) & 1;
}

uintptr_t segment_map_next(uintptr_t from, uintptr_t to)
{
    if (to <= from)
        return to;
    size_t unit = (from + SEGMENT_MASK) >> SEGMENT_SHIFT;
    size_t last = (to - 1) >> SEGMENT_SHIFT; /* the unit holding to - 1 */
    if (last >= MAP_UNITS)
        last = MAP_UNITS - 1;
    while (unit <= last) {
        uint64_t word = atomic_load_explicit(&segment_map[unit / 64], memory_order_acquire);
        word >>= unit % 64;
        if (word != 0) {
            unit += (size_t)__builtin_ctzll(word);
            return unit <= last ? (uintptr_t)unit << SEGMENT_SHIFT : to;
        }
        unit = (unit | 63) + 1; /* the next word */
    }
    return to;
}

/* ---------------------------------------------------------------------------
 * Mapping and unmapping whole segments
 * ------------------------------------------------------------------------- */

/* Segments are mapped a region at a time. Every mmap and munmap takes the
 * process's mmap lock for writing, which stalls every other thread's page
 * faults (and any reader of /proc/<pid>/smaps) meanwhile: a program growing by
 * hundreds of MiB should not make one mmap per segment. A region is aligned to
 * SEGMENT_SIZE and handed out one segment at a time; the next region is twice
 * as big, up to SEGMENT_REGION_MAX segments. What is not handed out yet (the
 * spare) is mapped but untouched: address space, no memory. When no segment
 * has been taken from it for EBB_UNMAP_DELAY, the purge pass unmaps the spare
 * and the next region starts again at one segment (segment_cache_decay).
 * Under region_lock. */
static lock_t region_lock = LOCK_INIT;
static uint8_t *region_next, *region_end;
static size_t region_grow = 1;  /* segments in the next region */
static uint64_t region_used_ms; /* when a segment was last taken */
/* The standby segment once the unmap delay passed (SEGMENT_STANDBY,
 * segment_cache_decay): still mapped, so an idle program that wakes up makes
 * no mmap, but with every page given back, its header too, and out of every
 * list and of the segment map; all zero, so it is handed out first as if new
 * from a region. Keeping the header resident instead held 4 KiB per idle
 * process (docs/memory-return.md, "The floor"). Under region_lock. */
static segment_t *region_blank;

static segment_t *segment_from_region(void)
{
    segment_t *seg = NULL;
    bool spare = false;
    lock_acquire(&region_lock);
    if (region_blank != NULL) {
        seg = region_blank;
        region_blank = NULL;
        region_used_ms = os_now_ms();
        lock_release(&region_lock);
        return seg;
    }
    if (region_next == region_end) {
        size_t n = region_grow;
        uint8_t *r = os_map_aligned(n * SEGMENT_SIZE, SEGMENT_SIZE, 0);
        if (r == NULL && n > 1) {
            n = 1;
            r = os_map_aligned(SEGMENT_SIZE, SEGMENT_SIZE, 0);
        }
        if (r != NULL) {
            region_next = r;
            region_end = r + n * SEGMENT_SIZE;
            region_grow = n * 2 < SEGMENT_REGION_MAX ? n * 2 : SEGMENT_REGION_MAX;
        }
    }
    if (region_next != region_end) {
        seg = (segment_t *)region_next;
        region_next += SEGMENT_SIZE;
        region_used_ms = os_now_ms();
        spare = region_next != region_end;
    }
    lock_release(&region_lock);
    if (spare)
        purge_wake(); /* the pass unmaps the spare if it stays unused */
    return seg;
}

/* Under region_lock: will region_decay unmap the last region's rest within
 * two purge delays (a later deadline is noted: purge_due_later)? */
static bool region_soon_locked(uint64_t now_ms)
{
    return region_next != region_end &&
           !purge_due_later(region_used_ms + (uint64_t)option_get(OPT_UNMAP_DELAY), now_ms);
}

/* Unmap the spare if `force`, or if no segment was taken for the unmap delay.
 * True if a spare remains that is due within two purge delays (a later
 * deadline is noted: purge_due_later). */
static bool region_decay(uint64_t now_ms, bool force)
{
    uint64_t delay = (uint64_t)option_get(OPT_UNMAP_DELAY);
    uint8_t *start = NULL;
    size_t size = 0;
    lock_acquire(&region_lock);
    if (region_next != region_end && (force || ms_since(now_ms, region_used_ms) >= delay)) {
        start = region_next;
        size = (size_t)(region_end - region_next);
        region_next = region_end = NULL;
        region_grow = 1;
    }
    segment_t *blank = NULL;
    if (force) {
        blank = region_blank;
        region_blank = NULL;
    }
    bool pending = region_soon_locked(now_ms);
    lock_release(&region_lock);
    if (start)
        os_unmap(start, size);
    if (blank)
        os_unmap(blank, SEGMENT_SIZE);
    return pending;
}

/* Mapped and untouched: the last region's rest and the blank standby. */
size_t segment_spare_bytes(void)
{
    lock_acquire(&region_lock);
    size_t n = (size_t)(region_end - region_next) + (region_blank ? SEGMENT_SIZE : 0);
    lock_release(&region_lock);
    return n;
}

/* Does the last region have a rest that region_decay unmaps soon? */
static bool region_spare_pending(uint64_t now_ms)
{
    lock_acquire(&region_lock);
    bool pending = region_soon_locked(now_ms);
    lock_release(&region_lock);
    return pending;
}

static segment_t *segment_map_new(void)
{
    segment_t *seg = segment_from_region();
    if (seg == NULL && purge_release_caches())
        seg = segment_from_region();
    if (seg == NULL)
        return NULL;
    static atomic_int segments_mapped_ever;
    if (atomic_fetch_add_explicit(&segments_mapped_ever, 1, memory_order_relaxed) >= 1)
        purge_want_thread(); /* the process is using real memory */
    /* Marked before its first write: under THP "always" that write would
     * fault a 2 MiB huge page in, which the mark does not split (seen: a
     * whole huge page resident per segment). */
    if (os_info.thp_always)
        os_no_huge_pages(seg, SEGMENT_SIZE); /* purged slices must stay purged */
    /* Never handed out before: every field is zero already. */
    seg->kind = SEGMENT_NORMAL;
    atomic_store_explicit(&seg->free_slices, SLICES_ALL, memory_order_relaxed);
    atomic_store_explicit(&seg->fresh_slices, SLICES_ALL, memory_order_relaxed);
    lock_acquire(&segments_lock);
    seg->all_next = all_segments;
    if (all_segments)
        all_segments->all_prev = seg;
    all_segments = seg;
    lock_release(&segments_lock);
    segment_map_set(seg, true);
    return seg;
}

/* Off the purge list, the segment map and the list of all segments: nobody
 * reaches `seg` any more (its caller took it off the cache). */
static void segment_forget(segment_t *seg)
{
    purge_segment_forget(seg);
    segment_map_set(seg, false);
    lock_acquire(&segments_lock);
    if (seg->all_prev)
        seg->all_prev->all_next = seg->all_next;
    else
        all_segments = seg->all_next;
    if (seg->all_next)
        seg->all_next->all_prev = seg->all_prev;
    lock_release(&segments_lock);
}

static void segment_unmap(segment_t *seg)
{
    segment_forget(seg);
    os_unmap(seg, SEGMENT_SIZE);
}

/* The standby segment, past the unmap delay and with every free slice
 * purged already: forgotten, zeroed (its header was the one page it still
 * held) and kept mapped as region_blank, unless one is kept already or the
 * kernel would not zero it (then it is unmapped). */
static void segment_blank(segment_t *seg)
{
    segment_forget(seg);
    bool zeroed = os_zero(seg, SEGMENT_SIZE);
    lock_acquire(&region_lock);
    bool kept = zeroed && region_blank == NULL;
    if (kept)
        region_blank = seg;
    lock_release(&region_lock);
    if (!kept)
        os_unmap(seg, SEGMENT_SIZE);
}

/* Unmap a chain of segments linked through seg->next. */
static void segment_unmap_chain(segment_t *seg)
{
    while (seg) {
        segment_t *next = seg->next;
        segment_unmap(seg);
        seg = next;
    }
}

/* Under cache_lock: will a later pass have something to do here? Segments
 * beyond the standby to unmap, or the standby to blank (segment_blank), but
 * not while EBB_PURGE_DELAY=-1 keeps its slices. */
static bool cache_pending_locked(void)
{
    return cache_count > SEGMENT_STANDBY || overflow_first != NULL ||
           (cache_count == 1 && option_get(OPT_PURGE_DELAY) >= 0);
}

/* Under cache_lock: that work, within two purge delays? The overflow list
 * is (one purge delay); the oldest cached segment, to unmap or to blank
 * after the unmap delay, once that is near (purge_due_later). */
static bool cache_soon_locked(uint64_t now_ms)
{
    if (!cache_pending_locked())
        return false;
    if (overflow_first != NULL)
        return true;
    uint64_t unmap_delay = (uint64_t)option_get(OPT_UNMAP_DELAY);
    return !purge_due_later(cache[0]->cached_at_ms + unmap_delay, now_ms);
}

/* Under cache_lock, after the cache or the overflow list changed. */
static void cache_entries_update(void)
{
    atomic_store_explicit(&cache_entries, cache_count + overflow_count, memory_order_relaxed);
}

/* A fully free segment nobody owns (`exited_ms`: when the thread that owned
 * it exited, or 0 if a live owner releases it): keep it in the bounded cache; beyond the
 * cache, on the overflow list until the purge pass unmaps it one purge delay
 * later (so a program freeing hundreds of MiB does not pay for the munmaps in
 * its free calls, and one allocating again soon reuses the segments). With a
 * purge delay of 0 or -1 (purge at once / never), or while no scavenger exists
 * (purge_at_free), it is unmapped now. */
static void segment_release(segment_t *seg, uint64_t exited_ms)
{
    atomic_store_explicit(&seg->thread_id, 0, memory_order_relaxed);
    atomic_store_explicit(&seg->exited_ms, exited_ms, memory_order_relaxed);
    /* Entirely free: no page under live blocks is left to hold. A hold kept
     * through the cache made the next owner's exit, however brief its
     * ownership, trim at once the pages it had freed (review finding). */
    seg->trim_held_ms = 0;
    seg->heap = NULL;
    seg->next = seg->prev = NULL;
    seg->cached_at_ms = os_now_ms();
    bool defer = option_get(OPT_PURGE_DELAY) > 0 && !purge_at_free();
    lock_acquire(&cache_lock);
    if (cache_count < SEGMENT_CACHE_MAX) {
        cache[cache_count++] = seg;
        seg = NULL;
    } else if (defer) {
        if (overflow_last)
            overflow_last->next = seg;
        else
            overflow_first = seg;
        seg->prev = overflow_last;
        overflow_last = seg;
        overflow_count++;
        seg = NULL;
    }
    bool decay = cache_pending_locked();
    cache_entries_update();
    lock_release(&cache_lock);
    if (seg)
        segment_unmap(seg);
    if (decay)
        purge_wake();
}

bool segment_cache_pending(void)
{
    uint64_t now = os_now_ms();
    lock_acquire(&cache_lock);
    bool pending = cache_soon_locked(now);
    lock_release(&cache_lock);
    return pending || region_spare_pending(now);
}

/* Segments past their delays are unmapped (or the standby blanked); true if
 * work is left within two purge delays (cache_soon_locked). */
bool segment_cache_decay(uint64_t now_ms, bool force)
{
    uint64_t delay = (uint64_t)option_get(OPT_UNMAP_DELAY);
    long purge_delay = option_get(OPT_PURGE_DELAY);
    segment_t *drop[SEGMENT_CACHE_MAX];
    size_t n = 0;
    segment_t *chain = NULL, *chain_last = NULL;
    lock_acquire(&cache_lock);
    size_t keep = force ? 0 : SEGMENT_STANDBY;
    /* Oldest first: entries were pushed in time order. */
    while (cache_count > keep && (force || ms_since(now_ms, cache[0]->cached_at_ms) >= delay)) {
        drop[n++] = cache[0];
        cache_count--;
        memmove(&cache[0], &cache[1], cache_count * sizeof cache[0]);
    }
    /* The standby itself, past the delay too, goes blank once its slices
     * are purged (never while EBB_PURGE_DELAY=-1 keeps them). */
    segment_t *blank = NULL;
    if (!force && cache_count == 1 && purge_delay >= 0 &&
        ms_since(now_ms, cache[0]->cached_at_ms) >= delay &&
        atomic_load_explicit(&cache[0]->dirty_slices, memory_order_relaxed) == 0) {
        blank = cache[0];
        cache_count = 0;
    }
    /* The overflow list, oldest first, after one purge delay. */
    while (overflow_first &&
           (force || purge_delay < 0 || ms_since(now_ms, overflow_first->cached_at_ms) >= (uint64_t)purge_delay)) {
        segment_t *seg = overflow_first;
        overflow_first = seg->next;
        overflow_count--;
        seg->next = NULL;
        if (chain_last)
            chain_last->next = seg;
        else
            chain = seg;
        chain_last = seg;
    }
    if (overflow_first)
        overflow_first->prev = NULL;
    else
        overflow_last = NULL;
    bool pending = cache_soon_locked(now_ms);
    cache_entries_update();
    lock_release(&cache_lock);
    for (size_t i = 0; i < n; i++)
        segment_unmap(drop[i]);
    segment_unmap_chain(chain);
    if (blank)
        segment_blank(blank);
    pending |= region_decay(now_ms, force);
    return pending;
}

bool segment_cache_release(void)
{
    segment_t *drop[SEGMENT_CACHE_MAX];
    lock_acquire(&cache_lock);
    size_t n = cache_count;
    memcpy(drop, cache, n * sizeof drop[0]);
    cache_count = 0;
    segment_t *chain = overflow_first;
    overflow_first = overflow_last = NULL;
    overflow_count = 0;
    cache_entries_update();
    lock_release(&cache_lock);
    for (size_t i = 0; i < n; i++)
        segment_unmap(drop[i]);
    segment_unmap_chain(chain);
    bool spare = segment_spare_bytes() != 0; /* the last region's untouched rest, the blank */
    region_decay(0, true);
    return n > 0 || chain != NULL || spare;
}

/* Under cache_lock: take `seg` off the overflow list. */
static void overflow_unlink(segment_t *seg)
{
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        overflow_first = seg->next;
    if (seg->next)
        seg->next->prev = seg->prev;
    else
        overflow_last = seg->prev;
    overflow_count--;
    seg->next = seg->prev = NULL;
}

/* A cached segment for reuse: the overflow list's newest first (it goes
 * soonest otherwise), then the cache's newest. */
static segment_t *segment_cache_pop(void)
{
    segment_t *seg = NULL;
    lock_acquire(&cache_lock);
    if (overflow_last) {
        seg = overflow_last;
        overflow_unlink(seg);
    } else if (cache_count > 0) {
        seg = cache[--cache_count];
    }
    cache_entries_update();
    lock_release(&cache_lock);
    return seg;
}

static uint64_t slices_runs(uint64_t mask, size_t count, size_t align);

/* Slices of `seg` that are free and still resident (freed, not purged). */
static uint64_t resident_free(const segment_t *seg)
{
    return atomic_load_explicit(&seg->free_slices, memory_order_relaxed) &
           atomic_load_explicit(&seg->dirty_slices, memory_order_relaxed);
}

/* A cached segment with a run of `count` resident (freed, not purged) free
 * slices, or NULL: taken off the cache. The overflow list first, newest
 * first, then the cache, newest first. */
static segment_t *segment_cache_pop_resident(size_t count, size_t align)
{
    if (atomic_load_explicit(&cache_entries, memory_order_relaxed) == 0)
        return NULL;
    segment_t *found = NULL;
    lock_acquire(&cache_lock);
    for (segment_t *seg = overflow_last; seg && !found; seg = seg->prev) {
        if (slices_runs(resident_free(seg), count, align)) {
            found = seg;
            overflow_unlink(seg);
        }
    }
    for (size_t i = cache_count; i-- > 0 && !found;) {
        segment_t *seg = cache[i];
        if (slices_runs(resident_free(seg), count, align)) {
            found = seg;
            cache_count--;
            memmove(&cache[i], &cache[i + 1], (cache_count - i) * sizeof cache[0]);
        }
    }
    cache_entries_update();
    lock_release(&cache_lock);
    return found;
}

/* ---------------------------------------------------------------------------
 * Heap ownership
 * ------------------------------------------------------------------------- */
static void heap_segment_push(heap_t *heap, segment_t *seg)
{
    atomic_store_explicit(&seg->exited_ms, 0, memory_order_relaxed);
    seg->owned_ms = os_now_ms();
    seg->heap = heap;
    seg->handoff_watch = false;
    seg->prev = NULL;
    seg->next = heap->segments;
    if (heap->segments)
        heap->segments->prev = seg;
    heap->segments = seg;
    heap->segment_count++;
    atomic_store_explicit(&seg->thread_id, heap->thread_id, memory_order_release);
}

static void heap_segment_remove(heap_t *heap, segment_t *seg)
{
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        heap->segments = seg->next;
    if (seg->next)
        seg->next->prev = seg->prev;
    seg->next = seg->prev = NULL;
    heap->segment_count--;
}

/* ---------------------------------------------------------------------------
 * Slice runs
 * ------------------------------------------------------------------------- */

/* The starts of runs of `count` consecutive set bits in `mask` at multiples
 * of `align` (a power of two): bit j is set iff bits j..j+count-1 of mask are
 * all set and j is a multiple of align. */
static uint64_t slices_runs(uint64_t mask, size_t count, size_t align)
{
    uint64_t runs = mask;
    for (size_t i = 1; i < count && runs; i++)
        runs &= mask >> i;
    if (align > 1) {
        uint64_t starts = 0;
        for (size_t i = 0; i < SLICES_PER_SEGMENT; i += align)
            starts |= (uint64_t)1 << i;
        runs &= starts;
    }
    return runs;
}

/* Where to claim `count` slices of `free` (-1: nowhere). With `resident_only`,
 * only a run whose slices are all dirty (freed, not purged yet: resident), so
 * a request reuses memory the process holds before touching fresh or purged
 * slices that would add to its RSS; otherwise the lowest run. */
static int slices_pick_run(uint64_t free, uint64_t dirty, size_t count, size_t align, bool resident_only)
{
    uint64_t runs = slices_runs(resident_only ? free & dirty : free, count, align);
    return runs ? __builtin_ctzll(runs) : -1;
}

static inline uint64_t run_mask(size_t idx, size_t count)
{
    uint64_t bits = count >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << count) - 1);
    return bits << idx;
}

/* Owner: claim a run of `count` free slices (all dirty, if `resident_only`);
 * returns the first index or -1. */
static int segment_claim_slices(segment_t *seg, size_t count, size_t align, bool resident_only)
{
    uint64_t old = atomic_load_explicit(&seg->free_slices, memory_order_acquire);
    for (;;) {
        uint64_t dirty = resident_only ? atomic_load_explicit(&seg->dirty_slices, memory_order_relaxed) : 0;
        int idx = slices_pick_run(old, dirty, count, align, resident_only);
        if (idx < 0)
            return -1;
        uint64_t want = old & ~run_mask((size_t)idx, count);
        if (atomic_compare_exchange_weak_explicit(&seg->free_slices, &old, want,
                                                  memory_order_acquire,
                                                  memory_order_acquire))
            return idx;
    }
}

/* Set up the descriptors of a freshly claimed run. */
static page_t *segment_run_init(segment_t *seg, size_t idx, size_t count)
{
    for (size_t i = 0; i < count; i++)
        seg->slice_offset[idx + i] = (uint8_t)i;
    page_t *page = &seg->pages[idx];
    page->slice_count = (uint8_t)count;
    uint64_t mask = run_mask(idx, count);
    /* Dirty slices were written and are still resident: the telemetry must
     * count them whole, not only what the new page carves (review finding:
     * 20 new small pages on a freed MiB of written slices, committed_bytes
     * 733184 while mincore found 1056768 bytes of the segment resident). */
    uint64_t dirty = atomic_fetch_and_explicit(&seg->dirty_slices, ~mask, memory_order_relaxed);
    if (dirty & mask)
        atomic_fetch_or_explicit(&seg->prewritten_slices, dirty & mask, memory_order_relaxed);
    atomic_fetch_and_explicit(&seg->dirty_old, ~mask, memory_order_relaxed);
    uint64_t fresh = atomic_fetch_and_explicit(&seg->fresh_slices, ~mask, memory_order_relaxed);
    page->is_zero = (fresh & mask) == mask;
    return page;
}

/* Mark a run dirty (or purge it now) and set its free bits: the purge
 * protocol's steps 1, 3 and 2 (purge.c). After this the caller must not touch
 * the segment: its owner may release and unmap it. */
static void segment_release_run(segment_t *seg, size_t idx, size_t count)
{
    uint64_t mask = run_mask(idx, count);
    /* Free, the run counts as dirty (or purged): no longer prewritten. */
    if (atomic_load_explicit(&seg->prewritten_slices, memory_order_relaxed) & mask)
        atomic_fetch_and_explicit(&seg->prewritten_slices, ~mask, memory_order_relaxed);
    if (purge_slices_at_free(seg, mask)) {
        /* Purge at once: the run is still ours until its free bits are set. */
        if (os_purge((uint8_t *)seg + idx * SLICE_SIZE, count * SLICE_SIZE))
            atomic_fetch_or_explicit(&seg->fresh_slices, mask, memory_order_relaxed);
    } else {
        /* Listed even with EBB_PURGE_DELAY=-1, when no pass runs on its own
         * (purge_wake does nothing), so that malloc_trim finds it. */
        atomic_fetch_or(&seg->dirty_slices, mask); /* seq_cst: pairs with the pass */
        purge_segment_dirty(seg);
    }
    atomic_fetch_or_explicit(&seg->free_slices, mask, memory_order_release);
}

/* The owner frees a run: reset its descriptors, then release it. */
void segment_free_run(page_t *page)
{
    segment_t *seg = page_segment(page);
    size_t idx = (size_t)(page - seg->pages);
    size_t count = page->slice_count;
    for (size_t i = 1; i < count; i++)
        seg->slice_offset[idx + i] = 0;
    page_trimmed_clear(page); /* the dropped blocks go back with the run */
    page->free = NULL;
    page->capacity = page->reserved = page->block_size = 0;
    page->used = 0;
    page->kind = PAGE_FREE;
    page->class_idx = 0;
    page->slice_count = 0;
    page->in_full = 0;
    page->is_zero = 0;
    page->next = page->prev = NULL;
    atomic_store_explicit(&page->xthread_free, 0, memory_order_relaxed);
    atomic_store_explicit(&page->heap, NULL, memory_order_relaxed);
    segment_release_run(seg, idx, count);
}

/* The owner, heap lock held, shrinks a large page to its first `keep` slices
 * (realloc to a smaller size, alloc.c): the rest is released as a free run,
 * dirty until the purge delay like any other (review finding: 64 blocks of
 * 2 MiB realloc'ed to 1.1 MB kept 61 MiB resident that glibc gave back). */
void segment_shrink_run(page_t *page, size_t keep)
{
    segment_t *seg = page_segment(page);
    size_t idx = (size_t)(page - seg->pages), count = page->slice_count;
    if (keep == 0 || keep >= count)
        return;
    for (size_t i = keep; i < count; i++)
        seg->slice_offset[idx + i] = 0;
    page->slice_count = (uint8_t)keep;
    page->block_size = (uint32_t)(keep * SLICE_SIZE);
    segment_release_run(seg, idx + keep, count - keep);
}

void segment_run_mark_prewritten(page_t *page, size_t bytes)
{
    segment_t *seg = page_segment(page);
    size_t count = (bytes + SLICE_SIZE - 1) / SLICE_SIZE;
    if (count > page->slice_count)
        count = page->slice_count;
    if (count == 0)
        return;
    /* Read first: a page that wanders between classes (seed 000) finds its
     * bits set already, and a locked read-modify-write costs it ~20 cycles. */
    uint64_t mask = run_mask((size_t)(page - seg->pages), count);
    if ((atomic_load_explicit(&seg->prewritten_slices, memory_order_relaxed) & mask) != mask)
        atomic_fetch_or_explicit(&seg->prewritten_slices, mask, memory_order_relaxed);
}

/* A thread that does not own the segment frees a large page. It must not
 * write the descriptors (the owner, or a thread reclaiming the segment, may
 * be reading them): the run's descriptors keep their stale values, which no
 * one reads while the slices are free (every walk checks free_slices first,
 * and a claim rewrites them). */
static void segment_free_large_run_remote(page_t *page)
{
    segment_t *seg = page_segment(page);
    segment_release_run(seg, (size_t)(page - seg->pages), page->slice_count);
}

/* The owner (or the scavenger on a quiesced heap): release every entirely
 * free segment of the heap, its last one too. */
void segment_release_empty(heap_t *heap)
{
    segment_t *next;
    for (segment_t *seg = heap->segments; seg; seg = next) {
        next = seg->next;
        if (atomic_load_explicit(&seg->free_slices, memory_order_acquire) == SLICES_ALL) {
            heap_segment_remove(heap, seg);
            segment_release(seg, 0);
        }
    }
}

void segment_maybe_release(heap_t *heap, segment_t *seg)
{
    if (heap->segment_count <= 1)
        return; /* keep the heap's last segment: the next page comes from it */
    if (atomic_load_explicit(&seg->free_slices, memory_order_acquire) != SLICES_ALL)
        return;
    heap_segment_remove(heap, seg);
    segment_release(seg, 0);
}

bool segment_cache_keeps(void)
{
    return option_get(OPT_PURGE_DELAY) > 0 ||
           atomic_load_explicit(&cache_entries, memory_order_relaxed) < SEGMENT_CACHE_MAX;
}

void segment_hand_off(heap_t *heap, segment_t *seg)
{
    heap_segment_remove(heap, seg);
    segment_release(seg, 0);
}

/* ---------------------------------------------------------------------------
 * Abandonment and reclaim
 * ------------------------------------------------------------------------- */
/* Whether a small page starts at slice i of `seg` (free_mask: its free
 * slices, read once by the caller). */
static inline bool small_page_at(const segment_t *seg, uint64_t free_mask, size_t i)
{
    return !((free_mask >> i) & 1) && seg->slice_offset[i] == 0 && seg->pages[i].kind == PAGE_SMALL;
}

/* The same, for a large page (a run of slices holding one block). */
static inline bool large_page_at(const segment_t *seg, uint64_t free_mask, size_t i)
{
    return !((free_mask >> i) & 1) && seg->slice_offset[i] == 0 && seg->pages[i].kind == PAGE_LARGE;
}

/* The classes with a small page that has room in `seg`, which nobody owns
 * (its pages' fields are stable: other threads only push remote frees). */
static uint64_t segment_room_mask(const segment_t *seg)
{
    uint64_t free_mask = atomic_load_explicit(&seg->free_slices, memory_order_acquire);
    uint64_t room = 0;
    for (size_t i = 1; i < SLICES_PER_SEGMENT; i++) {
        const page_t *page = &seg->pages[i];
        if (small_page_at(seg, free_mask, i) &&
            (page->used + page_dropped_count(page) < page->reserved ||
             (atomic_load_explicit(&page->xthread_free, memory_order_relaxed) & ~XTHREAD_FLAGS)))
            room |= (uint64_t)1 << page->class_idx;
    }
    return room;
}

static void abandoned_link_front(segment_t *seg)
{
    seg->prev = NULL;
    seg->next = abandoned_first;
    if (abandoned_first)
        abandoned_first->prev = seg;
    else
        abandoned_last = seg;
    abandoned_first = seg;
}

static void abandoned_link_back(segment_t *seg)
{
    seg->next = NULL;
    seg->prev = abandoned_last;
    if (abandoned_last)
        abandoned_last->next = seg;
    else
        abandoned_first = seg;
    abandoned_last = seg;
}

static void abandoned_list_remove(segment_t *seg)
{
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        abandoned_first = seg->next;
    if (seg->next)
        seg->next->prev = seg->prev;
    else
        abandoned_last = seg->prev;
    seg->next = seg->prev = NULL;
}

/* Put `seg` on the abandoned list with its room mask (computed here, under
 * the lock: a remote free that finds the segment off the list and pushes its
 * block first is counted, one that comes later finds it listed and records
 * its room itself, segment_abandoned_room_lock). At the front if it can
 * serve a reclaim, else at the back, so that reclaims looking at the front
 * find room (a thread that reclaimed full segments and mapped a new one used
 * to put the new one behind them, and the next thread mapped another: about
 * one segment per thread). */
static void abandoned_push_locked(segment_t *seg)
{
    uint64_t room = segment_room_mask(seg);
    seg->in_abandoned = 1;
    atomic_store_explicit(&seg->abandoned_room, room, memory_order_relaxed);
    room_counts_add(room, 1);
    atomic_fetch_add_explicit(&abandoned_count, 1, memory_order_relaxed);
    if (room != 0 || atomic_load_explicit(&seg->free_slices, memory_order_relaxed) != 0)
        abandoned_link_front(seg);
    else
        abandoned_link_back(seg);
}

void segment_abandon_all(heap_t *heap)
{
    bool abandoned_any = false;
    uint64_t now_ms = os_now_ms();
    uint64_t trim_wait_ms = purge_abandoned_trim_wait_ms();
    segment_t *seg = heap->segments;
    while (seg) {
        segment_t *next = seg->next;
        heap_segment_remove(heap, seg);
        if (atomic_load_explicit(&seg->free_slices, memory_order_acquire) == SLICES_ALL) {
            segment_release(seg, now_ms);
        } else {
            /* Before the push: once listed, the segment may be reclaimed,
             * emptied and unmapped by another thread at any moment. (`kept`
             * was cleared by heap_reset after this: a page kept, refilled and
             * still in use at exit had its flag written into a segment another
             * thread had reclaimed and released meanwhile; a review's stress
             * program crashed there 5 times in 16 runs.)
             * Step 4 of "whom a remote free tells" (page.c): each small page
             * in use, its heap cleared, then says it has no owner, in the
             * word remote freers CAS, so that one that looked before this
             * fails and looks again; a push that lands before the bit is
             * collected by the pass the touch below starts. (Only pages in
             * use: page_init_small does not reset the word, so a free run's
             * descriptor must keep the 0 that segment_free_run left in it.) */
            uint64_t free_mask = atomic_load_explicit(&seg->free_slices, memory_order_acquire);
            for (size_t i = 1; i < SLICES_PER_SEGMENT; i++) {
                atomic_store_explicit(&seg->pages[i].heap, NULL, memory_order_relaxed);
                atomic_store_explicit(&seg->pages[i].kept, 0, memory_order_relaxed);
                if (small_page_at(seg, free_mask, i))
                    page_mark_abandoned(&seg->pages[i]);
            }
            seg->heap = NULL;
            atomic_store_explicit(&seg->exited_ms, now_ms, memory_order_relaxed);
            /* A hold of its marked pages from before this thread took the
             * segment ends here if the thread kept it that hold's wait: its
             * own successors get theirs from this exit (trim_held_ms,
             * internal.h). A thread that kept it less does not extend the
             * hold. (Review finding: a hold started for the previous owner
             * trimmed them at the first pass after this exit.) */
            if (ms_since(now_ms, seg->owned_ms) >= trim_wait_ms)
                seg->trim_held_ms = 0;
            lock_acquire(&abandoned_lock);
            atomic_store_explicit(&seg->thread_id, 0, memory_order_release);
            abandoned_push_locked(seg);
            atomic_fetch_add_explicit(&segment_moves, 1, memory_order_relaxed);
            lock_release(&abandoned_lock);
            abandoned_any = true;
        }
        seg = next;
    }
    if (abandoned_any)
        segment_abandoned_touch();
}

static void abandoned_unlink(segment_t *seg)
{
    abandoned_list_remove(seg);
    seg->in_abandoned = 0;
    room_counts_add(atomic_load_explicit(&seg->abandoned_room, memory_order_relaxed), -1);
    atomic_fetch_sub_explicit(&abandoned_count, 1, memory_order_relaxed);
}

/* Set (seq_cst) when an abandoned segment may have something to give back:
 * its owner just left, or another thread freed a block into it. */
static atomic_int abandoned_dirty;

void segment_abandoned_touch(void)
{
    atomic_store(&abandoned_dirty, 1);
    purge_wake();
}

bool segment_abandoned_pending(void)
{
    return atomic_load(&abandoned_dirty) != 0;
}

/* Scavenger: walk the abandoned segments; in each, collect the blocks other
 * threads freed since its owner left, free the pages that became empty, and
 * release the segment if nothing is left in it. A segment is taken off the
 * list while it is worked on, so no thread can reclaim it meanwhile; a remote
 * free of a large page then finds it off the list and only releases its run.
 *
 * Its marked pages (sparse_watch: free blocks under live ones) are trimmed
 * only once it has stayed abandoned for `trim_quiet_ms`, the quiet a live
 * heap needs for the same trim (heap_sparse_idle_ms): an exited thread is a
 * thread idle since its exit. Until then the list stays dirty, so a later
 * pass comes back. Trimmed at the first pass, as before, the pages of a
 * thread that had just exited went back and were faulted in again by the
 * thread that reclaimed the segment a moment later: threads started in
 * waves of 200 and joined (bench_waves) had 490-710 MiB of such pages
 * trimmed a run, the most of any purge after the free slices' own. */
static atomic_long collect_pause_ms; /* tests: widen the window before the put-back */

void segment_abandoned_collect(uint64_t now_ms, uint64_t trim_quiet_ms, bool force)
{
    if (!atomic_exchange(&abandoned_dirty, 0) && !force)
        return;
    segment_t *done = NULL; /* worked on, to put back */
    bool trims_wait = false; /* a segment's trim waits for a later pass */
    for (;;) {
        lock_acquire(&abandoned_lock);
        segment_t *seg = abandoned_first;
        if (seg)
            abandoned_unlink(seg);
        lock_release(&abandoned_lock);
        if (seg == NULL)
            break;
        uint64_t free_mask = atomic_load_explicit(&seg->free_slices, memory_order_acquire);
        /* The segment is off the list: ours to trim. malloc_trim trims every
         * page with live blocks; a pass, those that had blocks freed into
         * them since they were last full, once its owner has been gone
         * trim_quiet_ms, or the hold started trim_quiet_ms ago (trim_held_ms,
         * internal.h), whoever exits meanwhile. */
        uint64_t since = atomic_load_explicit(&seg->exited_ms, memory_order_relaxed);
        bool trim = force || ms_since(now_ms, since) >= trim_quiet_ms ||
                    (seg->trim_held_ms != 0 && ms_since(now_ms, seg->trim_held_ms) >= trim_quiet_ms);
        bool held = false;
        os_purge_batch_t batch;
        os_purge_batch_init(&batch);
        for (size_t i = 1; i < SLICES_PER_SEGMENT; i++) {
            if (small_page_at(seg, free_mask, i) && !page_collect_abandoned(&seg->pages[i])) {
                if (force)
                    page_trim(&seg->pages[i], &batch);
                else if (trim)
                    page_trim_if_watched(seg, i, &batch);
                else
                    held |= (seg->sparse_watch >> i) & 1;
            }
        }
        if (!held)
            seg->trim_held_ms = 0;
        else if (seg->trim_held_ms == 0)
            seg->trim_held_ms = now_ms;
        trims_wait |= held;
        os_purge_flush(&batch); /* before the segment is listed again */
        lock_acquire(&abandoned_lock);
        bool empty = atomic_load_explicit(&seg->free_slices, memory_order_acquire) == SLICES_ALL;
        if (!empty) {
            seg->next = done;
            done = seg;
        }
        lock_release(&abandoned_lock);
        if (empty)
            segment_release(seg, since);
    }
    if (trims_wait)
        atomic_store(&abandoned_dirty, 1); /* not segment_abandoned_touch: no wake-up, the
                                            * caller is the pass and reads it as pending */
    long pause = atomic_load_explicit(&collect_pause_ms, memory_order_relaxed);
    if (ebb_unlikely(pause > 0) && done)
        os_sleep_ms(pause);
    /* Put back the segments that still hold live blocks, with their room as
     * the collection left it, and release those that hold none any more: a
     * large block another thread freed while the segment was off the list
     * only had its run released (segment_free_large_remote), and left the
     * segment entirely free. (Review finding: such a segment stayed listed,
     * 4 MiB of address space and a header page, until some later free into
     * an abandoned segment started another pass.) A large remote free that
     * finds the segment abandoned changes free_slices under abandoned_lock
     * (one that found it owned ORs without the lock, and touches the list
     * after), and a purge pass that gives back slices it held touches the
     * list too (segment_freed_under_a_hold), so a segment pushed back here
     * does not stay listed once it is entirely free. */
    while (done) {
        segment_t *seg = done;
        done = seg->next;
        lock_acquire(&abandoned_lock);
        bool empty = atomic_load_explicit(&seg->free_slices, memory_order_acquire) == SLICES_ALL;
        if (!empty)
            abandoned_push_locked(seg);
        lock_release(&abandoned_lock);
        if (empty)
            segment_release(seg, atomic_load_explicit(&seg->exited_ms, memory_order_relaxed));
    }
}

void segment_inject_collect_pause(long ms)
{
    atomic_store(&collect_pause_ms, ms);
}

bool segment_abandoned_room_unknown(const segment_t *seg, unsigned cls)
{
    return !((atomic_load_explicit(&seg->abandoned_room, memory_order_relaxed) >> cls) & 1);
}

/* A full abandoned segment that other threads free into gains room only
 * here: before this, a listed segment kept the mask it was pushed with, and
 * a thread whose blocks filled a segment, all freed by main after it exited,
 * left a segment no reclaim would take (review finding: with
 * EBB_PURGE_DELAY=-1, 200 such threads held 202 segments and 790 MiB). The
 * room is recorded before the caller's block lands, while the caller's block
 * still keeps the segment alive: once it is pushed, the segment may be
 * reclaimed, emptied and unmapped (the lock does not stop an owner). Until
 * the unlock nobody can reclaim it, and by then the block is there. */
void segment_abandoned_room_lock(segment_t *seg, unsigned cls)
{
    lock_acquire(&abandoned_lock);
    uint64_t room = atomic_load_explicit(&seg->abandoned_room, memory_order_relaxed);
    if (seg->in_abandoned && !((room >> cls) & 1)) {
        atomic_store_explicit(&seg->abandoned_room, room | (uint64_t)1 << cls, memory_order_relaxed);
        room_counts_add((uint64_t)1 << cls, 1);
        abandoned_list_remove(seg);
        abandoned_link_front(seg);
    }
}

void segment_abandoned_room_unlock(void)
{
    lock_release(&abandoned_lock);
}

/* `cls` for segment_reclaim: a class, RECLAIM_RUN (a free run of `count`
 * slices), RECLAIM_RESIDENT_RUN (the same, all of it resident: freed, not
 * purged) or RECLAIM_ANY_ROOM (a page of any class with room: adopting it
 * frees the pages whose blocks were all freed by other threads, which may
 * make the run). */
#define RECLAIM_RUN CLASS_COUNT
#define RECLAIM_ANY_ROOM (CLASS_COUNT + 1)
#define RECLAIM_RESIDENT_RUN (CLASS_COUNT + 2)

static bool segment_can_serve(const segment_t *seg, unsigned cls, size_t count, size_t align)
{
    uint64_t room = atomic_load_explicit(&seg->abandoned_room, memory_order_relaxed);
    if (cls < CLASS_COUNT)
        return (room >> cls) & 1;
    if (cls == RECLAIM_ANY_ROOM)
        return room != 0;
    if (cls == RECLAIM_RESIDENT_RUN)
        return slices_runs(resident_free(seg), count, align) != 0;
    uint64_t free_mask = atomic_load_explicit(&seg->free_slices, memory_order_relaxed);
    return slices_runs(free_mask, count, align) != 0;
}

/* Move the segments in front of `seg` to the back of the list. */
static void abandoned_rotate_before(segment_t *seg)
{
    segment_t *first = abandoned_first, *last = seg->prev;
    seg->prev = NULL;
    abandoned_first = seg;
    last->next = NULL;
    first->prev = abandoned_last;
    abandoned_last->next = first;
    abandoned_last = last;
}

/* Take into `heap` the first of the first RECLAIM_SCAN_MAX abandoned segments
 * that can serve `cls` (see segment_can_serve) and adopt its small pages;
 * NULL if none. A class reclaim that finds none where the per-class count
 * says one is listed moves the segments it looked at to the back, so the
 * next one looks further, each holding the lock for a bounded scan. (Review
 * findings: looking at the first 64 only, 120 waves of threads in 20 size
 * classes held 428 segments with no purge; scanning to the end, each new
 * page of a class whose segment sat behind 2000 others cost 18,900
 * instructions, all under the global lock.) */
static segment_t *segment_reclaim(heap_t *heap, unsigned cls, size_t count, size_t align)
{
    if (atomic_load_explicit(&abandoned_count, memory_order_relaxed) == 0)
        return NULL; /* the common case: no thread left live blocks behind */
    if (cls < CLASS_COUNT && atomic_load_explicit(&abandoned_with_room[cls], memory_order_relaxed) == 0)
        return NULL; /* none has room for this class: do not scan on every new page */
    lock_acquire(&abandoned_lock);
    segment_t *seg = abandoned_first;
    for (int n = 0; seg && !segment_can_serve(seg, cls, count, align); seg = seg->next) {
        if (++n == RECLAIM_SCAN_MAX) {
            if (cls < CLASS_COUNT && seg->next)
                abandoned_rotate_before(seg->next);
            seg = NULL;
            break;
        }
    }
    if (seg) {
        abandoned_unlink(seg);
        /* Its large pages are the new owner's too, named before the owner
         * is published: a remote free of one (segment_free_large_remote)
         * that sees the segment owned tells the heap it reads there, so
         * that an idle owner left with an entirely free segment releases
         * it (review finding: left NULL since the abandonment, the free
         * told no one, and a sleeping reclaimer kept 4 MiB for good). */
        uint64_t free_now = atomic_load_explicit(&seg->free_slices, memory_order_acquire);
        for (size_t i = 1; i < SLICES_PER_SEGMENT; i++) {
            if (large_page_at(seg, free_now, i))
                atomic_store_explicit(&seg->pages[i].heap, heap, memory_order_release);
        }
        heap_segment_push(heap, seg); /* thread_id set under the lock */
        atomic_fetch_add_explicit(&segment_moves, 1, memory_order_relaxed);
    }
    lock_release(&abandoned_lock);
    if (seg == NULL)
        return NULL;
    uint64_t free_mask = atomic_load_explicit(&seg->free_slices, memory_order_acquire);
    for (size_t i = 1; i < SLICES_PER_SEGMENT; i++) {
        if (small_page_at(seg, free_mask, i))
            page_adopt(heap, &seg->pages[i]);
    }
    return seg;
}

/* Owner, lock held: has one of the heap's segments a run of `count` free
 * slices still resident (freed, not purged)? Then a page carved there costs
 * no new memory, and an abandoned segment, which brings every slice its
 * thread freed, is better left to a thread that has none (page.c,
 * page_take_reclaimed). A walk of the heap's segments, on the path that is
 * about to carve a new page anyway, and only while some abandoned segment
 * has room for the class. */
static bool heap_has_resident_run(const heap_t *heap, size_t count)
{
    for (segment_t *seg = heap->segments; seg; seg = seg->next) {
        if (slices_runs(resident_free(seg), count, 1))
            return true;
    }
    return false;
}

bool segment_reclaim_for_class(heap_t *heap, unsigned cls)
{
    if (atomic_load_explicit(&abandoned_count, memory_order_relaxed) == 0 ||
        atomic_load_explicit(&abandoned_with_room[cls], memory_order_relaxed) == 0)
        return false;
    if (heap_has_resident_run(heap, class_slice_count[cls]))
        return false;
    return segment_reclaim(heap, cls, 0, 0) != NULL;
}

/* A large page freed by a thread that is not its segment's owner. */
void segment_free_large_remote(segment_t *seg, page_t *page)
{
    bool owned = atomic_load_explicit(&seg->thread_id, memory_order_acquire) != 0;
    if (ebb_unlikely(tls.remote_free_pause_ms != 0))
        page_remote_free_pause(); /* tests: the owner exits, or a reclaim comes, here */
    if (owned) {
        /* Owned by a live thread when we looked: the OR is our last access.
         * If that leaves the segment entirely free and the owner sleeps,
         * only the scavenger will release it (heap_scavenge): tell it,
         * through the owner's heap (read before the OR; heaps are never
         * unmapped). The owner may have exited since we looked: its exit
         * touched the abandoned list before our OR, and that pass may have
         * found the segment still in use, so touch it again (one flag);
         * else the segment, entirely free, stayed listed until some other
         * touch (review finding; test_purge_hooks). */
        heap_t *heap = atomic_load_explicit(&page->heap, memory_order_acquire);
        segment_free_large_run_remote(page);
        if (heap)
            atomic_store(&heap->remote_pending, 1);
        segment_abandoned_touch(); /* and purge_wake */
        return;
    }
    /* Abandoned when we looked (or being reclaimed, or cached: it cannot be
     * cached, the page is live). Under the lock the segment cannot be
     * reclaimed and released behind our back. One reclaimed since we looked
     * named its new owner in its large pages before it let the lock go: tell
     * that heap, read before the OR (an idle reclaimer with an entirely free
     * segment would otherwise keep it). Off the list but not reclaimed (the
     * scavenger's pass holds it), the heap is NULL, and the pass sees the
     * run. */
    lock_acquire(&abandoned_lock);
    heap_t *new_owner = seg->in_abandoned ? NULL : atomic_load_explicit(&page->heap, memory_order_acquire);
    segment_free_large_run_remote(page);
    if (new_owner) {
        atomic_store(&new_owner->remote_pending, 1);
        purge_wake();
    }
    bool release = false;
    if (seg->in_abandoned &&
        atomic_load_explicit(&seg->free_slices, memory_order_acquire) == SLICES_ALL) {
        abandoned_unlink(seg);
        release = true;
    } else if (seg->in_abandoned && seg != abandoned_first) {
        abandoned_list_remove(seg); /* it has a free run now: where reclaims look */
        abandoned_link_front(seg);
    }
    lock_release(&abandoned_lock);
    if (release) /* its owner's exit still counts: ABANDONED_KEEP_FACTOR */
        segment_release(seg, atomic_load_explicit(&seg->exited_ms, memory_order_relaxed));
}

/* ---------------------------------------------------------------------------
 * Allocating a run for a heap
 * ------------------------------------------------------------------------- */
/* Give `heap` an entirely free segment (cached or new) and claim a run in it.
 * A purge pass may hold its free slices for a moment (segment_purge claims
 * them around madvise): wait for it. A cached segment may have resident
 * slices (one handed off, page.c): those first. */
static page_t *segment_adopt_run(heap_t *heap, segment_t *seg, size_t count, size_t align_slices)
{
    heap_segment_push(heap, seg);
    int idx = segment_claim_slices(seg, count, align_slices, true);
    while (idx <= 0 && (idx = segment_claim_slices(seg, count, align_slices, false)) <= 0)
        os_yield();
    return segment_run_init(seg, (size_t)idx, count);
}

static page_t *segment_alloc_run_try(heap_t *heap, size_t count, size_t align_slices)
{
    /* Resident slices first: in any of the heap's segments, then in a cached
     * segment (one another thread handed off, page.c), then in an abandoned
     * one (reclaimed for it); then the lowest free run of the heap's
     * segments. (Taking the lowest run first made a thread that frees and
     * allocates 64..512 KiB blocks fault in fresh slices while the ones it
     * had just freed waited for the purge: its peak RSS grew to ~2.7x its
     * live bytes. Taking its own fresh slices before a cached segment's
     * resident ones: seed "medium" peaked at 30 MiB instead of 21, median
     * of 7 runs. Before an abandoned segment's: 200 short-lived threads at
     * a time, each allocating blocks of up to 512 KiB, faulted fresh slices
     * in while those their predecessors freed waited for the purge, a
     * sixth more page faults; docs/memory-return.md, "Threads that come
     * and go".) A heap with no segment reclaims abandoned ones first, as
     * before, then takes the newest cached segment, resident slices first
     * (below). */
    for (int pass = 0; pass < 2; pass++) {
        for (segment_t *seg = heap->segments; seg; seg = seg->next) {
            int idx = segment_claim_slices(seg, count, align_slices, pass == 0);
            if (idx > 0)
                return segment_run_init(seg, (size_t)idx, count);
        }
        if (pass == 0 && heap->segments != NULL) {
            segment_t *seg = segment_cache_pop_resident(count, align_slices);
            if (seg)
                return segment_adopt_run(heap, seg, count, align_slices);
            /* Reclaimed, the segment is the heap's: if a purge pass took
             * the run meanwhile, pass 1 may still carve there. */
            seg = segment_reclaim(heap, RECLAIM_RESIDENT_RUN, count, align_slices);
            if (seg) {
                int idx = segment_claim_slices(seg, count, align_slices, true);
                if (idx > 0)
                    return segment_run_init(seg, (size_t)idx, count);
            }
        }
    }
    for (int i = 0; i < RECLAIM_MAX_PER_REQUEST; i++) {
        segment_t *seg = segment_reclaim(heap, RECLAIM_RUN, count, align_slices);
        if (seg == NULL && i == 0) /* one try: the heap keeps it even if no run comes free */
            seg = segment_reclaim(heap, RECLAIM_ANY_ROOM, 0, 0);
        if (seg == NULL)
            break;
        int idx = segment_claim_slices(seg, count, align_slices, false);
        if (idx > 0)
            return segment_run_init(seg, (size_t)idx, count);
    }
    segment_t *seg = segment_cache_pop();
    if (seg == NULL)
        seg = segment_map_new();
    if (seg == NULL)
        return NULL;
    return segment_adopt_run(heap, seg, count, align_slices);
}

/* The length, up to `most`, of the longest run of set bits in `mask`. */
static size_t longest_run(uint64_t mask, size_t most)
{
    size_t len = 0;
    for (uint64_t runs = mask; runs != 0 && len < most; runs &= mask >> len)
        len++;
    return len;
}

page_t *segment_alloc_resident_run(heap_t *heap, size_t least, size_t most)
{
    segment_t *best = NULL;
    size_t best_len = 0;
    for (segment_t *seg = heap->segments; seg != NULL && best_len < most; seg = seg->next) {
        uint64_t resident = atomic_load_explicit(&seg->free_slices, memory_order_relaxed) &
                            atomic_load_explicit(&seg->dirty_slices, memory_order_relaxed);
        size_t len = longest_run(resident, most);
        if (len >= least && len > best_len) {
            best = seg;
            best_len = len;
        }
    }
    if (best == NULL)
        return NULL;
    /* A pass may have claimed those slices to purge them since: then none. */
    int idx = segment_claim_slices(best, best_len, 1, true);
    return idx > 0 ? segment_run_init(best, (size_t)idx, best_len) : NULL;
}

page_t *segment_alloc_run(heap_t *heap, size_t count, size_t align_slices)
{
    page_t *page = segment_alloc_run_try(heap, count, align_slices);
    if (ebb_unlikely(page == NULL)) {
        /* The OS refused a new segment, even after the caches went back
         * (segment_map_new). What else this heap holds free becomes runs
         * first: its empty pages (the one kept per class too) and the
         * blocks other threads freed into its pages, not collected yet
         * (a class's pages are collected only when it needs one). */
        heap_collect_pages(heap, true);
        page = segment_alloc_run_try(heap, count, align_slices);
    }
    return page;
}

/* ---------------------------------------------------------------------------
 * Purging free slices (called by the purge pass, purge.c)
 * ------------------------------------------------------------------------- */
static atomic_long purge_pause_ms; /* tests: widen the window before the slices go back */

void segment_inject_purge_pause(long ms)
{
    atomic_store(&purge_pause_ms, ms);
}

/* While a pass holds free slices (claimed for their madvise), the segment
 * does not read as entirely free: whoever emptied it meanwhile (its owner's
 * last free, a remote free of its last large block, a collect pass) saw
 * slices in use and left it where it was. The pass's give-back made it
 * entirely free: tell whoever releases it. Its owner, through its heap (the
 * scavenger's next visit releases it if the owner stays idle, and asks a
 * busy owner to collect after a while: heap_scavenge), and the abandoned
 * list's pass: an
 * abandoned segment's, or one whose owner exits around the read of
 * thread_id (its exit lists the segment and touches the list itself, and
 * the pass that serves either touch runs after this one, so after the OR);
 * a touch for nothing otherwise. (Review finding: an abandoned
 * segment emptied during a pass stayed listed, 4 MiB of address space and
 * a header page, until some unrelated exit or free; an idle thread kept a
 * second, entirely free segment.) The pass's purge_busy keeps the segment
 * mapped meanwhile (purge_segment_forget). Only for a segment emptied
 * during the hold: one entirely free before it (a cached segment, a heap's
 * last one) had no emptying to miss. Returns the owner's id (0: none), for
 * the caller to tell once the segment is no longer pinned: heap_tell_owners
 * takes heap_pool_lock, whose holders may wait for purge_busy
 * (segment_unmap -> purge_segment_forget), a deadlock (review finding). */
static uintptr_t segment_freed_under_a_hold(segment_t *seg)
{
    segment_abandoned_touch(); /* and purge_wake */
    return atomic_load(&seg->thread_id);
}

bool segment_purge(segment_t *seg, uint64_t now_ms, uint64_t keep_ms, bool force, uintptr_t *tell)
{
    uint64_t dirty = atomic_load(&seg->dirty_slices);
    uint64_t want = force ? dirty : dirty & atomic_load_explicit(&seg->dirty_old, memory_order_relaxed);
    /* An exited thread's slices wait for its successors (ABANDONED_KEEP_FACTOR):
     * keep_ms from the exit, and at most keep_ms from the pass that first held
     * them, however many owners exit meanwhile. A hold takes the slices dirty
     * when it starts (purge_held_mask); once its time is up those still dirty
     * (no successor took them) are purged, and slices freed since wait for
     * the next hold, which starts when none of the first is left: a slice is
     * held two keeps at most. Held slices stay dirty, the segment stays
     * listed, and a later pass comes back. */
    uint64_t exited = atomic_load_explicit(&seg->exited_ms, memory_order_relaxed);
    if (!force && dirty != 0 && exited != 0 && ms_since(now_ms, exited) < keep_ms) {
        uint64_t held = seg->purge_held_mask & dirty;
        if (held == 0) {
            held = seg->purge_held_mask = dirty;
            seg->purge_held_ms = now_ms;
        }
        want &= ms_since(now_ms, seg->purge_held_ms) < keep_ms ? 0 : held;
    } else {
        seg->purge_held_mask = 0; /* no hold: a later one starts afresh */
    }
    /* Claim the wanted slices that are free, so no owner allocates them while
     * they are purged; dirty slices not free yet belong to a free in progress. */
    uint64_t got = 0, free_before = 0;
    if (want) {
        uint64_t old = atomic_load_explicit(&seg->free_slices, memory_order_acquire);
        do {
            got = old & want;
        } while (got && !atomic_compare_exchange_weak_explicit(&seg->free_slices, &old, old & ~got,
                                                               memory_order_acquire,
                                                               memory_order_acquire));
        free_before = old;
    }
    if (got) {
        /* The runs in one batch: a segment has at most 32 (os.c, "Batched
         * purges": 6,208 runs of 128 KiB, one madvise each, were most of
         * the 1.6 s an idle trim of 1.1 GB took). */
        os_purge_batch_t batch;
        os_purge_batch_init(&batch);
        uint64_t todo = got;
        while (todo) {
            size_t start = (size_t)__builtin_ctzll(todo);
            uint64_t rest = ~(todo >> start); /* ones from the end of the run on */
            size_t len = rest ? (size_t)__builtin_ctzll(rest) : 64 - start;
            os_purge_add(&batch, (uint8_t *)seg + start * SLICE_SIZE, len * SLICE_SIZE);
            todo &= ~run_mask(start, len);
        }
        if (os_purge_flush(&batch))
            atomic_fetch_or_explicit(&seg->fresh_slices, got, memory_order_relaxed);
        long pause = atomic_load_explicit(&purge_pause_ms, memory_order_relaxed);
        if (ebb_unlikely(pause > 0))
            os_sleep_ms(pause);
        atomic_fetch_and(&seg->dirty_slices, ~got);
        if ((atomic_fetch_or(&seg->free_slices, got) | got) == SLICES_ALL && free_before != SLICES_ALL)
            *tell = segment_freed_under_a_hold(seg);
    }
    dirty = atomic_load(&seg->dirty_slices);
    atomic_store_explicit(&seg->dirty_old, dirty, memory_order_relaxed);
    if (dirty == 0)
        seg->purge_held_mask = 0; /* nothing held: the next hold starts afresh */
    return dirty != 0;
}

/* ---------------------------------------------------------------------------
 * The walk (stats.c). Descriptors are read without the owners' help: the
 * result is exact only when other threads are quiescent.
 * ------------------------------------------------------------------------- */
void segment_for_each(void (*fn)(segment_t *seg, void *arg), void *arg)
{
    lock_acquire(&segments_lock);
    for (segment_t *seg = all_segments; seg; seg = seg->all_next)
        fn(seg, arg);
    lock_release(&segments_lock);
}

void segment_for_each_page(segment_t *seg, void (*fn)(page_t *page, void *arg), void *arg)
{
    uint64_t free_mask = atomic_load_explicit(&seg->free_slices, memory_order_acquire);
    for (size_t i = 1; i < SLICES_PER_SEGMENT; i++) {
        page_t *page = &seg->pages[i];
        if (!((free_mask >> i) & 1) && seg->slice_offset[i] == 0)
            fn(page, arg);
    }
}

void segment_for_each_abandoned(void (*fn)(segment_t *seg, void *arg), void *arg)
{
    lock_acquire(&abandoned_lock);
    for (segment_t *seg = abandoned_first; seg; seg = seg->next)
        fn(seg, arg);
    lock_release(&abandoned_lock);
}

void segment_counts(size_t *cached, size_t *abandoned)
{
    lock_acquire(&cache_lock);
    *cached = cache_count + overflow_count;
    lock_release(&cache_lock);
    size_t n = 0;
    lock_acquire(&abandoned_lock);
    for (segment_t *seg = abandoned_first; seg; seg = seg->next)
        n++;
    lock_release(&abandoned_lock);
    *abandoned = n;
}

/* ---------------------------------------------------------------------------
 * Fork
 * ------------------------------------------------------------------------- */
void segment_fork_lock(void)
{
    lock_acquire(&abandoned_lock);
    lock_acquire(&cache_lock);
    lock_acquire(&segments_lock);
    lock_acquire(&region_lock);
}

void segment_fork_unlock(void)
{
    lock_release(&region_lock);
    lock_release(&segments_lock);
    lock_release(&cache_lock);
    lock_release(&abandoned_lock);
}
