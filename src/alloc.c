/*
 * alloc.c — the ebb_ allocation API: size classes, the generic allocation and
 * free paths, aligned allocation, calloc, realloc and usable size.
 *
 * Three kinds of block:
 *   small  <= SMALL_MAX (128 KiB): a block of a size class in a small page;
 *   large  <= LARGE_MAX (2 MiB):   a run of 64 KiB slices of its own;
 *   huge   above:                  its own mapping (large.c).
 *
 * Alignment without interior pointers. A page starts on a 64 KiB boundary and
 * block i sits at start + i * block_size, so every block of a class whose size
 * is a multiple of A is A-aligned (A <= 64 KiB). An aligned request takes the
 * smallest class that is both big enough and a multiple of A — usually the
 * request rounded up to A, never a whole extra block — and free needs no
 * special case. Larger alignments pick the start slice of a large run, or
 * place a huge block at the right offset of its mapping.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"

/* ---------------------------------------------------------------------------
 * Size classes
 * ------------------------------------------------------------------------- */
/* A per-class table: F applied to each class's block size, in class order.
 * The class tables below are all made by it, so they cannot disagree. */
#define CLASS_GROUP_OF(F, b) \
    F((1u << (b)) + (1u << ((b) - 2))), F((1u << (b)) + 2u * (1u << ((b) - 2))), \
    F((1u << (b)) + 3u * (1u << ((b) - 2))), F(1u << ((b) + 1))
#define CLASS_TABLE(F) \
    { \
        F(16), F(32), F(48), F(64), F(80), F(96), F(112), F(128), \
        CLASS_GROUP_OF(F, 7), CLASS_GROUP_OF(F, 8), CLASS_GROUP_OF(F, 9), \
        CLASS_GROUP_OF(F, 10), CLASS_GROUP_OF(F, 11), CLASS_GROUP_OF(F, 12), \
        CLASS_GROUP_OF(F, 13), CLASS_GROUP_OF(F, 14), CLASS_GROUP_OF(F, 15), \
        CLASS_GROUP_OF(F, 16), \
    }
#define BLOCK_SIZE(bs) (bs)

const uint32_t class_block_size[CLASS_COUNT] = CLASS_TABLE(BLOCK_SIZE);

/* Slices per small page: enough for PAGE_MIN_BLOCKS blocks (1 slice for blocks
 * up to 8 KiB, 3 for 20 KiB blocks), or PAGE_DIRECT_MIN_BLOCKS up to
 * DIRECT_MAX (2 slices for blocks of 640 B to 1 KiB); a block above one slice
 * gets a page of its own (2 slices). Pages of eight such blocks were 10 to 16
 * slices long: a thread holding a few blocks of 64..512 KiB spread its pages
 * over a second and third segment and touched fresh memory there, while its freed runs
 * waited for the purge (the seed `medium` scenario peaked at 44 MiB for 18
 * MiB live; 34 MiB with one-block pages).
 * Blocks from PAGE_WIDE_MIN (24 KiB) up to one slice get PAGE_MAX_SLICES (512
 * KiB: 21 blocks of 24 KiB, 8 of 64 KiB). With eight blocks to a page, a few
 * live blocks per class kept their pages filling, emptying, going back to the
 * segment and coming back elsewhere, and the thread wrote over ever more of
 * its segments; and a kept 512 KiB page can serve any class that needs a new
 * page (page.c, page_take_retained), where a 3-slice one cannot serve the
 * 8-slice classes. Measured against eight-block pages (3 interleaved runs,
 * medians): bench_core rand 1024 65536 (64 live) 304 -> 158 ms and 9.5 ->
 * 6.8 MB peak; seed fastmm peak 1.68 -> 0.97 MiB; bench_realloc str 18.0 ->
 * 18.2 MB. From 16 KiB up: 5.8 MB, 0.91 MiB but 19.1 MB; from 32 KiB up: 8.6
 * MB, 1.15 MiB, 17.0 MB. Pages of 16 or 32 blocks for every class: realloc
 * str 20.1 and 22.2 MB (its strings move through every class, and a bigger
 * page empties, and goes back, less often). */
#define PAGE_SLICES_FOR(bs, blocks) (((size_t)(bs) * (blocks) + SLICE_SIZE - 1) / SLICE_SIZE)
#define PAGE_SLICES(bs) \
    ((uint8_t)((bs) > SLICE_SIZE     ? PAGE_SLICES_FOR(bs, 1) \
               : (bs) >= PAGE_WIDE_MIN ? PAGE_MAX_SLICES \
               : (bs) <= DIRECT_MAX    ? PAGE_SLICES_FOR(bs, PAGE_DIRECT_MIN_BLOCKS) \
                                       : PAGE_SLICES_FOR(bs, PAGE_MIN_BLOCKS)))
const uint8_t class_slice_count[CLASS_COUNT] = CLASS_TABLE(PAGE_SLICES);

/* Blocks in a page of the class's full length (class_slice_count): a page
 * taken up by a class (page.c, page_init_small) finds its count here, not by
 * a division (about 14-40 cycles), whenever its run has that length. */
#define PAGE_BLOCKS(bs) ((uint16_t)(PAGE_SLICES(bs) * SLICE_SIZE / (bs)))
const uint16_t class_page_blocks[CLASS_COUNT] = CLASS_TABLE(PAGE_BLOCKS);

_Static_assert(PAGE_SLICES(SMALL_MAX) <= PAGE_MAX_SLICES, "largest small page too big");

/* ---------------------------------------------------------------------------
 * Generic paths
 * ------------------------------------------------------------------------- */
static heap_t *heap_self(void)
{
    heap_t *heap = tls.heap;
    if (ebb_unlikely(heap == &heap_empty))
        heap = heap_get_or_create();
    return heap;
}

/* A run of slices for one block; `zero` clears it unless it is fresh.
 * *fresh (if not NULL): it reads as zero without having been cleared. */
static void *alloc_large(heap_t *heap, size_t size, size_t alignment, bool zero, bool *fresh)
{
    size_t slices = (size + SLICE_SIZE - 1) >> SLICE_SHIFT;
    size_t align_slices = alignment > SLICE_SIZE ? alignment >> SLICE_SHIFT : 1;
    lock_acquire(&heap->lock);
    heap_collect_if_asked(heap);
    page_t *page = segment_alloc_run(heap, slices, align_slices);
    if (page)
        page_init_large(heap, page, slices, page->is_zero);
    lock_release(&heap->lock);
    if (page == NULL)
        return NULL;
    void *p = page_start(page);
    if (zero && !page->is_zero)
        memset(p, 0, size);
    if (fresh)
        *fresh = page->is_zero;
    page->is_zero = false;
    return p;
}

/* Whatever the layout, size + alignment must stay addressable. */
static bool alloc_size_impossible(size_t size, size_t alignment)
{
    return size > PTRDIFF_MAX || alignment > PTRDIFF_MAX / 2 || size + alignment > PTRDIFF_MAX;
}

/* Any size, any power-of-two alignment (<= MIN_ALIGN means none). Sets errno.
 * In debug mode every allocation comes here (debug.c says why) but malloc's,
 * which goes from alloc_malloc_slow straight to debug_alloc. */
static void *alloc_generic(size_t size, size_t alignment, bool zero)
{
    /* Checked here too so an impossible request fails before any OS call
     * (the first call of a thread or process maps memory below). */
    if (ebb_unlikely(alloc_size_impossible(size, alignment))) {
        errno = ENOMEM;
        return NULL;
    }
    if (ebb_unlikely(tls.heap == &heap_empty)) {
        heap_process_init();
        if (debug_enabled)
            return debug_alloc(size, alignment, zero);
    }
    purge_poll(true);
    heap_t *heap = heap_self();
    if (ebb_unlikely(heap == NULL)) {
        errno = ENOMEM;
        return NULL;
    }
    return alloc_generic_in(heap, size, alignment, zero);
}

/* The failure contract (SPEC): before a request fails, what ebb holds that
 * could serve it goes back. Each mapping site gives back the caches when the
 * OS refuses (purge_release_caches), which does not reach the blocks other
 * threads freed into pages of heaps now idle or gone, nor the empty pages
 * those heaps keep: only a forced collection does, acting for their owners
 * (review finding: under RLIMIT_AS, malloc(200 MiB) failed after another
 * thread's 280 MiB of blocks had all been freed, and succeeded after
 * malloc_trim(0)). So once per failed request everything is collected, as
 * ebb_collect(true) does but for debug mode's quarantine and reuse cache
 * (heap_collect_before_failing), and the request is tried again. Not while this
 * thread holds a lock of ebb's (the collection takes the heaps' locks; a
 * caller inside a locked section gets its NULL), nor for a request no
 * mapping could serve. */
static bool alloc_collect_before_failing(size_t size)
{
    if (lock_any_held() || !os_size_mappable(size))
        return false;
    int saved_errno = errno;
    heap_collect_before_failing();
    errno = saved_errno;
    return true;
}

/* alloc_generic_at's one try: NULL when refused, errno untouched (the
 * paths below keep it: os.c's primitives do), so that a request served by
 * the second try leaves it as the caller had it, with no save on the way. */
static inline void *alloc_generic_try(heap_t *heap, size_t size, size_t alignment, bool zero,
                                      bool *fresh);

/* alloc_generic_in, and with `fresh` (not NULL; `zero` false): whether the
 * block reads as zero without being cleared (pages the OS just mapped or
 * purged), for a caller that clears only part of the block itself. */
static void *alloc_generic_at(heap_t *heap, size_t size, size_t alignment, bool zero, bool *fresh)
{
    if (ebb_unlikely(alloc_size_impossible(size, alignment))) {
        if (fresh)
            *fresh = false;
        errno = ENOMEM;
        return NULL;
    }
    void *p;
    /* One call site, so that the try is inlined once (debug mode allocates
     * every block through here). */
    for (bool collected = false;; collected = true) {
        p = alloc_generic_try(heap, size, alignment, zero, fresh);
        if (ebb_likely(p != NULL) || collected || !alloc_collect_before_failing(size))
            break;
    }
    if (p == NULL)
        errno = ENOMEM;
    return p;
}

static inline void *alloc_generic_try(heap_t *heap, size_t size, size_t alignment, bool zero,
                                      bool *fresh)
{
    if (fresh)
        *fresh = false;
    if (alignment < MIN_ALIGN)
        alignment = MIN_ALIGN;
    void *p = NULL;
    if (size <= SMALL_MAX && alignment <= SLICE_SIZE) {
        size_t want = size < alignment ? alignment : size;
        unsigned cls = size_class(want);
        while (cls < CLASS_COUNT && (class_block_size[cls] & (alignment - 1)) != 0)
            cls++;
        if (cls < CLASS_COUNT) {
            /* The page the class's slot names first, as malloc's fast path
             * takes it (the queue's first, or for a hot class the page of
             * the owner's last free: internal.h, PAGE_HOT): debug mode
             * allocates every block through here. */
            p = alloc_pop(&heap->direct_class[cls]);
            if (p == NULL)
                p = page_alloc_slow(heap, cls);
            if (p && zero)
                memset(p, 0, size);
            goto done;
        }
    }
    if (size <= LARGE_MAX && alignment <= LARGE_ALIGN_MAX) {
        p = alloc_large(heap, size ? size : 1, alignment, zero, fresh);
    } else {
        bool is_zero;
        p = huge_alloc(size, alignment, &is_zero);
        if (ebb_unlikely(p == NULL) && os_size_mappable(size)) {
            /* Refused even after the caches went back (huge_alloc): the
             * empty pages of this heap and the blocks other threads freed
             * into it may make whole segments free, whose address space
             * the mapping can then use (as segment_alloc_run does). */
            lock_acquire(&heap->lock);
            heap_collect_pages(heap, true);
            segment_release_empty(heap);
            lock_release(&heap->lock);
            p = huge_alloc(size, alignment, &is_zero);
        }
        if (p && zero && !is_zero)
            memset(p, 0, size);
        if (p && fresh)
            *fresh = is_zero;
    }
done:
    return p;
}

void *alloc_generic_in(heap_t *heap, size_t size, size_t alignment, bool zero)
{
    return alloc_generic_at(heap, size, alignment, zero, NULL);
}

void *alloc_generic_in_fresh(heap_t *heap, size_t size, size_t alignment, bool *fresh)
{
    return alloc_generic_at(heap, size, alignment, false, fresh);
}

/* malloc's fast path found no block in the page its slot names. The first
 * page of the class queue is tried here, without the lock (same busy window
 * and revocation check as the lock-free start of page_alloc_slow, heap.c
 * explains both): for a hot class the slot may have named another page, the
 * one the owner's last free went to (internal.h, PAGE_HOT). */
void *alloc_malloc_slow(size_t size)
{
    /* Debug mode's heap has no page for the fast path: every malloc comes
     * here, and straight on to debug.c. Through alloc_generic it took 42
     * more instructions a pair (two functions' register saves and checks
     * that lead there anyway): 3% of a debug pair (callgrind, docs/
     * debug-mode.md, "Cost"). debug_enabled is set only once the process is
     * initialised. */
    if (ebb_unlikely(debug_enabled))
        return debug_alloc(size, 0, false);
    heap_t *heap = tls.heap;
    if (ebb_likely(size <= SMALL_MAX && heap != &heap_empty)) {
        unsigned cls = size_class(size);
        busy_enter();
        if (ebb_likely(!atomic_load_explicit(&heap->revoked, memory_order_acquire))) {
            page_t *page = heap->queues[cls].first;
            if (ebb_likely(page != NULL && page->free != NULL)) {
                /* The slot may name another page of a hot class, the one a
                 * free pointed it at (alloc.h), now dry: back to the first. */
                atomic_store_explicit(&heap->direct_class[cls], page, memory_order_relaxed);
                block_t *block = page->free;
                page->free = block->next;
                page->used++;
                busy_leave();
                return block;
            }
        }
        busy_leave();
        void *p = page_alloc_slow(heap, cls);
        if (ebb_likely(p != NULL))
            return p;
        if (alloc_collect_before_failing(size) && (p = page_alloc_slow(heap, cls)) != NULL)
            return p; /* errno as the caller had it: neither call changes it */
        errno = ENOMEM;
        return NULL;
    }
    return alloc_generic(size, 0, false);
}

void free_generic(segment_t *seg, void *p)
{
    if (seg->kind == SEGMENT_HUGE) {
        huge_free(seg);
    } else {
        page_free_remote(seg, segment_page_of(seg, p), (block_t *)p);
    }
    purge_poll(false);
}

void alloc_release(heap_t *heap, void *p)
{
    segment_t *seg = ptr_segment(p);
    if (heap != NULL && alloc_free_owned(&heap, heap->thread_id, seg, p))
        return;
    free_generic(seg, p);
}

size_t alloc_usable_size(const void *p)
{
    segment_t *seg = ptr_segment(p);
    if (seg->kind == SEGMENT_HUGE)
        return huge_usable_size(seg);
    return segment_page_of(seg, p)->block_size;
}

/* ---------------------------------------------------------------------------
 * The ebb_ API
 * ------------------------------------------------------------------------- */
EBB_API const char *ebb_version(void)
{
#define EBB_STR2(x) #x
#define EBB_STR(x) EBB_STR2(x)
    return EBB_STR(EBB_VERSION_MAJOR) "." EBB_STR(EBB_VERSION_MINOR) "." EBB_STR(EBB_VERSION_PATCH);
}

EBB_API void *ebb_malloc(size_t size)
{
    return alloc_malloc_inline(size);
}

EBB_API void ebb_free(void *p)
{
    alloc_free_inline(p);
}

ebb_internal atomic_uint alloc_calloc_slow;

/* realloc to a smaller size that stays where it is: a large block (a run of
 * slices) gives the whole slices past the new size back to its segment, when
 * `heap` (the caller's own: tls.heap, or debug mode's) owns that segment
 * (another thread must not rewrite its descriptors). A block of another
 * owner keeps them until it is freed. */
static void alloc_shrink_large(heap_t *heap, segment_t *seg, void *p, size_t size)
{
    if (heap == NULL || heap == &heap_empty ||
        atomic_load_explicit(&seg->thread_id, memory_order_relaxed) != heap->thread_id)
        return;
    page_t *page = segment_page_of(seg, p);
    if (page->kind != PAGE_LARGE)
        return;
    lock_acquire(&heap->lock);
    segment_shrink_run(page, (size + SLICE_SIZE - 1) >> SLICE_SHIFT);
    lock_release(&heap->lock);
}

void alloc_shrink_in_place(heap_t *heap, void *p, size_t size)
{
    segment_t *seg = ptr_segment(p);
    if (seg->kind == SEGMENT_HUGE) {
        /* Unmaps the pages past the new size; a refusal (a VMA split the
         * kernel cannot make) leaves the mapping whole, and that is all. */
        int saved = errno;
        huge_realloc(seg, p, size);
        errno = saved;
        return;
    }
    if (alloc_usable_size(p) - size >= SLICE_SIZE)
        alloc_shrink_large(heap, seg, p, size);
}

/* calloc of more than DIRECT_MAX, or while alloc_calloc_slow asks for more
 * than the fast path. */
static ebb_noinline void *alloc_calloc_slow_path(size_t total, unsigned slow)
{
    /* Debug mode: through the generic path, so the block is zeroed instead
     * of filled and then zeroed, and its header says it was (debug.c). */
    if (total > DIRECT_MAX || (slow & CALLOC_DEBUG))
        return alloc_generic(total, 0, true);
    void *p = alloc_malloc_inline(total);
    if (p)
        memset(p, 0, total);
    /* No scavenger yet, and a thread wanted or the process threaded: this
     * may be glibc's calloc of a new thread's TLS vector, the one allocation
     * sure to follow a program's first pthread_create (purge.c, "solo"). */
    purge_poll_start();
    return p;
}

EBB_API void *ebb_calloc(size_t n, size_t size)
{
    size_t total;
    if (ebb_unlikely(__builtin_mul_overflow(n, size, &total))) {
        errno = ENOMEM;
        return NULL;
    }
    /* The fast path: no debug mode, and no scavenger to start (none wanted,
     * and either one runs or the process is still single-threaded). */
    unsigned slow = atomic_load_explicit(&alloc_calloc_slow, memory_order_relaxed);
    if (total <= DIRECT_MAX &&
        ebb_likely(slow == 0 || (slow == CALLOC_WATCH_THREADS && os_single_threaded()))) {
        void *p = alloc_malloc_inline(total);
        if (p)
            memset(p, 0, total);
        return p;
    }
    return alloc_calloc_slow_path(total, slow);
}

EBB_API void *ebb_realloc(void *p, size_t size)
{
    if (ebb_unlikely(debug_enabled))
        return debug_realloc(p, size);
    if (p == NULL)
        return alloc_malloc_inline(size);
    if (size == 0) {
        alloc_free_inline(p);
        return NULL;
    }
    if (ebb_unlikely(size > PTRDIFF_MAX)) {
        errno = ENOMEM;
        return NULL;
    }
    int saved_errno = errno;
    segment_t *seg = ptr_segment(p);
    if (seg->kind == SEGMENT_HUGE && size > LARGE_MAX) {
        void *q = huge_realloc(seg, p, size);
        if (q)
            return q;
        /* Not grown where it is nor moved: the address space after it is
         * taken and the mapping is several VMAs (large.c), or the OS
         * refused. The copy below; the caches go back only if that fails. */
        errno = saved_errno;
    }
    size_t usable = alloc_usable_size(p);
    if (size <= usable && size >= usable / 2) {
        if (usable - size >= SLICE_SIZE && seg->kind == SEGMENT_NORMAL)
            alloc_shrink_large(tls.heap, seg, p, size);
        return p; /* fits, and moving would not save half the block */
    }
    void *q = alloc_malloc_inline(size);
    if (q == NULL) {
        if (size > usable) {
            /* Refused by the OS. Growing needs only the difference, the
             * copy the old and the new size at once: with the caches given
             * back (SPEC, failure contract; the failed malloc gave back
             * the huge cache already), the growth is tried again (review
             * finding: under RLIMIT_AS the realloc failed while the huge
             * cache held the room, and the same call then succeeded). Not
             * before the copy: a block that cannot grow where it is and
             * cannot be moved is no refusal, and giving back every cache
             * for it made a buffer doubled by realloc beside another block
             * fault in 18 times the pages (review finding). */
            if (seg->kind == SEGMENT_HUGE && size > LARGE_MAX && os_size_mappable(size)) {
                (void)purge_release_caches();
                q = huge_realloc(seg, p, size);
                if (q) {
                    errno = saved_errno;
                    return q;
                }
                errno = ENOMEM;
            }
            return NULL; /* errno is ENOMEM; p is untouched */
        }
        /* Shrinking needs no memory, so it does not fail for want of it
         * (review finding B2: under RLIMIT_AS, realloc of a 64 MiB block to
         * 1 MiB returned NULL where glibc shrinks in place). The block stays
         * where it is and gives back what it can: a huge block its pages, a
         * large one its slices, a small one nothing. */
        alloc_shrink_in_place(tls.heap, p, size);
        errno = saved_errno;
        return p;
    }
    memcpy(q, p, usable < size ? usable : size);
    alloc_free_inline(p);
    return q;
}

EBB_API void *ebb_reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return ebb_realloc(p, total);
}

static inline bool is_power_of_two(size_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

void *alloc_aligned(size_t size, size_t alignment, bool zero)
{
    if (alignment <= MIN_ALIGN && size <= DIRECT_MAX && !zero)
        return alloc_malloc_inline(size);
    return alloc_generic(size, alignment <= MIN_ALIGN ? 0 : alignment, zero);
}

EBB_API int ebb_posix_memalign(void **out, size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment) || alignment % sizeof(void *) != 0)
        return EINVAL;
    int saved = errno;
    void *p = alloc_aligned(size, alignment, false);
    if (p == NULL) {
        errno = saved;
        return ENOMEM;
    }
    *out = p;
    return 0;
}

EBB_API void *ebb_aligned_alloc(size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return NULL;
    }
    return alloc_aligned(size, alignment, false);
}

EBB_API void *ebb_memalign(size_t alignment, size_t size)
{
    return ebb_aligned_alloc(alignment, size);
}

EBB_API void *ebb_valloc(size_t size)
{
    return alloc_aligned(size, os_info.page_size, false);
}

EBB_API void *ebb_pvalloc(size_t size)
{
    size_t ps = os_info.page_size;
    size_t rounded = (size + ps - 1) & ~(ps - 1);
    if (rounded < size) {
        errno = ENOMEM;
        return NULL;
    }
    return alloc_aligned(rounded ? rounded : ps, ps, false);
}

EBB_API size_t ebb_malloc_usable_size(const void *p)
{
    if (ebb_unlikely(debug_enabled))
        return debug_usable_size(p);
    return p ? alloc_usable_size(p) : 0;
}

EBB_API void ebb_free_sized(void *p, size_t size)
{
    if (ebb_unlikely(debug_enabled)) {
        debug_free(p, size, 0, DEBUG_FREE_SIZED);
        return;
    }
    alloc_free_inline(p);
}

EBB_API void ebb_free_aligned_sized(void *p, size_t alignment, size_t size)
{
    if (ebb_unlikely(debug_enabled)) {
        debug_free(p, size, alignment, DEBUG_FREE_ALIGNED_SIZED);
        return;
    }
    alloc_free_inline(p);
}

EBB_API int ebb_malloc_trim(size_t pad)
{
    (void)pad;
    size_t mapped = os_mapped_bytes();
    unsigned long purges = os_purge_calls();
    ebb_collect(true);
    return os_mapped_bytes() < mapped || os_purge_calls() != purges;
}

EBB_API int ebb_mallopt(int param, int value)
{
    (void)param;
    (void)value;
    return 1;
}
