/*
 * ebb.h — the public interface of the ebb memory allocator.
 *
 * ebb is a drop-in malloc: preloaded (LD_PRELOAD=libebb.so) or linked (-lebb) it
 * provides the standard C allocation functions under their usual names. Every
 * function is also available under an `ebb_` prefix; both names reach the same
 * heap. A program that keeps another allocator and calls only the ebb_ names
 * links libebb-prefixed.so (-lebb-prefixed), which exports nothing else.
 *
 * Failure contract (applies to every allocating function below):
 *   - Allocation failure returns NULL and sets errno to ENOMEM. Nothing already
 *     allocated is touched. Before failing, a request the OS refused unmaps the
 *     free address space ebb keeps for reuse (cached segments, the unused rest
 *     of a segment region, cached huge mappings and their spare pages) and
 *     asks once more; the calling thread's heap then frees its empty pages
 *     and collects what other threads freed into its pages, and in debug mode
 *     the quarantine and the reuse cache are emptied (their blocks checked as
 *     usual), before another try; last, everything is collected as
 *     ebb_collect(true) does (the pages of idle and exited threads, and the
 *     blocks freed into them, included) and the request tried once more,
 *     unless the calling thread is inside ebb's own locked code (a signal
 *     handler that interrupted an allocator call). A request larger than the address space or
 *     than RLIMIT_AS fails without giving anything back: it could not help.
 *     So does a block larger than RAM and swap together under Linux's default
 *     overcommit policy (vm.overcommit_memory = 0), which refuses one such
 *     mapping and so makes glibc's malloc fail; ebb's mappings skip the
 *     kernel's test (MAP_NORESERVE), so ebb makes it (for blocks aligned to
 *     more than 4 MiB, on the block's own pages, not on the untouched padding
 *     before it).
 *   - A successful call leaves errno as it was, also when it was served after
 *     a refused request (by a fallback or the retry above).
 *   - A size computation that would overflow (calloc's n*size, reallocarray's
 *     n*size, an aligned request rounded up to its alignment) fails with ENOMEM
 *     before any memory is requested from the operating system.
 *   - A failed realloc leaves the original block valid and unchanged.
 *   - An alignment that is not a power of two (or, for posix_memalign, not a
 *     multiple of sizeof(void *)) gets EINVAL; see each function.
 *   - Every block returned is aligned to at least 16 bytes (alignof(max_align_t)).
 */
#ifndef EBB_H
#define EBB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define EBB_API __attribute__((visibility("default")))
#define EBB_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#else
#define EBB_API
#define EBB_MALLOC_ATTR
#endif

/* The version of the library, as "MAJOR.MINOR.PATCH". */
#define EBB_VERSION_MAJOR 0
#define EBB_VERSION_MINOR 1
#define EBB_VERSION_PATCH 0
EBB_API const char *ebb_version(void);

/* malloc(size): a block of at least `size` bytes, 16-byte aligned. malloc(0)
 * returns a unique pointer that must be freed (it is never NULL on success). */
EBB_API EBB_MALLOC_ATTR void *ebb_malloc(size_t size);

/* free(p): releases a block from any ebb allocation function. free(NULL) does
 * nothing. The block may be freed by any thread, not only the one that
 * allocated it. Any other pointer (another allocator's block, a stack or
 * static address, a pointer into a block, a block already freed) is undefined
 * behaviour in release mode, as with glibc's free: it may crash or corrupt the
 * heap. With EBB_DEBUG=1 each of these is reported, with stack traces, and
 * nothing is corrupted (docs/debug-mode.md). The same holds for realloc,
 * free_sized, free_aligned_sized and malloc_usable_size. */
EBB_API void ebb_free(void *p);

/* calloc(n, size): n*size zeroed bytes; ENOMEM if n*size overflows. Memory the
 * OS has just mapped is known to be zero and is not cleared again. */
EBB_API EBB_MALLOC_ATTR void *ebb_calloc(size_t n, size_t size);

/* realloc(p, size): resizes in place when the new size fits the block and is
 * at least half of its usable size (a much smaller size moves to a smaller
 * block, so the memory can be reused); a large block (up to 2 MiB) shrunk in
 * place by the thread that allocated it gives the 64 KiB slices past the new
 * size back; huge blocks grow and shrink by remapping pages, never by copying.
 *   realloc(NULL, size) is malloc(size).
 *   realloc(p, 0) frees p and returns NULL, as glibc does; that is not a failure
 *   and errno is left unchanged.
 *   On failure returns NULL with ENOMEM and p is unchanged and still valid.
 *   A realloc to a smaller size never fails for want of memory: when there is
 *   none to move the block to, it stays where it is (p is returned, errno
 *   unchanged) and gives back what it can past the new size, as above. */
EBB_API void *ebb_realloc(void *p, size_t size);

/* reallocarray(p, n, size): realloc(p, n*size), ENOMEM (p unchanged) if n*size
 * overflows. */
EBB_API void *ebb_reallocarray(void *p, size_t n, size_t size);

/* posix_memalign(&p, alignment, size): alignment must be a power of two and a
 * multiple of sizeof(void *); otherwise returns EINVAL. Returns ENOMEM on
 * failure. *p is written only on success. errno is not changed. */
EBB_API int ebb_posix_memalign(void **p, size_t alignment, size_t size);

/* aligned_alloc(alignment, size): alignment must be a power of two (any size is
 * accepted, as in C17/DR 460); otherwise NULL with errno = EINVAL. */
EBB_API EBB_MALLOC_ATTR void *ebb_aligned_alloc(size_t alignment, size_t size);

/* memalign(alignment, size): as aligned_alloc; a non-power-of-two alignment
 * (0 too) gets NULL with errno = EINVAL. glibc's memalign rounds such an
 * alignment up instead (since 2.38 only its aligned_alloc refuses one). */
EBB_API EBB_MALLOC_ATTR void *ebb_memalign(size_t alignment, size_t size);

/* valloc(size): page-aligned. pvalloc(size): page-aligned, size rounded up to a
 * whole number of pages (pvalloc(0) allocates one page). */
EBB_API EBB_MALLOC_ATTR void *ebb_valloc(size_t size);
EBB_API EBB_MALLOC_ATTR void *ebb_pvalloc(size_t size);

/* malloc_usable_size(p): the number of bytes the caller may use in the block,
 * which is at least the requested size. 0 for NULL. */
EBB_API size_t ebb_malloc_usable_size(const void *p);

/* free_sized(p, size) (C23): free(p) for a block allocated with `size` bytes by
 * malloc/calloc/realloc. free_aligned_sized(p, alignment, size) (C23): the same
 * for a block from aligned_alloc/posix_memalign/memalign. In release mode the
 * size and alignment are trusted hints; debug mode checks them. */
EBB_API void ebb_free_sized(void *p, size_t size);
EBB_API void ebb_free_aligned_sized(void *p, size_t alignment, size_t size);

/* malloc_trim(pad): gives back to the OS everything that can be given back now,
 * from every thread's heap and the shared caches (pad is ignored): also, in a
 * page that still holds live blocks, each OS page that only free blocks cover,
 * inside a block of several OS pages too (those blocks are reused once the
 * page's other free blocks are used up, or go back with the page). Returns 1
 * if any memory was released, 0 otherwise: a call with nothing freed or
 * reused since the last one returns 0 and calls no madvise or munmap (it
 * still pauses other threads' heaps to look, a membarrier each; the calling
 * thread's own heap needs none). */
EBB_API int ebb_malloc_trim(size_t pad);

/* ebb_collect(force): returns free memory held by the calling thread's heap and
 * the shared caches to the OS. With force, also everything that a later purge
 * would return. Equivalent to malloc_trim(0) when force is true. */
EBB_API void ebb_collect(bool force);

/* mallopt(param, value): accepted for compatibility with glibc programs and
 * ignored (ebb's behaviour is set by EBB_* environment variables). Returns 1,
 * glibc's "success". */
EBB_API int ebb_mallopt(int param, int value);

/* ---------------------------------------------------------------------------
 * Telemetry
 *
 * Two questions come up when a process's RSS surprises its owner: how much does
 * the allocator hold, and why? Is it the program's leak or the allocator's
 * retention? ebb_stats_get answers the first cheaply; ebb_heap_walk explains
 * every byte. Neither adds any work to malloc and free: they read what the
 * allocator keeps anyway (page descriptors, segment bitmaps, OS counters).
 *
 * "Exact when quiescent": when no other thread is inside an allocator call, the
 * value is exact. "Approximate": while other threads run, the value may mix
 * moments (each part is read once, unlocked, and clamped so that it is never
 * negative and never above the bytes it is part of). Both calls are safe to
 * make at any time from any thread, concurrently with anything, and from a
 * signal handler: one that interrupted ebb in the same thread while it held
 * one of its locks (an allocator call's slow path, a purge pass, a snapshot
 * or walk) gets EDEADLK at once instead of waiting for ever for that lock,
 * and the EBB_STATS report at exit (exit or quick_exit from such a handler)
 * is then skipped with a line saying so.
 * ------------------------------------------------------------------------- */

/* The layout of struct ebb_stats. A later version only appends fields. */
#define EBB_STATS_VERSION 3

struct ebb_stats {
    /* In: EBB_STATS_VERSION as the caller was compiled. Out: the version ebb
     * filled (the smaller of the caller's and its own). */
    uint32_t version;
    /* Out: bytes of this struct ebb filled. */
    uint32_t size;

    /* From the OS. */
    uint64_t reserved_bytes;  /* address space mapped for ebb: segments, huge
                                 blocks, caches, heap metadata (exact) */
    uint64_t committed_bytes; /* of it, what may be resident: reserved minus what
                                 was purged or never touched (approximate; an
                                 upper bound on ebb's share of the RSS). Except
                                 with EBB_PURGE_METHOD=free: pages purged with
                                 MADV_FREE leave it at once but stay in the RSS
                                 (as LazyFree in /proc/<pid>/smaps) until the
                                 kernel needs the memory and takes them; the
                                 bound then holds for the RSS less LazyFree */
    /* Blocks. */
    uint64_t live_bytes;      /* in live blocks, rounded to their size class;
                                 huge blocks by their usable size (approximate) */
    uint64_t live_blocks;     /* count of live blocks (approximate) */
    uint64_t page_free_bytes; /* free blocks carved inside pages: fragmentation
                                 and pages kept for reuse; malloc reuses them
                                 first (approximate) */
    uint64_t xthread_pending_bytes; /* blocks freed by another thread than the
                                 page's owner, not yet collected by it; they
                                 count as free, not live (approximate) */
    uint64_t purgeable_bytes; /* free, still committed, waiting for the purge
                                 delay: free slices and cached huge blocks not
                                 purged yet (approximate) */
    /* Huge blocks (above 2 MiB): live ones and the cache of freed ones. */
    uint64_t huge_blocks;       /* exact */
    uint64_t huge_bytes;        /* their mappings (exact) */
    uint64_t huge_cached;       /* freed mappings kept for reuse (exact) */
    uint64_t huge_cached_bytes; /* them and the spare pages cut off them (exact) */
    /* Segments (4 MiB) and thread heaps. */
    uint64_t segments;           /* mapped, cached and abandoned ones too (exact) */
    uint64_t segments_cached;    /* entirely free, kept for reuse (exact) */
    uint64_t segments_abandoned; /* left by exited threads, not reclaimed (exact) */
    uint64_t heaps_alive;        /* threads with a heap (exact) */
    uint64_t heaps_pooled;       /* heap slots ready for new threads (exited
                                    threads' heaps and never used ones) */
    /* Activity since the process started (each exact). */
    uint64_t os_map_calls;    /* memory requests (mmap, growing mremap) */
    uint64_t os_unmap_calls;
    uint64_t os_purge_calls;  /* ranges given back (MADV_DONTNEED or MADV_FREE):
                                 a madvise call each, or one process_madvise
                                 call for a batch of them (src/os.c) */
    uint64_t os_purged_bytes;
    uint64_t purge_passes;       /* passes of the purge/scavenge logic */
    uint64_t scavenger_wakeups;  /* times the background thread woke for work */
    uint32_t scavenger_running;  /* 1 if the background thread exists */
    uint32_t debug_mode;         /* 1 under EBB_DEBUG=1 */
    /* Debug mode (0 otherwise). Live bytes include the quarantine: its
     * blocks are held, not free. */
    uint64_t debug_quarantine_bytes;  /* freed blocks held back (exact) */
    uint64_t debug_trace_bytes;       /* the stack-trace registry's bytes */
    uint64_t debug_trace_raw_bytes;   /* the same traces as raw 8-byte frames,
                                         once per allocation or free recorded */
    uint64_t debug_traces;            /* traces recorded (before deduplication);
                                         these two count the caller's traces and
                                         other threads' in batches of 256 (all
                                         of those that exited) */

    /* Version 2. Debug mode: blocks of 16 KiB to 128 KiB out of the
     * quarantine, kept resident for reuse (counted as live, like the
     * quarantine; bounded by a quarter of EBB_DEBUG_QUARANTINE). */
    uint64_t debug_reuse_bytes;

    /* Version 3. Debug mode: the stack-trace machinery's fixed tables beside
     * the registry (the capture cache, the unwind-rule table, the registry's
     * hash buckets and the symbol cache), as mapped: their pages become
     * resident only where used, so this is an upper bound on their RSS. */
    uint64_t debug_trace_table_bytes;
};

/* Fill *stats. The caller sets stats->version = EBB_STATS_VERSION first.
 * Returns 0, or -1 with errno = EINVAL if stats is NULL or its version is 0,
 * or EDEADLK when called from a signal handler that interrupted ebb in the
 * same thread while it held, or was taking, one of ebb's locks: an allocator
 * call (malloc, free, ...) in its slow path, a purge pass, or a snapshot or
 * heap walk (the snapshot would wait for that lock for ever). A handler that
 * interrupted the fast path of malloc or free holds none and gets 0.
 * Takes a few short locks (and waits for a purge pass in progress, so that it
 * never sees one half-done) and reads every segment's page descriptors
 * (microseconds per segment); it never allocates. */
EBB_API int ebb_stats_get(struct ebb_stats *stats);

/* The walk. One summary per heap, then one for the whole process. */
#define EBB_HEAP_WALK_VERSION 1
#define EBB_WALK_CLASS_MAX 64

enum ebb_heap_kind {
    EBB_HEAP_THREAD = 1,    /* a live thread's heap */
    EBB_HEAP_ABANDONED = 2, /* segments of exited threads, not yet reclaimed */
    EBB_HEAP_HUGE = 3,      /* huge blocks (no thread owns them) */
    EBB_HEAP_TOTAL = 4      /* the whole process: the last summary (below) */
};

struct ebb_class_summary {
    uint64_t block_size;  /* 0: the class is unused here */
    uint64_t pages;       /* pages serving this class */
    uint64_t empty_pages; /* of them, with no live block (kept for reuse) */
    uint64_t used_blocks; /* live blocks */
    uint64_t free_blocks; /* carved and free (remote frees included) */
    uint64_t page_bytes;  /* the pages' size */
};

struct ebb_heap_summary {
    uint32_t version; /* EBB_HEAP_WALK_VERSION */
    uint32_t kind;    /* enum ebb_heap_kind */
    uint64_t thread;  /* an id of the owner thread (its thread pointer); 0 if none */
    uint64_t segments;
    uint64_t committed_bytes;  /* what these segments and huge blocks account
                                  for in ebb_stats' committed_bytes (which
                                  also counts the heaps' metadata and the
                                  huge cache) */
    uint64_t live_bytes;
    uint64_t live_blocks;
    uint64_t page_free_bytes;
    uint64_t xthread_pending_bytes;
    uint64_t purgeable_bytes;  /* free slices not purged yet (ebb_stats' also
                                  counts the huge cache's) */
    uint64_t free_slice_bytes; /* free slices in the segments (purged or not) */
    uint64_t largest_free_run; /* bytes of the largest run of free slices in one
                                  segment: the largest block it can serve
                                  without mapping more */
    uint64_t large_blocks;     /* blocks of 128 KiB..2 MiB (slice runs) */
    uint64_t large_bytes;
    double fragmentation;      /* committed_bytes / live_bytes (0 if no live) */
    uint32_t class_count;      /* entries used in classes[] */
    uint32_t blocks_exact;     /* 1 if every live block of this heap was visited
                                  once (0: its owner kept running an allocator
                                  call and the walk could not pause it; in the
                                  EBB_HEAP_TOTAL summary, also when a thread
                                  exited or took over an exited thread's
                                  segment during the walk; see below) */
    struct ebb_class_summary classes[EBB_WALK_CLASS_MAX];
};

/* Called once per heap summary; the struct is valid during the call only. */
typedef void (*ebb_heap_visit_fn)(const struct ebb_heap_summary *heap, void *arg);
/* Called once per live block: its address and usable size. */
typedef void (*ebb_block_visit_fn)(void *block, size_t usable_size, void *arg);

/* Walk every heap through the segment list. on_heap (may be NULL) gets one
 * summary per thread heap, one for abandoned segments and one for huge blocks
 * (when there are any), then the EBB_HEAP_TOTAL summary. on_block (may be NULL)
 * gets every live block, before its heap's summary.
 * EBB_HEAP_TOTAL is a tally of its own, made after the others without pausing
 * anyone: every segment ebb holds (the thread heaps', the abandoned ones, and
 * the cached ones: entirely free, kept for reuse, in no other summary) and the
 * live huge blocks. Its live bytes and blocks and its class table are those
 * of ebb_stats, and the sum of the other summaries' when the threads are
 * quiescent; its segments are ebb_stats' segments (cached ones included), and
 * its segments, free_slice_bytes, purgeable_bytes and committed_bytes exceed
 * the other summaries' sum by what the cached segments hold.
 * Consistency: each heap is summarized under its lock, so its pages cannot
 * change kind; counts are exact when its owner is quiescent. To visit blocks
 * the walk pauses each owner (the owner's next allocator call waits until its
 * heap is done; the same protocol the background thread uses to collect an
 * idle heap), so the blocks are exact for each heap at the moment it is
 * visited; frees from other threads may still arrive meanwhile.
 * Callbacks must not allocate or free through ebb (no malloc, free, stdio that
 * allocates, ...): the walk holds allocator locks, and a paused owner is
 * waiting. Write into memory prepared beforehand and use write(2).
 * In debug mode, on_block gets the program's pointer and requested size, and
 * blocks waiting in the quarantine are not visited (the summaries count them
 * as live: ebb still holds them).
 * Returns 0, or -1 with errno = EINVAL if both callbacks are NULL, or EDEADLK
 * from a signal handler that interrupted ebb holding one of its locks in the
 * same thread (as ebb_stats_get; in debug mode also a realloc that resizes a
 * block in place, which the walk would wait for). */
EBB_API int ebb_heap_walk(ebb_heap_visit_fn on_heap, ebb_block_visit_fn on_block, void *arg);

/* ---------------------------------------------------------------------------
 * Debug mode (EBB_DEBUG=1; docs/debug-mode.md)
 * ------------------------------------------------------------------------- */

/* Label the calling thread's later allocations with a phase name (at most 47
 * characters are kept; up to 1023 distinct names), so that fault reports say
 * in which phase a block was allocated. NULL or "" clears the label. Cheap,
 * and harmless (ignored by reports) outside debug mode. */
EBB_API void ebb_debug_set_context(const char *name);

/* Check the whole heap now: every live block's header and canary, every
 * quarantined block's free fill, every page's free lists. Each problem is
 * reported like any fault (and aborts, unless EBB_DEBUG_ON_ERROR=continue).
 * Returns the number of problems found. Exact when other threads are
 * quiescent; a thread busy inside an allocator call at that moment has its
 * heap skipped. Outside debug mode, or from a signal handler that interrupted
 * ebb holding one of its locks (as ebb_stats_get), checks nothing and
 * returns 0. */
EBB_API size_t ebb_debug_verify(void);

#ifdef __cplusplus
}
#endif

#endif /* EBB_H */
