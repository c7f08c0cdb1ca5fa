/*
 * internal.h — the map of ebb's design: every core structure, the constants that
 * shape it, and the functions each module offers the others.
 *
 * The shape, in one paragraph. Memory comes from the OS in SEGMENTs: 4 MiB
 * mappings aligned to 4 MiB, so masking any pointer inside one gives its header.
 * A segment is cut into 64 SLICEs of 64 KiB; slice 0 holds the header and the
 * page descriptors, slices 1..63 are handed out in runs. A PAGE is a run of
 * slices serving one size class (small pages) or one block (large pages). Each
 * thread owns a HEAP (reached through initial-exec TLS) and the segments it
 * allocated from: only the owner thread allocates from them, and a free by the
 * owner is a plain push on the page's free list. A free by any other thread is
 * one CAS on the page's `xthread_free` list, which the owner collects in its
 * slow path. Blocks too big for a segment (HUGE) are their own aligned mapping
 * with the same header at its start, so one mask also finds them; they grow and
 * shrink with mremap. When a thread exits its segments are ABANDONED; the next
 * thread that needs memory reclaims them. Freed slices are purged after a delay
 * by a background SCAVENGER (purge.c), which also collects what idle and
 * exited threads hold (heap.c, "quiescing").
 *
 * Synchronization, in short (details next to each field):
 *   - owner-only fields: written and read only by the thread whose id is in the
 *     segment's `thread_id` (that thread holds its heap's `lock` in slow paths,
 *     so that fork() and the scavenger find the heap consistent), or by the
 *     scavenger while it holds the heap quiesced (heap.c);
 *   - `xthread_free`, `free_slices`, `dirty_slices`, `fresh_slices`: atomics any
 *     thread may touch, with the protocols written where they are used (page.c,
 *     segment.c, purge.c);
 *   - global lists (abandoned segments, segment cache, heap pool, purge list,
 *     huge cache): small locks (lock_t), never taken on a fast path; heap.c
 *     gives the one order they nest in.
 */
#ifndef EBB_INTERNAL_H
#define EBB_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */
#include <sys/uio.h>   /* struct iovec */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
#include <sys/single_threaded.h>
#endif

#include "ebb.h"

#define ebb_likely(x)   __builtin_expect(!!(x), 1)
#define ebb_unlikely(x) __builtin_expect(!!(x), 0)
/* For the fast paths: inlined even where the compiler would rather call. */
#define ebb_always_inline inline __attribute__((always_inline))
#define ebb_noinline    __attribute__((noinline))
#define ebb_internal    __attribute__((visibility("hidden")))

/* For a zero-initialised static array that is touched sparsely or not at all
 * in most processes (the segment map, debug mode's tables and patterns,
 * buffers for rare paths): kept apart from the small globals, which then fit
 * with .data in one page instead of spreading over five (96 bytes to spare
 * at stop 40: check `readelf -S` when adding a global). Every process that
 * loads ebb pays for each page touched. With GCC on x86-64 the GNU assembler
 * makes .lbss a no-bits section and the linkers (bfd, gold, lld) place it after
 * .bss (tests/test_exports.sh checks the library); elsewhere (and with
 * clang 14, which would make .lbss a data section stored in the file) it is
 * an ordinary array. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ebb_cold_bss __attribute__((section(".lbss")))
#else
#define ebb_cold_bss
#endif

/* For a small global of 32 bytes or more that lives in that one page: GCC
 * aligns such objects to 32 bytes on x86-64, and the padding (up to 31 bytes
 * before each) took a fifth of the page's spare bytes. Its own alignment is
 * enough: nothing loads them with aligned vector instructions. */
#define ebb_small_global __attribute__((aligned(8)))

/* Tell ThreadSanitizer that the calling thread acquires what was released at
 * `addr`: for a value read through the kernel (os_peek_byte), which the
 * sanitizer does not see. Nothing in other builds. */
#if defined(__SANITIZE_THREAD__)
#define EBB_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EBB_TSAN 1
#endif
#endif
#ifdef EBB_TSAN
void __tsan_acquire(void *addr);
#define ebb_tsan_acquire(addr) __tsan_acquire((void *)(addr))
#else
#define ebb_tsan_acquire(addr) ((void)0)
#endif

/* ---------------------------------------------------------------------------
 * Constants that shape the design
 * ------------------------------------------------------------------------- */

/* 4 MiB segments: large enough that the header slice (64 KiB of address space,
 * one or two touched pages) is a small share, small enough that one idle
 * thread's last segment does not pin much, and a multiple of the 2 MiB huge
 * page so THP never straddles two segments. */
#define SEGMENT_SHIFT 22
#define SEGMENT_SIZE  ((size_t)1 << SEGMENT_SHIFT)
#define SEGMENT_MASK  (SEGMENT_SIZE - 1)

/* 64 KiB slices: the unit of page allocation and (later) of purging. 64 of them
 * make the free-slice set of a segment one 64-bit word, claimed with one CAS. */
#define SLICE_SHIFT        16
#define SLICE_SIZE         ((size_t)1 << SLICE_SHIFT)
#define SLICES_PER_SEGMENT (SEGMENT_SIZE / SLICE_SIZE) /* 64 */
#define SLICES_ALL         (~(uint64_t)1)               /* slices 1..63: slice 0 is the header */

/* Size classes: 16-byte steps up to 128 bytes, then four classes per doubling
 * (block sizes 2^b + k*2^(b-2), k = 1..4), so rounding wastes at most 20% of a
 * block. The largest class is 128 KiB; CLASS_COUNT classes in all. */
#define CLASS_COUNT    48
#define SMALL_MAX      ((size_t)128 * 1024)
#define MIN_ALIGN      16

/* The malloc fast path indexes heap->direct[] by (size + 15) / 16 up to this
 * size: one load finds the page to pop from. 1 KiB covers most requests. */
#define DIRECT_MAX     1024
#define DIRECT_SLOTS   (DIRECT_MAX / 16 + 1)

/* A small page holds at least this many blocks of up to one slice (its run of
 * slices grows with the block size), so per-page overhead stays small; a
 * block above one slice has a page of its own (alloc.c, PAGE_SLICES). Blocks
 * of PAGE_WIDE_MIN bytes or more up to one slice get the widest page,
 * PAGE_MAX_SLICES slices, whatever their count (alloc.c explains why). */
#define PAGE_MIN_BLOCKS  8
#define PAGE_MAX_SLICES  8
#define PAGE_WIDE_MIN    ((size_t)24 * 1024)

/* A page of a class the direct[] slots serve (up to DIRECT_MAX) holds at
 * least this many blocks: 2 slices for blocks of 640 B to 1 KiB, 1 for the
 * rest. A FIFO of blocks deeper than a page (a queue of messages) turns the
 * class's page once per page of frees, a locked slow path of about 120 ns
 * on this VM: not its 355 instructions (callgrind; 400 more cost 26 ns) nor
 * cache misses (cachegrind: as many as tcmalloc's), so, by elimination,
 * mispredicted branches. With 64 blocks of 1 KiB to a page that made
 * `bench_core ring 1024 100` 1.6x tcmalloc's time; with 128 the same FIFO
 * turns no page at all (docs/benchmarks.md, "Pages of at least 128 blocks
 * up to 1 KiB"). Blocks are carved lazily, so an emptier page costs address
 * space, not memory. */
#define PAGE_DIRECT_MIN_BLOCKS 128

/* Requests above SMALL_MAX up to LARGE_MAX get a run of slices to themselves
 * (a one-block page); above LARGE_MAX they are huge mappings. Half a segment:
 * a bigger run would leave most of a segment unusable for anything else. */
#define LARGE_MAX      ((size_t)2 * 1024 * 1024)
/* Largest alignment a slice run can honour by choosing its start slice. */
#define LARGE_ALIGN_MAX ((size_t)1024 * 1024)

/* A free page run is carved into blocks lazily, at most this many bytes at a
 * time, so a fresh page touches (and makes resident) only what is used. */
#define PAGE_EXTEND_BYTES 4096

/* A segment whose thread holds no live block in it (only empty pages it
 * keeps for reuse) and that has at least this many freed slices still
 * resident goes to the shared segment cache at once, even as its thread's
 * last segment, so that another thread reuses those pages before faulting in
 * fresh ones (page.c, page_hand_off_segment). 1 MiB: a thread that allocates
 * one block at a time keeps far less than that; one that ends a burst of
 * large blocks (seed "medium") may leave the whole segment written. */
#define SEGMENT_HANDOFF_SLICES 16

/* Fully free segments kept mapped for the next thread or page run, at most.
 * Bound on address space: SEGMENT_CACHE_MAX * SEGMENT_SIZE = 16 MiB. */
#define SEGMENT_CACHE_MAX 4

/* Segments are mapped in regions of 1, 2, 4, ... up to this many at a time,
 * so a growing program makes few mmap calls (segment.c): 64 MiB of address
 * space at most mapped ahead of use, none of it touched. */
#define SEGMENT_REGION_MAX 16

/* Fully free segments kept mapped (their slices purged) even after the unmap
 * delay, so an idle program that wakes up does not start with an mmap. Past
 * that delay the standby's header goes back too: it is zeroed and kept as
 * blank address space, handed out first as a new segment (segment.c,
 * region_blank), so it holds no resident page. */
#define SEGMENT_STANDBY 1

/* How long a heap must take no slow path before the scavenger trims its
 * pages that still hold live blocks (page.c, page_trim): SPARSE_IDLE_FACTOR
 * purge delays, at most SPARSE_IDLE_MAX_MS unless the delay itself is longer
 * (heap.c, sparse_idle_ms). Longer than the purge delay of empty pages,
 * because a trimmed page's blocks are the very ones its thread reuses when
 * it wakes: a thread that allocates 40,000 blocks of 1-4 KiB, frees 3 in 4,
 * then runs 300 ms on fast paths only faulted 162k pages in 10 rounds with
 * the trim at one purge delay (50 ms), 29k without the trim (0.33 s of
 * system time against 0.06). With 1 s, a program pays that at most once a
 * second of quiet; an idle one still gets the memory back a second after it
 * stopped. */
#define SPARSE_IDLE_FACTOR 20
#define SPARSE_IDLE_MAX_MS 1000

/* `factor` times `ms`, at most SPARSE_IDLE_MAX_MS unless `ms` itself is
 * longer: the waits that scale with the purge delay (SPARSE_IDLE_FACTOR,
 * ABANDONED_KEEP_FACTOR). */
static inline uint64_t delay_scaled_ms(uint64_t ms, uint64_t factor)
{
    uint64_t cap = ms > SPARSE_IDLE_MAX_MS ? ms : SPARSE_IDLE_MAX_MS;
    return ms * factor < cap ? ms * factor : cap;
}

/* However short the purge delay, a heap counts as idle for the scavenger's
 * visit (heap.c, quiescing) only once it has taken no slow path for this
 * long. Quiescing costs a membarrier (an interrupt on every CPU running the
 * process) and sends the owner's frees down the remote path while it lasts.
 * With EBB_PURGE_DELAY=0 the scavenger, passing once a millisecond,
 * quiesced a thread in the middle of its frees: the blocks it freed then
 * waited for the next pass instead of being purged as they were freed
 * (test_purge, purge_delay_zero_returns_memory_at_once: 4 runs of 160 held
 * 2.7-12.4 MiB over the live bytes "right after" the frees, where the
 * margin is 4, and a CI run 10.7; none of 250 since). What waits for the
 * visit at delay 0 is little: one empty page per size class and blocks
 * other threads freed into the heap's pages. 2 ms: the scavenger
 * sees a slow path only as a changed count between two passes, so this means
 * at least one whole pass with none; a thread freeing in a loop takes one
 * every few microseconds. No more, so that EBB_PURGE_DELAY=2 still visits
 * threads between their bursts (run_tests.sh, threads_tsan_scavenger: gaps
 * of 3 ms). */
#define HEAP_IDLE_MIN_MS 2

/* A process that never created a thread and fits in one segment gets no
 * scavenger thread (purge.c, "solo"): it keeps at most this many bytes of
 * freed slices waiting for the passes its own allocator calls run, and
 * purges beyond them at free. 1 MiB: what a small tool frees and reuses
 * (the stdio buffers, a parser's tables); a program that frees more gets
 * the thread, and the full purge delay, at its next allocation. */
#define SOLO_PENDING_MAX ((size_t)1024 * 1024)

/* The scavenger thread is started only if at least this many more threads
 * fit under RLIMIT_NPROC and every pids cgroup limit (os_thread_room): it
 * must not take the slot the program's own next thread needs (it is often
 * started inside the program's first pthread_create). 16: a program near
 * its limit usually starts a pool of threads, not one. */
#define SCAVENGER_ROOM_THREADS 16

/* Freed huge mappings kept for reuse (purged after the purge delay, unmapped
 * after the unmap delay): at most this many, and at most this many bytes.
 * 16 rather than 8: with 8 threads freeing and allocating 2-8 MiB blocks,
 * 8 entries left too few sizes to choose from, and a mapping of the wrong
 * size is grown (fresh pages fault in) or cut (seed "big": 6% fewer page
 * faults with 16). The byte bound is what bounds memory: what the cache
 * holds resident beyond the live blocks, for one or two purge delays after
 * the frees (then only address space, until the unmap delay). 128 MiB
 * rather than 64: a loop that keeps a few blocks of up to 32 MiB live
 * (bench_large) frees more than 64 MiB within a purge delay, and the cache
 * then unmapped the pages its next blocks needed: 3.5x tcmalloc's page
 * faults and 4x the time, against 1.08x the faults with 96 or 128 MiB;
 * seed "big" took 0.8x the time for a peak 3% higher (docs/memory-return.md,
 * "the huge cache's byte bound"). A mapping above half the bound is
 * unmapped at its free: a loop of such blocks maps each one. */
#define HUGE_CACHE_MAX       16
#define HUGE_CACHE_MAX_BYTES ((size_t)128 * 1024 * 1024)

/* Spare pages cut off cached huge mappings (large.c), kept for the next huge
 * block: at most this many ranges, within HUGE_CACHE_MAX_BYTES together with
 * the cached mappings. */
#define HUGE_SPARE_MAX 16

/* A cached huge mapping is taken as it is for a request it exceeds by at most
 * this fraction (1/HUGE_TAKE_SLACK_DIV of the request); a bigger one is cut
 * to size. So a live huge block holds at most 1.5x its pages. Seed "big"
 * (bench_seeds big, 5 interleaved runs, medians): peak 398 MiB and 565 ms
 * with 2x, 374 MiB and 585 ms with 1.5x, 360 MiB and 617 ms with 1.25x:
 * every page a block holds beyond its size is resident waste, every cut
 * faults fresh pages in at the next bigger request. */
#define HUGE_TAKE_SLACK_DIV 2

/* A reclaim takes an abandoned segment that can serve the request (a page of
 * the class with room, or a free run of the slices wanted), looking at most at
 * this many from the front of the list: a long list of full abandoned
 * segments cannot make one malloc slow. Full segments go to the back. */
#define RECLAIM_SCAN_MAX 64
/* And at most this many reclaims per request before mapping a fresh segment
 * (a claim can still fail when a purge pass holds the slices for a moment). */
#define RECLAIM_MAX_PER_REQUEST 4

/* The free slices of a segment whose owner exited (abandoned, or entirely
 * free and cached) are purged only once the exit is this many purge delays ago (at most SPARSE_IDLE_MAX_MS,
 * unless the delay is longer; none with EBB_PURGE_DELAY=0), not one delay
 * after their free: a thread that starts meanwhile reclaims the segment and
 * writes into them without a page fault. Threads started in waves of 200
 * (bench_waves: a wave takes about 200 ms) had 420-490 MiB a run purged
 * from abandoned segments and faulted in again; kept 400 ms, the run took
 * 0.89x the time with 0.84x the page faults (kept 1 s: about the same). */
#define ABANDONED_KEEP_FACTOR 8

/* ---------------------------------------------------------------------------
 * What ebb keeps after the program freed it, and for how long. Every free
 * byte is in one of these places; each has a bound (tests/test_purge.c checks
 * them against the process's real RSS).
 *   1. Free slices of a segment (free pages, freed large blocks): purged
 *      between one and two purge delays (EBB_PURGE_DELAY) after the free,
 *      whichever thread freed and whether or not it ever runs again; in a
 *      segment whose owner exited (abandoned, or cached entirely free), held
 *      for the threads that replace it until ABANDONED_KEEP_FACTOR delays
 *      after the exit (400 ms by default), and never longer than that from
 *      the pass that started their hold, which waits for the hold before it
 *      at most as long (segment_t.purge_held_mask): two keeps and a delay
 *      at most.
 *   2. One empty page per size class that a thread keeps for its next malloc
 *      (<= 64 KiB for blocks up to 8 KiB but 128 KiB for 640 B to 1 KiB, up
 *      to 512 KiB for the largest classes; resident only as far as it was
 *      carved, 4 KiB at a time for blocks up to 4 KiB), which another class
 *      may take instead of a new page, or whose one block a request of a
 *      class up to 8 times smaller may take as it is (page.c,
 *      page_retained_wider): taken back and purged once the thread
 *      has taken no slow path for a purge delay (heap.c, quiescing). None is kept while
 *      no scavenger exists to take it back (purge_keeps_empty_pages: a forked
 *      child that only frees, then idles, starts none). A page that empties
 *      while the class's other pages have room for a page's worth of
 *      blocks goes to 1 instead, unless it is the kept one already (page.c,
 *      page_free_local_slow).
 *   3. Blocks other threads freed into a thread's pages: collected by the
 *      owner, or by the scavenger once the owner is idle (as 2) or gone
 *      (abandoned segments); their pages then follow 1. An owner that keeps
 *      running collects them all at its next locked slow path once they
 *      have waited BUSY_COLLECT_MS (heap.c, heap_scavenge).
 *   4. Each live thread's last segment stays mapped even when empty; its free
 *      slices follow 1, so it keeps only its header (two OS pages) resident.
 *      (A segment emptied with SEGMENT_HANDOFF_SLICES or more of its free
 *      slices resident goes to 5 at once instead, last or not, with the
 *      pages of 2 it holds, so other threads reuse it.)
 *   5. The segment cache: <= SEGMENT_CACHE_MAX free segments, their slices
 *      following 1, unmapped after EBB_UNMAP_DELAY except SEGMENT_STANDBY,
 *      which then gives its header page back too (blank, nothing resident).
 *      Free segments beyond it (the overflow list) are unmapped one purge
 *      delay after their release, like 1. The untouched spare of the last
 *      segment region is unmapped after EBB_UNMAP_DELAY.
 *   6. The huge cache: <= HUGE_CACHE_MAX mappings and HUGE_CACHE_MAX_BYTES,
 *      purged after one purge delay, unmapped after EBB_UNMAP_DELAY; within
 *      the same bytes, <= HUGE_SPARE_MAX spare ranges cut off its mappings,
 *      unmapped after one purge delay.
 *   7. Debug mode only: the quarantine (EBB_DEBUG_QUARANTINE bytes, held until
 *      later frees push its blocks out, EBB_DEBUG_QUARANTINE_IDLE ms pass or
 *      malloc_trim), and the reuse cache of
 *      16..128 KiB blocks out of it (a quarter of that bound; purged and
 *      released between one and two purge delays after they came, debug.c).
 *   8. A solo process (one that never made a thread, with one segment and no
 *      huge block) has no scavenger: up to SOLO_PENDING_MAX of its freed
 *      slices (1) and its retained pages (2) wait for the passes its own
 *      allocator calls run (purge.c, "solo").
 *   9. glibc allocates the scavenger's TLS vector (a few hundred bytes) from
 *      the heap of the thread that starts it. If that thread exits, its
 *      segment stays abandoned (3) with that block live: once per process,
 *      4 MiB of address space with its header and one page resident.
 *  10. Free blocks inside a small page that still holds a live block: kept
 *      for malloc to reuse, resident as far as they were written, while
 *      their thread runs. A trim gives back every OS page that free blocks
 *      alone cover, those inside a free block of several OS pages too
 *      (dropping the blocks they overlap until the page needs them again,
 *      or empties; page.c, page_trim): malloc_trim(0) and ebb_collect(true) trim every
 *      such page at once; the scavenger trims the pages that are new or
 *      had blocks freed into them since they were last full or last
 *      trimmed (segment_t.sparse_watch) once their thread stays idle for
 *      SPARSE_IDLE_FACTOR purge delays (at most SPARSE_IDLE_MAX_MS, 1 s by
 *      default, unless the delay is longer), or has been gone as long
 *      (abandoned segments: a thread started meanwhile reuses them). Not
 *      in a solo process (8: one segment at most), nor without membarrier
 *      (heap.c, quiescing). A new page of a class up
 *      to 1 KiB wakes no scavenger (page.c, page_watch_new): the visit that
 *      trims it is one made for another reason.
 *  (Hot classes, PAGE_HOT, add no place: a block freed goes on its page's
 *  list like any other, only the page malloc pops from changes. Every way
 *  memory goes back finds their pages as any other: tests/test_purge.c,
 *  fifo_rings_of_blocks_above_1_kib_give_back_rss.)
 * So an idle process holds, beyond its live blocks, at most: the free blocks
 * of 10 (in the cases above, none beyond the live blocks' OS pages), the
 * header pages of the segments heaps hold, and nothing else once
 * EBB_UNMAP_DELAY passed (in a solo process, also 8; with
 * EBB_PURGE_DELAY=-1, also the standby's header).
 * ------------------------------------------------------------------------- */

/* ---------------------------------------------------------------------------
 * A tiny lock for slow paths (no pthread dependency: usable before and during
 * initialization, and trivially reset in a forked child).
 * ------------------------------------------------------------------------- */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* A small lock: `held` is 0 (free), 1 (held) or 2 (held, and a thread may
 * be asleep waiting for it). lock_acquire spins a little, then sleeps in the
 * kernel (futex) instead of yielding in a loop: a waiter must not take CPU
 * time from the holder (8 threads on 2 CPUs), nor spin for ever behind a
 * holder of lower real-time priority. lock_release wakes one sleeper when the
 * lock was 2. Acquire on taking, release on dropping: the lock orders the
 * data it guards. */
typedef struct lock_s {
    atomic_int held;
} lock_t;
#define LOCK_INIT {0}

/* How many of ebb's locks this thread holds, is taking or is letting go of:
 * raised before it asks for a lock and lowered after it dropped one (the
 * compiler barriers keep both stores on their side of the lock's own atomic),
 * so that a signal handler that interrupts it anywhere in between sees it.
 * Then ebb's telemetry (ebb_stats_get, ebb_heap_walk, the reports at exit),
 * which takes those locks, must not run in that handler: it would wait for
 * ever for a lock its own thread holds (purge_exclusive_begin refuses).
 * Only its own thread reads or writes it (a handler's lock calls leave it as
 * they found it): plain TLS, no atomics, on slow paths only, like the locks.
 * Correct across fork: the child is a copy of the forking thread, whose
 * prepare handler raised it once per lock taken, and whose child handler
 * releases each of those locks; a new thread starts at 0. */
extern __thread unsigned tls_locks_held __attribute__((tls_model("initial-exec")));
/* Around anything else that ebb's telemetry would wait for, too (debug mode's
 * block claims that readers wait out, debug.c). */
static inline void lock_count_up(void)
{
    tls_locks_held++;
    atomic_signal_fence(memory_order_seq_cst);
}
static inline void lock_count_down(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    tls_locks_held--;
}

void lock_acquire(lock_t *l);
void lock_wake(lock_t *l);
static inline bool lock_try_acquire(lock_t *l)
{
    int expected = 0;
    lock_count_up();
    if (atomic_load_explicit(&l->held, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong_explicit(&l->held, &expected, 1, memory_order_acquire,
                                                memory_order_relaxed))
        return true;
    lock_count_down();
    return false;
}
static inline void lock_release(lock_t *l)
{
    if (ebb_unlikely(atomic_exchange_explicit(&l->held, 0, memory_order_release) == 2))
        lock_wake(l);
    lock_count_down();
}
/* True if this thread holds (or is taking or dropping) any of ebb's locks. */
static inline bool lock_any_held(void)
{
    return tls_locks_held != 0;
}

/* ---------------------------------------------------------------------------
 * Blocks, pages, segments, heaps
 * ------------------------------------------------------------------------- */

/* A free block: its first word links it into one of its page's lists. */
typedef struct block_s {
    struct block_s *next;
} block_t;

struct heap_s;

/* Page kinds (page_t.kind). */
enum { PAGE_FREE = 0, PAGE_SMALL = 1, PAGE_LARGE = 2 };

/* The low bits of page_t.xthread_free (blocks are MIN_ALIGN-aligned), which
 * every remote free's CAS compares along with the list, so that a freer that
 * read them before a change fails its CAS and reads them again:
 * XTHREAD_IN_FULL, set while the page sits in its heap's full list, so that
 * the first remote free into it tells the heap to look (page.c, "the
 * full-page protocol"); XTHREAD_ABANDONED, set while the page has no owner
 * (its segment abandoned, from its owner's exit until a reclaim adopts it),
 * so that a remote free tells the scavenger rather than a heap (page.c,
 * "whom a remote free tells"). */
#define XTHREAD_IN_FULL   ((uintptr_t)1)
#define XTHREAD_ABANDONED ((uintptr_t)2)
/* And the top bits, which no user-space address uses (x86-64 and aarch64 give
 * user space at most 57 bits): a generation that each reclaim bumps (page.c,
 * step 5), so that an exit and a reclaim both inside one freer's read-to-CAS
 * window do not leave the word as the freer read it (ABA). */
#if UINTPTR_MAX > 0xffffffffu
#define XTHREAD_GEN_ONE   ((uintptr_t)1 << 57)
#define XTHREAD_GEN_MASK  (~(uintptr_t)0 << 57)
#else
#define XTHREAD_GEN_ONE   ((uintptr_t)0) /* no spare bits: no generation */
#define XTHREAD_GEN_MASK  ((uintptr_t)0)
#endif
#define XTHREAD_FLAGS     (XTHREAD_IN_FULL | XTHREAD_ABANDONED | XTHREAD_GEN_MASK)

/* page_t.in_full values (0: in its class queue, nothing to signal). */
#define PAGE_IN_FULL 1
#define PAGE_FREE_SIGNAL 2
/* In its class queue, and its class is hot (PAGE_HOT_MIN): the owner's free
 * into it, which the fast path sends off its common branch for any nonzero
 * value, points the class's direct slot at the page (alloc.h,
 * alloc_free_owned), so that the class's next malloc pops the block
 * just freed. A page of a hot class holds this value wherever a page of
 * another class holds 0 (page.c, page_queued_state). A bit apart from the
 * other two values', so that "signals something" is one test. */
#define PAGE_HOT 4

/* The smallest block size whose class is hot (PAGE_HOT). Above DIRECT_MAX,
 * so that the sizes the direct[] slots serve pay nothing: their pages keep
 * in_full at 0 and their frees never leave the fast path's common branch
 * (callgrind: 46.0 / 54.0 / 50.1 instructions a pair, as before). Above it a
 * page holds few blocks (51 of 1,280 bytes in 64 KiB, 16 of 4 KiB), and
 * with per-page free lists a FIFO of 64 live blocks (bench_core pair) made
 * malloc pop a block freed 16-64 frees earlier into another page, its link
 * a cache miss on every pair (docs/benchmarks.md, "Blocks above 1 KiB in a
 * FIFO"). Following the free instead of a stash of freed blocks: no block
 * leaves its page's list, so nothing is kept that the list of what ebb keeps
 * (above) does not already bound, and no test of a stash's "empty" or
 * "full" mispredicts when the classes change at random. */
#define PAGE_HOT_MIN (DIRECT_MAX + 1)

/* heap_t.sparse_pending's bits (below). */
#define SPARSE_MARKED    1
#define SPARSE_FRESH     2
#define SPARSE_FRESH_HOT 4
#define SPARSE_ALL       (SPARSE_MARKED | SPARSE_FRESH | SPARSE_FRESH_HOT)

/* A page descriptor. One per slice, in the segment header; for a run of slices
 * the descriptor of the first slice is the page (segment_t.slice_offset leads
 * from any slice of the run to it). */
typedef struct page_s {
    /* Owner-only. The free list: malloc pops from it, the owner's free pushes
     * on it. */
    block_t *free;
    /* Set at page init, constant while the page is in use: block size in bytes
     * (for a large page: the whole run). */
    uint32_t block_size;
    /* The block counts are 16 bits (a page holds at most PAGE_MAX_SLICES *
     * SLICE_SIZE / MIN_ALIGN blocks, static assert below): with them, 56-byte
     * descriptors keep the segment header in one 4 KiB page.
     * Owner-only. Blocks handed out and not yet returned to `free` (directly,
     * or collected from `xthread_free`). 0 means the page is empty. Blocks a
     * trim dropped (segment_t.trimmed) are neither used nor free:
     * capacity = used + free blocks + dropped blocks. */
    uint16_t used;
    /* Owner-only: blocks carved so far (grows as the page is extended). */
    uint16_t capacity;
    /* Set at page init, constant while the page is in use: blocks the page
     * can hold (debug mode's pointer checks read it from any thread). */
    uint16_t reserved;
    /* Set at page init, constant while in use. */
    uint8_t kind;        /* PAGE_FREE, PAGE_SMALL, PAGE_LARGE */
    uint8_t class_idx;   /* size class of a small page */
    uint8_t slice_count; /* slices in the run (first slice of a run only) */
    /* Owner-only (or the scavenger, the heap quiesced). PAGE_IN_FULL: the
     * page is in its heap's `full` list. PAGE_FREE_SIGNAL: it is in its
     * class queue and a trim left it (page.c, page_trim): the owner's next
     * free into it takes the slow path, which marks it for the next trim
     * (segment_t.sparse_watch). PAGE_HOT: in its class queue, of a hot class
     * (above). Any nonzero value sends the free fast path off its common
     * branch (alloc.h, alloc_free_owned). */
    uint8_t in_full;
    union {
        /* PAGE_LARGE, owner-only: its block is known to be zero (fresh from
         * the OS). */
        uint8_t is_zero;
        /* PAGE_SMALL, owner-only: queue_find_room found the page dry and
         * moved it to the back of its queue rather than to the full list,
         * and has not found it with free blocks since (page.c). */
        uint8_t rotated;
    };
    /* Written by the owner: the page is its heap's retained[] page for its
     * class (page.c, retained_set). Read by the scavenger, which must not
     * free such a page without quiescing the heap (page_steal_if_free). */
    _Atomic(uint8_t) kept;
    /* Any thread. Blocks freed by threads other than the owner, pushed with one
     * CAS, collected by the owner with an exchange; low bits XTHREAD_FLAGS. */
    _Atomic(uintptr_t) xthread_free;
    /* Written by the owner (set at page init and reclaim, NULL on abandon); read
     * by remote freers, after the list word, to notify the heap. Heaps are
     * never unmapped (heap.c), so a stale pointer only causes a spurious
     * notification. */
    _Atomic(struct heap_s *) heap;
    /* Owner-only. Links in a heap page queue or the full list. */
    struct page_s *next, *prev;
} page_t;

/* Segment kinds. */
enum { SEGMENT_NORMAL = 1, SEGMENT_HUGE = 2 };

/* A segment header, at the start of every segment and every huge mapping. */
/* Where in a range of pages a kernel mapping (VMA) may begin (large.c):
 * ascending offsets, each in (0, length). Every stretch between two of them
 * (or the range's ends) lies in one VMA, which is what mremap needs of what
 * it moves. Past HUGE_BOUNDS_MAX, `unknown`: the range is never moved. */
#define HUGE_BOUNDS_MAX 32 /* 16: seed "big" and bench_large fault 25% more */
typedef struct huge_bounds_s {
    uint8_t n;
    bool unknown;
    size_t at[HUGE_BOUNDS_MAX];
} huge_bounds_t;

typedef struct segment_s {
    /* The header's first cache line holds fields no fast path reads, and
     * thread_id, which every free reads, starts the second (the static
     * assert below the struct). Every page's first block lies at a 64 KiB
     * boundary and every block of a class of 4 KiB multiples at a 4 KiB one,
     * so the header's first line shares its L1 set (address bits 6-11) with
     * the first lines of those blocks, which the program and the free lists
     * touch: there, thread_id was evicted again and again. On the second
     * line, `bench_core rand 1024 65536` takes 14% fewer L1 read misses
     * (cachegrind) and 0.92x its time, `rand 16384 65536` 0.90x
     * (docs/benchmarks.md, "The segment header's first line"). The fields
     * before it are eight words, so that no padding moves the page
     * descriptors from offset 384. */
    /* Huge mappings only (constant except under realloc by the block's owner,
     * i.e. whoever holds the pointer): mapping size, block offset, alignment. */
    size_t map_size;
    size_t block_offset;
    size_t alignment;
    /* Huge mappings in the huge cache (large.c, under its lock). */
    uint64_t huge_freed_at_ms;
    /* Under cache_lock: when the segment entered the segment cache (ms). */
    uint64_t cached_at_ms;
    /* Under segments_lock: the list of every normal segment mapped (for the
     * trim pass and later the heap walk). */
    struct segment_s *all_next, *all_prev;
    /* While on the abandoned list (written under abandoned_lock; read
     * without it by remote frees): bit c = a small page of class c has room,
     * counting remote frees not collected yet. Set as the segment goes on
     * the list, and by the first remote free into a page of a class whose bit
     * is clear (page_free_remote). A reclaim for class c takes a segment with
     * bit c set (stale only if the scavenger has since freed that page). */
    _Atomic(uint64_t) abandoned_room;
    /* The owner thread's id (its thread pointer), or 0 when abandoned and for
     * huge mappings. Written by the owner at reclaim/abandon (release); read by
     * every free (relaxed: only the owner itself can ever read its own id).
     * A remote free of a small block does not decide anything from it (page.c,
     * "whom a remote free tells"); one of a large block does
     * (segment_free_large_remote). */
    _Alignas(64) _Atomic(uintptr_t) thread_id;
    /* Never changes after setup. */
    uint32_t kind;
    uint32_t in_abandoned; /* under abandoned_lock: on the abandoned list */
    /* When the thread that owned it last exited (os_now_ms), leaving it
     * abandoned or, entirely free, in the segment cache (not on its overflow
     * list, which is unmapped a purge delay after the release); 0 while a
     * heap owns it, and when a live owner released it (also by a hand-off,
     * page.c). The scavenger trims its pages under live blocks only once
     * that exit is as long ago as a live heap must stay idle for the same
     * trim (segment_abandoned_collect), and purges its free slices only once
     * it is ABANDONED_KEEP_FACTOR purge delays ago (segment_purge), each hold
     * bounded from its start (purge_held_ms, trim_held_ms). Stored by the
     * exiting owner before the push or release; kept when the segment,
     * abandoned, is released entirely free by the scavenger or by a remote
     * free of its last large block; cleared by the heap that takes the
     * segment (heap_segment_push) and by a live owner's release; read by the
     * passes. Relaxed: a pass that reads a value a moment stale only purges
     * or trims a pass earlier or later. */
    _Atomic(uint64_t) exited_ms;
    /* Normal segments. Bit i set = slice i is free. Claimed by the owner with a
     * CAS (segment_claim_slices); released by any thread with an atomic OR after
     * it has reset the slices' descriptors (release order). */
    _Atomic(uint64_t) free_slices;
    /* Bit i set = slice i holds only zeros (never handed out since it was
     * mapped). Cleared by the owner when it claims slices. */
    _Atomic(uint64_t) fresh_slices;
    /* Slices free (or being freed) whose memory may still be resident: set by
     * whoever frees a run (before the run's free bits), cleared when the run is
     * claimed again or purged. `dirty_old`: the dirty slices as the previous
     * purge pass left them; a pass purges dirty & dirty_old, i.e. slices that
     * stayed free for at least one whole pass period (purge.c, the protocol). */
    _Atomic(uint64_t) dirty_slices;
    _Atomic(uint64_t) dirty_old;
    /* Slices of runs in use that may hold resident memory beyond what their
     * pages carved, so that the telemetry's committed bytes stay an upper
     * bound on the resident ones (stats.c): the slices that were dirty when
     * their run was claimed (a new page takes dirty slices first,
     * segment_claim_slices), and those an earlier class of a kept page wrote
     * before another class took it (page_take_retained); both start with
     * nothing carved. Set by whoever claims or takes the run, cleared by
     * whoever releases it (segment_release_run, any thread): relaxed atomic
     * RMWs, on page transitions only; read racily by the telemetry alone. */
    _Atomic(uint64_t) prewritten_slices;
    /* Under purge_lock (purge.c): on the purge list; a pass is working on it
     * (it must not be unmapped meanwhile). purge_listed is also read without
     * the lock, seq_cst, by freers (purge.c step 3). */
    atomic_int purge_listed;
    int purge_busy;
    struct segment_s *purge_next, *purge_prev;
    /* Pass-only (under pass_lock, purge.c): the holds for the threads that
     * replace an exited owner (exited_ms). purge_held_mask: the free slices
     * the current hold took (dirty when it started), 0 when none is left;
     * purge_held_ms: when it started (segment_purge). trim_held_ms: when a
     * pass first held its marked pages back, 0 while none waits
     * (segment_abandoned_collect); also reset by an owner that kept the
     * segment at least that trim's wait, as it exits (segment_abandon_all:
     * the segment is off the list then, so no pass holds it). A hold lasts
     * at most its limit from its start, however many owners exit meanwhile
     * without having kept it that long: threads that reclaim the segment
     * one after another and exit, each setting exited_ms anew, kept its free
     * slices resident for as long as they came (review of bd56fce: a thread
     * every 200 ms, 3 MiB held for all 8 s). */
    uint64_t purge_held_mask, purge_held_ms, trim_held_ms;
    /* Huge mappings in the huge cache (large.c, under its lock). */
    bool huge_purged; /* purged since it was freed */
    bool huge_zero;   /* and reads as zero (MADV_DONTNEED) */
    /* Owner-only: when the owner took the segment (heap_segment_push, ms). */
    uint64_t owned_ms;
    /* Owner-only: the owning heap and the links in its segment list; under
     * abandoned_lock while abandoned, under cache_lock while on the segment
     * cache's overflow list (segment.c). */
    struct heap_s *heap;
    struct segment_s *next, *prev;
    /* Owner-only: a large block was freed here while other pages were in
     * use, so the segment may be worth handing off once a page of it empties
     * (page.c, page_hand_off_segment). */
    bool handoff_watch;
    /* Normal segments, owner-only writes: per slice, its distance to the first
     * slice of the run it belongs to (0 for a first or free slice), so a
     * pointer into any slice of a run finds the page with one load and a
     * subtraction. Here rather than in page_t: see page_t's block counts. */
    uint8_t slice_offset[SLICES_PER_SEGMENT];
    /* Normal segments: per slice, bit k = the k-th OS page of the slice was
     * given back by a trim (page.c, page_trim) while its small page held
     * live blocks elsewhere, and every block overlapping it is DROPPED: on
     * no free list and not live, handed out again only once the page's list
     * runs dry (page_restore_dropped) or its run is freed, both of which
     * clear the run's bits. Also set for the OS pages past the blocks a page
     * has carved (its blocks not carved yet, and its tail past its last
     * block) that a trim gave back on slices written before the page took
     * them (page.c, page_trim_tail): no carved block overlaps them, so they
     * are never counted as dropped; page_extend clears those it carves
     * blocks over, and a freed run or a new class the rest. So a set bit
     * is an OS page not resident (bar a MADV_FREE purge the kernel has not
     * taken yet): a trim never purges it again, and the telemetry's
     * committed bytes leave it out (stats.c).
     * Pages inside a block of several OS pages are marked and their block
     * dropped like any other (issue 3: unmarked, they were purged again by
     * every trim and counted as committed). 16 bits: OS pages of at least
     * 4 KiB (a trim does nothing with smaller ones), so at most
     * SLICES_PER_SEGMENT * 16 marked pages per segment. Written by whoever
     * may touch the page's free list (its owner under its heap lock or, in
     * page_extend, on the lock-free refill path inside its busy window; a
     * scavenger that quiesced the heap; the abandoned-segment pass with the
     * segment off its list); read by the telemetry, racily, like the page
     * fields. Here rather than in page_t: see page_t's block counts. */
    uint16_t trimmed[SLICES_PER_SEGMENT];
    /* Normal segments: bit i = the small page at slice i is new (page.c,
     * page_watch_new) or has had blocks freed into it since it was last
     * full or last trimmed (page_unfull, the free that a trim's
     * PAGE_FREE_SIGNAL sends to the slow path, and the abandoned segments'
     * collection): it may
     * hold free blocks under live ones that only a trim gives back. Set and
     * cleared by whoever may touch the page's free list (as `trimmed`); the
     * scavenger trims these pages of an idle heap or an abandoned segment
     * (page.c, "Trimming pages that still hold live blocks"). */
    uint64_t sparse_watch;
    union {
        /* Normal segments: one descriptor per slice; [0] is unused (the
         * header lives there). */
        page_t pages[SLICES_PER_SEGMENT];
        /* Huge mappings (large.c, spare pages): where in it a kernel
         * mapping (VMA) may begin, having received spare pages or grown by
         * fresh pages mapped after it; which mapping it is, new at every
         * move. */
        struct {
            huge_bounds_t huge_bounds;
            uint64_t huge_id;
        };
    };
} segment_t;

_Static_assert(sizeof(segment_t) <= SLICE_SIZE, "the segment header must fit in slice 0");
/* One page of header, not two: every segment, even a purged standby one, keeps
 * its header resident, and a header across a page boundary holds 4 KiB more. */
_Static_assert(sizeof(segment_t) <= 4096, "the segment header must fit in one 4 KiB page");
_Static_assert(offsetof(segment_t, thread_id) == 64,
               "thread_id starts the header's second cache line (see the struct)");
_Static_assert(PAGE_MAX_SLICES * SLICE_SIZE / MIN_ALIGN <= UINT16_MAX,
               "page_t's 16-bit block counts must hold a page's blocks");

/* A list of pages (doubly linked through page_t.next/prev). Owner-only. */
typedef struct page_queue_s {
    page_t *first, *last;
} page_queue_t;

/* A thread's heap. Everything here is owner-only unless marked. */
typedef struct heap_s {
    /* The malloc fast path: direct[(size + 15) / 16] is the page to pop from
     * for that size (the first page of its class queue), or the empty page. */
    /* Written by the owner, and by the scavenger while it has the heap
     * quiesced (release); the fast path reads it with acquire (a plain load on
     * x86-64) so that it sees the pages as the scavenger left them. */
    _Atomic(page_t *) direct[DIRECT_SLOTS];
    /* The same per class, for the fast path of sizes above DIRECT_MAX up to
     * SMALL_MAX (indexed by size_class): the first page of the class queue,
     * or the empty page; for a hot class (PAGE_HOT), also the page of the
     * owner's last free into a page of the class in use, until that page
     * runs dry (the malloc slow path points it back at the first) or leaves
     * the queue (every path that takes a page out of a queue updates its
     * class's slots). Written and read as direct[]; the owner writes a hot
     * class's slot on lock-free paths too, which the scavenger's quiescing
     * allows for (heap.c, step 4). */
    _Atomic(page_t *) direct_class[CLASS_COUNT];
    /* Pages with (possibly) free blocks, per size class, most useful first. */
    page_queue_t queues[CLASS_COUNT];
    /* Pages found with no free block; they come back when a block is freed. */
    page_queue_t full;
    /* The empty page kept per class (page.c, page_free_local_slow); may have
     * been reused since (then it is not empty any more). */
    page_t *retained[CLASS_COUNT];
    uint64_t retained_mask; /* bit c set = retained[c] is not NULL */
    /* Any thread: set (release) by a remote freer whose block landed in a page
     * of the full list; the owner exchanges it to 0 and scans `full`. */
    atomic_int xfull_pending;
    /* The owner's thread id; 0 when the heap is not in use. Written under
     * heap_pool_lock (heap_pool_take, heap_pool_put_locked, which keep the
     * index by id), where every walk of other threads' heaps reads it; the
     * owner reads its own freely. */
    uintptr_t thread_id;
    /* Any thread: set by a remote freer whose block was the first on a page's
     * xthread_free list; the scavenger exchanges it to 0 and looks for pages
     * whose blocks all came back while the owner was idle (purge.c). */
    atomic_int remote_pending;
    /* Set to 1 by its owner when a key destructor running after ebb's made
     * the heap (tls.exiting): the scavenger looks at it at every pass, idle
     * or not, until its owner is gone and it hands it back (heap.c, step 4),
     * for EXIT_PENDING_MAX_PASSES passes at most (it counts them here).
     * Cleared by heap_reset. (In a hole of the struct: heap_empty lies in
     * the one page of small globals, tests/test_exports.sh.) */
    atomic_int exit_pending;
    /* Owner (relaxed store), read by the scavenger: slow paths taken so far.
     * The scavenger's own record (under pass_lock): the count it last saw and
     * since when; a heap whose count has not moved for the purge delay is idle. */
    _Atomic(uint64_t) slow_count;
    uint64_t scav_seen_count;
    uint64_t scav_seen_ms;
    /* The scavenger's (under pass_lock): since when remote frees have been
     * pending on this heap; 0: none pending. */
    uint64_t scav_remote_ms;
    /* Set by the scavenger when remote frees have waited long on a heap whose
     * owner keeps running; the owner's next locked slow path collects
     * (heap_collect_asked) and clears it, recording how long that took (us),
     * which spaces the next request. */
    atomic_int collect_asked;
    _Atomic(uint64_t) collect_cost_us;
    /* The scavenger's: a request left for an idle owner that only the owner
     * can serve (no membarrier); not counted as the scavenger's work. */
    atomic_int collect_parked;
    /* Any thread: the owner kept an empty page for reuse (page.c); the
     * scavenger takes it back when the owner stays idle. */
    atomic_int retained_pending;
    /* Any thread: pages of the heap are marked in segment_t.sparse_watch;
     * the scavenger trims them once the owner stays idle (heap.c,
     * heap_scavenge). SPARSE_MARKED: a page left its full list with blocks
     * freed into it, or a trim signalled it (memory waiting for the trim;
     * its setter woke the scavenger); SPARSE_FRESH: new pages of classes up
     * to 1 KiB (page.c, page_watch_new), which woke nothing; SPARSE_FRESH_HOT:
     * a new page of a class above 1 KiB, which woke a running scavenger, or
     * is looked at by one that starts later (purge.c, scavenger_main). The
     * two FRESH bits may never hold anything to give back, and so do not
     * count as resident work for a forked child's decision to start a
     * scavenger (purge.c). Bits, set with fetch_or; the visit that trims
     * the heap's marked pages clears them all. */
    atomic_int sparse_pending;
    /* Under `lock`: the owner's tls.busy (set by the owner at heap creation,
     * NULL once it exited); 1 while the scavenger has the heap quiesced, when
     * the owner's lock-free paths must not touch the heap (heap.c). */
    atomic_uchar *busy;
    atomic_int revoked;
    /* The owner's kernel thread and process ids (set at heap creation): the
     * scavenger asks the kernel whether the owner still runs before it hands
     * back a heap it quiesced (heap.c, "Heaps of threads that died without
     * handing them back"). */
    int owner_tid, owner_pid;
    /* Segments this heap owns. */
    segment_t *segments;
    size_t segment_count;
    /* Held by the owner in its slow paths; taken by the fork handler so the
     * child finds every heap consistent (heap.c). Uncontended otherwise. */
    lock_t lock;
    /* Under heap_pool_lock: every heap ever created, the free heaps, and the
     * heaps in use whose thread_id falls in one bucket of heap.c's index. */
    struct heap_s *all_next;
    struct heap_s *pool_next;
    struct heap_s *id_next;
    bool in_use;
} heap_t;

/* ---------------------------------------------------------------------------
 * Size classes (alloc.c holds the tables)
 * ------------------------------------------------------------------------- */
extern const uint32_t class_block_size[CLASS_COUNT];
extern const uint8_t class_slice_count[CLASS_COUNT];
extern const uint16_t class_page_blocks[CLASS_COUNT]; /* blocks in a full-length page */

/* The size class of a request of `size` <= SMALL_MAX bytes. */
static inline unsigned size_class(size_t size)
{
    if (size <= 128)
        return size ? (unsigned)((size - 1) >> 4) : 0;
    size_t w = size - 1;
    unsigned b = 63u - (unsigned)__builtin_clzl(w);
    return 8u + (b - 7u) * 4u + (unsigned)((w >> (b - 2u)) & 3u);
}

/* ---------------------------------------------------------------------------
 * Pointer → metadata
 * ------------------------------------------------------------------------- */

/* The segment (or huge mapping) header of a block. (p - 1) rather than p: a huge
 * block aligned to SEGMENT_SIZE or more starts exactly on a segment boundary,
 * and its header sits one segment below it (large.c); every other block lies
 * strictly after its header, so both cases are one subtraction and a mask. */
static inline segment_t *ptr_segment(const void *p)
{
    return (segment_t *)(((uintptr_t)p - 1) & ~(uintptr_t)SEGMENT_MASK);
}

/* The page of a block inside a normal segment. */
static inline page_t *segment_page_of(segment_t *seg, const void *p)
{
    size_t idx = ((uintptr_t)p - (uintptr_t)seg) >> SLICE_SHIFT;
    return &seg->pages[idx - seg->slice_offset[idx]];
}

static inline uint8_t *page_start(const page_t *page)
{
    segment_t *seg = (segment_t *)((uintptr_t)page & ~(uintptr_t)SEGMENT_MASK);
    size_t idx = (size_t)(page - seg->pages);
    return (uint8_t *)seg + idx * SLICE_SIZE;
}

/* Whether x is the start of one of the `capacity` blocks of `bs` bytes carved
 * from `start`: the test every reader of a free list applies to a link before
 * it follows it (a corrupted or stale link must not send it astray). */
static inline bool page_is_carved_block(uintptr_t x, uintptr_t start, size_t bs, size_t capacity)
{
    return x >= start && x < start + capacity * bs && (x - start) % bs == 0;
}

/* The number of slices in a mask of a segment's slices. Inline bit
 * arithmetic: the builtin is a call into libgcc without -mpopcnt, which
 * baseline x86-64 lacks, and this runs whenever a page empties. */
static inline unsigned slices_count(uint64_t mask)
{
    mask -= (mask >> 1) & 0x5555555555555555u;
    mask = (mask & 0x3333333333333333u) + ((mask >> 2) & 0x3333333333333333u);
    mask = (mask + (mask >> 4)) & 0x0f0f0f0f0f0f0f0fu;
    return (unsigned)((mask * 0x0101010101010101u) >> 56);
}

static inline segment_t *page_segment(const page_t *page)
{
    return (segment_t *)((uintptr_t)page & ~(uintptr_t)SEGMENT_MASK);
}

/* Forget every trim of the page's run (segment_t.trimmed): its dropped blocks
 * are back on its list, or the run is new or free. Whoever may touch the
 * page's free list. */
static inline void page_trimmed_clear(const page_t *page)
{
    segment_t *seg = page_segment(page);
    size_t idx = (size_t)(page - seg->pages);
    size_t count = page->slice_count; /* read once: the stores may alias it */
    if (count > SLICES_PER_SEGMENT - idx)
        count = SLICES_PER_SEGMENT - idx;
    __builtin_memset(&seg->trimmed[idx], 0, count * sizeof seg->trimmed[0]);
}

/* segment_t.thread_id while the scavenger has the owner's heap quiesced: no
 * thread has this id, so every free takes the remote path. */
#define THREAD_ID_QUIESCED ((uintptr_t)1)
/* Set in the id of a debug heap (debug.c): thread pointers are aligned, so no
 * thread has such an id and free's fast path never claims a debug block. */
#define THREAD_ID_DEBUG ((uintptr_t)2)

/* The calling thread's id: its thread pointer, unique among live threads. */
static inline uintptr_t thread_id_self(void)
{
    return (uintptr_t)__builtin_thread_pointer();
}

/* ---------------------------------------------------------------------------
 * os.c — the only code that talks to the OS
 * ------------------------------------------------------------------------- */
typedef struct os_info_s {
    size_t page_size;
    bool thp_always; /* transparent huge pages in "always" mode */
    bool static_exe; /* no program interpreter: a statically linked process */
    bool via_loader; /* a dynamic program started as `ld.so ./prog`, whose
                        /proc/self/exe is the loader */
    size_t map_max;  /* no mapping can be bigger: the size of the address
                        space below the initial stack, rounded up to a power
                        of two (2^47 on x86-64) */
} os_info_t;
extern os_info_t os_info;

void os_init(void);
/* The program's ELF program headers as the kernel passed them (AT_PHDR; 0
 * if it did not), their count in *count (AT_PHNUM). */
uintptr_t os_exe_phdr(size_t *count);
/* Whether the kernel started this program with raised privileges (AT_SECURE:
 * a set-user-ID or set-group-ID file, or file capabilities), so that its
 * environment comes from a less privileged user. Callable before os_init. */
bool os_raised_privileges(void);
/* errno: no primitive below changes it, whether it succeeds or fails. A
 * refused request is often retried another way (a smaller region, no room,
 * after the caches are given back), and a malloc that then succeeds must not
 * return with the first refusal's ENOMEM; the allocating entry points set
 * ENOMEM themselves when they return NULL (alloc.c, debug.c). purge.c
 * restores errno around pthread_create. */
/* Map `size` bytes (a multiple of the page size) readable and writable, the
 * start aligned to `align` (a power of two >= page size) at `align_offset`
 * bytes into the mapping: (start + align_offset) % align == 0. NULL on failure.
 * Memory is zero. */
void *os_map_aligned(size_t size, size_t align, size_t align_offset);
/* The same, leaving (best effort) `room` bytes of address space free right
 * after the mapping, so that it can later grow in place. */
void *os_map_aligned_room(size_t size, size_t room, size_t align, size_t align_offset);
void os_unmap(void *p, size_t size);
/* Whether a mapping of `size` bytes could be granted at all: not above
 * os_info.map_max, nor above what the kernel's overcommit heuristic grants
 * (os_overcommit_allows), nor above the address-space limit (RLIMIT_AS, read
 * now: a program may change it). False means giving back caches cannot help
 * it. */
bool os_size_mappable(size_t size);
/* Whether the kernel would map a block of `size` bytes under its default
 * overcommit policy, were ebb's mappings not MAP_NORESERVE: false only under
 * vm.overcommit_memory = 0 for more than RAM and swap together. Costs one
 * comparison below that. */
bool os_overcommit_allows(size_t size);
/* Grow or shrink a mapping in place; false if it cannot be done in place. */
bool os_remap_inplace(void *p, size_t old_size, size_t new_size);
/* Map fresh pages at [end, end + size) if nothing is mapped there (typically
 * right after one of ebb's mappings, to grow it); false if anything is. */
bool os_extend(void *end, size_t size);
/* Keep [at, at + size), where nothing is mapped, from being mapped: an
 * inaccessible range, no page, not counted in os_mapped_bytes; false if
 * anything is there, the OS refuses, or an address-space limit
 * (RLIMIT_AS) is set, under which a hold would take from the program. Undone by os_unhold, within the same
 * call of the caller's (debug mode's moves of a huge block, debug.c). */
bool os_hold(void *at, size_t size);
void os_unhold(void *at, size_t size);
/* Move the pages of [src, src + size) to dst, which must lie in one of ebb's
 * own mappings (whatever was there is unmapped), growing them to new_size
 * there. No byte is copied; src is left unmapped. src must be one kernel
 * mapping (VMA): Linux before 6.17 unmaps dst and then fails on several, and
 * 6.17 on may leave such a move half done. False on failure: src as it was,
 * dst as it was or mapped again fresh. */
bool os_move(void *src, size_t size, size_t new_size, void *dst);
/* Give the pages back. With MADV_DONTNEED (the default) their RSS goes at
 * once and they read back as zero (returns true); with MADV_FREE the kernel
 * takes them when it needs memory and their contents are undefined until
 * written (returns false). */
bool os_purge(void *p, size_t size);
/* Purges gathered to be made with as few system calls as the kernel allows
 * (os.c, "Batched purges"): one process_madvise for up to OS_PURGE_BATCH
 * ranges, where the kernel has it, instead of a madvise each. Ranges that
 * touch are merged. Until the batch is flushed its ranges keep their
 * contents: the caller flushes before anything can hand them out again
 * (before it unlocks, unquiesces or lists what they belong to). 32 ranges:
 * 528 bytes on the caller's stack, which may be a malloc's slow path (an
 * inline pass) on a small thread stack; the flush's cost hardly changes
 * from 16 ranges up (os.c). */
#define OS_PURGE_BATCH 32
typedef struct os_purge_batch_s {
    size_t count;
    bool dirty; /* a range flushed when the batch was full does not read as zero */
    struct iovec range[OS_PURGE_BATCH];
} os_purge_batch_t;

static inline void os_purge_batch_init(os_purge_batch_t *b)
{
    b->count = 0;
    b->dirty = false;
}

/* Add [p, p + size) (flushing first if the batch is full). */
void os_purge_add(os_purge_batch_t *b, void *p, size_t size);
/* Purge what the batch holds now and empty it; whether every range it has
 * purged since the last flush reads back as zero (os_purge's answer). */
bool os_purge_flush(os_purge_batch_t *b);
/* Give the pages back and make them read as zero, whatever EBB_PURGE_METHOD
 * says (MADV_DONTNEED; counted as a purge). p: private anonymous memory.
 * False if the kernel refused (locked pages: mlockall): contents unchanged. */
bool os_zero(void *p, size_t size);
/* Mark a range so khugepaged never folds it into a huge page. */
void os_no_huge_pages(void *p, size_t size);
/* Ask for a range to be backed by transparent huge pages where it can be
 * (MADV_HUGEPAGE; nothing where THP is off). The whole of a mapping: a
 * subrange would split it in two, and mremap moves only whole mappings. */
void os_huge_pages(void *p, size_t size);
uint64_t os_now_ms(void);
/* Milliseconds from `then` to `now`; 0 if `then` is later. A purge pass reads
 * the clock once, at its start, and other threads stamp their frees after
 * that: a plain subtraction wrapped, and a mapping freed during a pass
 * looked older than the unmap delay (review finding: a freshly freed huge
 * block unmapped at once). */
static inline uint64_t ms_since(uint64_t now, uint64_t then)
{
    return now > then ? now - then : 0;
}
uint64_t os_now_us(void);
/* Into *ts: the CLOCK_MONOTONIC time `ms` from now, a deadline for
 * pthread_cond_clockwait on that clock (a wall clock set back while the
 * scavenger waited for an unmap deadline delayed the unmap as long: review
 * finding). */
struct timespec;
void os_monotonic_after_ms(struct timespec *ts, uint64_t ms);
void os_sleep_ms(long ms);
void os_futex_wait(atomic_int *word, int expected);
void os_futex_wait_ms(atomic_int *word, int expected, long ms);
void os_futex_wake_one(atomic_int *word);
void os_futex_wake_all(atomic_int *word);
/* Give the CPU to another thread (sched_yield): the back-off of a wait for
 * another thread's short step. */
void os_yield(void);
/* Send signal `sig` to the calling thread (raise). Tests' fault injection. */
void os_raise(int sig);
/* End the process at once with exit status `code`: no atexit handler, no
 * destructor and no stdio flush runs (_exit). */
_Noreturn void os_exit_now(int code);
void os_write_stderr(const char *s, size_t len);
/* Open `path` for reading; -1 on failure. errno is kept. */
int os_open_read(const char *path);
/* Open `path` for appending (created 0644); -1 on failure, with the
 * reason's errno value in *error. errno is kept. */
int os_open_append(const char *path, int *error);
/* Which open file fd is (its device and inode folded into one nonzero
 * number), or 0 if fd is not open. */
uint64_t os_fd_identity(int fd);
bool os_fd_is_regular_file(int fd);
/* A close-on-exec copy of fd numbered `lowest` or above; -1 if none. */
int os_fd_copy_high(int fd, int lowest);
/* The current directory; false if it does not fit in cap bytes. */
bool os_getcwd(char *buf, size_t cap);
/* Write all of s (retrying short writes); errors are ignored. */
bool os_write_fd(int fd, const char *s, size_t len);
void os_close(int fd);
int os_getpid(void);
int os_gettid(void);
/* True while the process has never created a thread (glibc's
 * __libc_single_threaded); false where the C library cannot tell. glibc
 * clears it before it creates the process's first thread and (2.36) never
 * sets it again: not after a join, nor in the child of a multi-threaded
 * parent. Inline: calloc reads it while no scavenger exists (purge.c). */
static inline bool os_single_threaded(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    return __libc_single_threaded != 0;
#else
    return false; /* cannot tell: behave as a threaded process */
#endif
}
/* False once the thread `tid` of this process has exited. */
bool os_thread_alive(int tid);
/* The threads of this process now (/proc/self/stat), -1 if unreadable. */
int os_thread_count(void);
/* Debug mode's leak report: the registers of every other thread of the
 * process but thread `skip_tid` (0: none) and those named `skip_name`, as a
 * signal found them (os.c, "Other threads' registers", says how, which
 * registers, and what it costs the program). The id is checked before
 * anything is read from /proc, so a thread skipped by id is skipped even
 * when its status cannot be read (no descriptor left). fn is called
 * once per thread that answered, from the calling thread; `slots` is the
 * caller's scratch for OS_REGISTERS_BATCH threads (it holds copies of
 * pointers: not a root). Returns how many threads could not be asked or did
 * not answer (their signal blocked, or no answer within 500 ms), UINT_MAX if
 * none could be (no free real-time signal, /proc unreadable). *listed_whole
 * is false when the listing of /proc/self/task failed part way: the threads
 * not listed yet were not asked, nor counted in the return value. */
#define OS_REGISTERS_BATCH 64
/* x86-64 with AVX-512 and APX: 23 general registers, xmm0-15 (32 words),
 * ymm0-15's upper halves (32), the opmask registers k0-7 (8), zmm0-15's
 * upper 256 bits (64), zmm16-31 (128), r16-31 (16). */
#define OS_REGISTER_WORDS 304
typedef struct os_registers_s {
    uintptr_t words[OS_REGISTER_WORDS]; /* the thread's registers (os.c, registers_copy) */
    size_t count;                       /* words used */
} os_registers_t;
unsigned os_other_threads_registers(os_registers_t *slots, int skip_tid, const char *skip_name,
                                    void (*fn)(const os_registers_t *regs, void *arg), void *arg,
                                    bool *listed_whole);
/* Copy up to n bytes of this process's memory at `from` into `to` without
 * faulting ("Reading this process's own memory"): the count copied, short
 * where the memory stops being mapped (0: not mapped at `from`); -1 if the
 * system refused every way to read (no pipe could be made). errno kept. */
ssize_t os_read_own(void *to, const void *from, size_t n);
/* Read the byte at p without faulting: 1 and *out set if it is mapped, 0 if
 * it is not, -1 if the system refused every way to tell (os_read_own). */
int os_peek_byte(const void *p, uint8_t *out);
/* Read up to cap bytes of a file; returns the count (0 on any error). */
size_t os_read_file(const char *path, char *buf, size_t cap);
/* Call fn for each record of a file of any length, records ending with
 * `sep` ('\n': lines; '\0': /proc/self/environ's entries), the separator
 * left out, reading it through buf, cap bytes: a record longer than that is
 * given cut to cap bytes. False if the file could not be opened or a read
 * failed (the records before the failure were given). */
bool os_for_each_record(const char *path, char sep, char *buf, size_t cap,
                        void (*fn)(const char *rec, size_t len, void *arg), void *arg);
static inline bool os_for_each_line(const char *path, char *buf, size_t cap,
                                    void (*fn)(const char *line, size_t len, void *arg), void *arg)
{
    return os_for_each_record(path, '\n', buf, cap, fn, arg);
}
/* One line of /proc/self/maps ("start-end perms offset dev inode path"),
 * len bytes, not NUL-terminated. */
typedef struct os_maps_line_s {
    uintptr_t start, end;
    char perms[5];    /* "rw-p", NUL-terminated */
    const char *path; /* into the line, path_len bytes; NULL if none */
    size_t path_len;
} os_maps_line_t;
bool os_maps_line_parse(const char *line, size_t len, os_maps_line_t *out);
/* Debug mode's leak report: which pages are used (os.c, "Which pages are
 * used"). `fd` is /proc/self/pagemap open for reading (os_open_read).
 * PAGEMAP_SCAN (Linux 6.7): the ranges of the page-aligned [start, end)
 * whose pages are present or swapped out, not the shared zero page, into
 * regions (cap of them, ascending); *walk_end is where the kernel's walk
 * stopped (end when it went through; earlier when regions filled up).
 * Returns how many ranges, or -errno: -ENOTTY or -EINVAL where the kernel
 * has no such call. */
typedef struct os_page_region_s {
    uint64_t start, end, categories; /* the kernel's struct page_region */
} os_page_region_t;
long os_pagemap_scan(int fd, uintptr_t start, uintptr_t end, os_page_region_t *regions, size_t cap,
                     uintptr_t *walk_end);
/* Read up to n bytes of fd at `offset` (pread): the count read, which may
 * be short (pagemap's entries: whole ones only, as far as the kernel got);
 * -1 if the read failed. A cancellation point: callers have cancellation
 * disabled (debug_report_lock). */
ssize_t os_pread(int fd, void *buf, size_t n, off_t offset);
/* mincore: bit 0 of vec[i] says whether page i of the page-aligned [p, p +
 * size) is in memory (a shared mapping's: in the page cache, mapped here or
 * not). False if refused (a sandbox) or part of the range is not mapped:
 * vec is then undefined. */
bool os_mincore(const void *p, size_t size, unsigned char *vec);
/* Debug mode's symbolizer (os.c, "Files and programs the symbolizer
 * reads"); the callers hold the report lock (cancellation disabled).
 * os_exe_path: this process's executable's path (/proc/self/exe) into buf,
 * NUL-terminated (cap >= 1): its length, 0 (buf empty) if unreadable. */
size_t os_exe_path(char *buf, size_t cap);
/* The identity of the file at `path` as it is now: out[0..3] its device,
 * inode, and modification time's seconds and nanoseconds. False if it
 * cannot be found (out untouched). */
bool os_file_version(const char *path, uint64_t out[4]);
/* The file at `path` mapped whole, read-only and private; its size in
 * *size. NULL if it cannot be opened or mapped, or is empty. Not one of
 * ebb's mappings (not counted): give it back with os_unmap_file. */
const void *os_map_file(const char *path, size_t *size);
void os_unmap_file(const void *p, size_t size);
/* Run the program at `path` (absolute) with argv (NULL-terminated) and an
 * empty environment, its standard input and error on /dev/null, and wait for it
 * to end: what it wrote to its standard output, the first cap - 1 bytes
 * (cap >= 1), in buf, NUL-terminated; returns the count. 0 (buf empty) if
 * the program is not executable or could not be started. No allocation:
 * vfork, execve and a pipe. */
size_t os_run_output(const char *path, char *const argv[], char *buf, size_t cap);
/* Ranges purged (os_purge, os_zero, a batch's ranges); and the system calls
 * that purged them (madvise, process_madvise). */
unsigned long os_purge_calls(void);
unsigned long os_purge_syscalls(void);
/* Whether `more` threads could still be created under RLIMIT_NPROC (for a
 * user it applies to: all the system's threads count, an upper bound on the
 * user's own) and under the pids limit of the process's cgroup and of each
 * of its ancestors. True when nothing can be read. A few file reads. */
bool os_thread_room(long more);
/* Whether the calling thread runs a real-time policy (SCHED_FIFO, SCHED_RR).
 * A system call, no lock of the C library's: pthread_getschedparam takes the
 * thread's own lock, which glibc's pthread_getattr_np holds while it reads
 * /proc/self/maps with malloc (a forked child's leak report hung there when
 * that malloc started the scavenger). */
bool os_thread_realtime(void);
/* The C library's count of running threads, whose fall to 0 ends the
 * process (glibc's __nptl_nthreads), or NULL where it cannot be found. The
 * first call looks it up (dlvsym: call it where the loader's lock may be
 * taken, holding no lock of ours). */
_Atomic(unsigned) *os_libc_thread_count(void);
/* Asymmetric fences: after os_membarrier() returns true, every other running
 * thread of the process has executed a full memory barrier. The register
 * call must succeed first (Linux >= 4.14); a later call can still fail (a
 * seccomp filter installed since), and then no barrier ran. */
bool os_membarrier_register(void);
bool os_membarrier(void);
/* Counters (relaxed atomics; exact when quiescent). */
size_t os_mapped_bytes(void);
unsigned long os_unmap_calls(void);
unsigned long os_purged_bytes(void);
/* Tests: see tests/test_oom.c. */
void os_inject_failures(long skip, long count);
unsigned long os_map_calls(void);

/* ---------------------------------------------------------------------------
 * text.c — formatting into a fixed buffer, written to a file descriptor
 * ------------------------------------------------------------------------- */
typedef struct text_s {
    char buf[512];
    size_t len;
    int fd;
    bool cut; /* a write failed: nothing more is written (a report then lacks its end) */
    /* text_init_spool: where full buffers gather until text_flush writes
     * them with the rest in one write (spool_len bytes of spool_cap). */
    char *spool;
    size_t spool_len, spool_cap;
} text_t;
void text_init(text_t *t, int fd);
/* The same, for a report written in one piece: the text gathers in `spool`
 * (cap bytes) and text_flush writes it all with one write, so that reports
 * of processes sharing a file (O_APPEND) or a pipe (up to PIPE_BUF) do not
 * interleave mid-line. Past cap, what gathered is written and gathering
 * starts again. */
void text_init_spool(text_t *t, int fd, char *spool, size_t cap);
void text_add(text_t *t, const char *s);
void text_add_n(text_t *t, const char *s, size_t n);
void text_add_u64(text_t *t, uint64_t v, unsigned width);
void text_add_long(text_t *t, long v);
void text_add_mib(text_t *t, uint64_t bytes);
void text_add_ratio(text_t *t, double r);
void text_add_hex(text_t *t, uintptr_t v);
size_t text_format_hex(char *out, uintptr_t v);
const char *text_cstr(text_t *t);
void text_flush(text_t *t);
bool text_expand_path(const char *pattern, char *out, size_t cap);
/* Keep fd 2 as it is now, and a copy of it, for reports (process init). */
void text_stderr_keep(void);
/* Where a report to stderr goes now: 2, the copy kept, or -1 (text.c). */
int text_stderr(void);
/* Where one report goes: `pattern`'s file opened for it, else text_stderr
 * (text.c); text_report_close closes what it opened. */
int text_report_open(const char *option, const char *pattern, char *path, size_t cap, bool *opened);
void text_report_close(int fd, bool opened);
/* A relative path pattern made absolute from the current directory, in buf. */
const char *text_absolute_path(const char *pattern, char *buf, size_t cap);

/* ---------------------------------------------------------------------------
 * options.c — the only code that reads the environment (EBB_* variables)
 * ------------------------------------------------------------------------- */
#include "options.h"

void options_init(void);
/* In a program started with raised privileges: take every EBB_* entry out
 * of environ, so that a child it runs (as root, after setuid(0)) does not
 * honour them either. Nothing otherwise. From ebb's constructor only. */
void options_forget_untrusted(void);
long option_get(option_id_t id);
/* A text option (EBB_STATS_FILE), or NULL when unset. */
const char *option_get_text(option_id_t id);

/* ---------------------------------------------------------------------------
 * purge.c — delayed purge, the scavenger thread and its wake-up protocol
 * ------------------------------------------------------------------------- */
void purge_init(void);
/* Step 3 of the purge protocol: the segment has dirty slices; list it. */
void purge_segment_dirty(segment_t *seg);
/* Before a segment is unmapped: take it off the purge list (waits for a pass
 * that is working on it). */
void purge_segment_forget(segment_t *seg);
/* Something purgeable appeared outside the segment list (huge cache,
 * abandoned segments, remote frees into an idle heap): make sure a pass runs. */
void purge_wake(void);
/* The same if the scavenger thread exists, else nothing: for work that can
 * wait until the thread starts for another reason, and must not start it
 * (page.c, page_watch_new: a forked child that allocates before its exec).
 * The work must be recorded where a starting thread looks (scavenger_main). */
void purge_nudge(void);
/* Called on slow paths holding no lock: start the scavenger thread if it is
 * wanted and `may_start` (allocation paths only, never free: see purge.c), or
 * run a pass inline when there is no thread and one is due. */
void purge_poll(bool may_start);
/* The same for an allocation that took no slow path (calloc's, while it
 * watches: alloc_calloc_slow): only the start of a wanted thread, no pass. */
void purge_poll_start(void);
/* calloc's state (alloc.c, ebb_calloc): its fast path runs while this is 0
 * (one load and one branch, as debug_enabled alone was before), or is
 * CALLOC_WATCH_THREADS and the process single-threaded. Bits:
 * CALLOC_DEBUG, set once by debug_init (debug mode zeroes in its own path);
 * CALLOC_WATCH_THREADS, while no scavenger exists in a solo process: a calloc
 * that finds the process threaded starts ours, and the program's first
 * pthread_create callocs the new thread's TLS vector (purge.c, "solo");
 * CALLOC_WATCH_WANTED, while a scavenger is wanted and not started: every
 * calloc may start it. purge.c sets and clears the two WATCH bits. */
enum { CALLOC_DEBUG = 1, CALLOC_WATCH_THREADS = 2, CALLOC_WATCH_WANTED = 4 };
extern ebb_internal atomic_uint alloc_calloc_slow;
/* The process holds real memory: the scavenger will be started (lazily). */
void purge_want_thread(void);
/* What a free leaves must be purged by the free itself, now: with
 * EBB_PURGE_DELAY=0, and while no scavenger exists to purge it later (the
 * thread is then asked for), unless the process is solo (purge.c). */
bool purge_at_free(void);
/* The same for a run of slices (`mask`) that a free is about to leave dirty
 * in `seg`: also true when a solo process would have more than
 * SOLO_PENDING_MAX waiting for a pass with it (purge.c, "solo"). */
bool purge_slices_at_free(const segment_t *seg, uint64_t mask);
/* Whether an emptied page may be kept for reuse: not while no scavenger
 * exists to take it back later (purge.c; the thread is then asked for). */
bool purge_keeps_empty_pages(void);
/* Run a pass now; with `force`, return everything regardless of age, and
 * with `force_debug` debug mode's quarantine and reuse cache too. */
void purge_run(bool force, bool force_debug);
/* The OS refused memory: unmap every cache of free address space (the
 * segment cache and the last region's rest, the huge cache and its spares)
 * so the caller can retry once. True if anything was unmapped. Takes
 * segment.c's and the huge cache's locks: the caller may hold the heap pool's
 * or a heap's, never those (heap.c, the lock order). */
bool purge_release_caches(void);
/* Lock order for fork (heap.c): pass_lock first, purge_lock after segment.c's. */
void purge_fork_prepare_first(void);
void purge_fork_prepare_last(void);
void purge_fork_parent(void);
void purge_fork_child(void);
void purge_fork_child_restart(void);
/* The scavenger's thread name, set by its creator before the creator's call
 * returns (it shows in top -H). It blocks every signal; the leak report
 * leaves it out of the threads it asks for their registers (it holds none of
 * the program's pointers): by its id (purge_thread_tid), which needs no read
 * of /proc, and by this name, which covers a scavenger that did not run
 * within purge_thread_tid's wait and that of another copy of ebb in the
 * process (each needs its status readable). */
#define PURGE_THREAD_NAME "ebb-purge"
/* Tests and telemetry. */
unsigned long purge_pass_count(void);
unsigned long purge_wakeup_count(void);
int purge_thread_state(void);
bool purge_thread_running(void);
/* The scavenger's thread id, 0 if this process has none. One just created
 * is waited for until it has run (500 ms at most; then 0). */
int purge_thread_tid(void);
/* The leak report at exit: no scavenger is started from now on. The process
 * is ending, and the report's own calls into the C library allocate holding
 * the C library's locks (pthread_getattr_np holds the thread's own while it
 * reads /proc/self/maps), which a thread start may take again: a forked
 * child's report hung so. */
void purge_forbid_thread(void);
/* Tests: the creator of the scavenger sleeps `ms` between pthread_create and
 * marking it running (the window of the STARTING state). */
void purge_inject_start_delay(long ms);
/* Tests: the scavenger sleeps `ms` before it leaves the C library's thread
 * count (purge.c, "Not one of the program's threads", step 3). */
void purge_inject_leave_count_delay(long ms);

/* ---------------------------------------------------------------------------
 * segment.c — segments, the segment map, abandonment, the segment cache
 * ------------------------------------------------------------------------- */
/* Allocate a run of `count` slices aligned to `align_slices` for `heap`, from
 * its segments, a reclaimed abandoned one, the cache, or a new mapping. Returns
 * the first slice's descriptor, not yet initialized, or NULL (out of memory). */
page_t *segment_alloc_run(heap_t *heap, size_t count, size_t align_slices);
/* The longest run of `least` to `most` slices, all resident (freed and not
 * purged yet), in one of `heap`'s own segments; NULL if none has `least`. As
 * segment_alloc_run, the descriptor is not initialized. */
page_t *segment_alloc_resident_run(heap_t *heap, size_t least, size_t most);
/* Take into `heap` an abandoned segment with a page of class `cls` that had
 * room, and adopt its small pages into the heap's queues. False if none of the
 * first RECLAIM_SCAN_MAX abandoned segments has one, or if the heap has a
 * resident free run for a page of the class (it carves there, and leaves the
 * segment, with what its thread freed, to a thread that has none). */
bool segment_reclaim_for_class(heap_t *heap, unsigned cls);
/* A remote free into a small page of class `cls` of `seg`, which its caller
 * found abandoned (XTHREAD_ABANDONED in the list word it is about to CAS):
 * true if the segment's room mask may lack the class, and then the caller
 * pushes its block between segment_abandoned_room_lock(seg, cls), which
 * records the room, and segment_abandoned_room_unlock(). */
bool segment_abandoned_room_unknown(const segment_t *seg, unsigned cls);
void segment_abandoned_room_lock(segment_t *seg, unsigned cls);
void segment_abandoned_room_unlock(void);
/* Return a page's slices to its segment (any thread may call this for a large
 * page; small pages only by their owner). */
void segment_free_run(page_t *page);
/* Owner, heap lock held: keep a large page's first `keep` slices, release the rest. */
void segment_shrink_run(page_t *page, size_t keep);
/* Owner: the first `bytes` of `page`'s run may be resident whatever the page
 * carves from now on (an earlier class wrote them: page_take_retained). */
void segment_run_mark_prewritten(page_t *page, size_t bytes);
/* The owner's segment became entirely free: release it unless it is the heap's
 * last one. */
void segment_maybe_release(heap_t *heap, segment_t *seg);
/* Owner, lock held: give `seg`, which holds no page any more, to the shared
 * cache even if it is the heap's last segment. */
void segment_hand_off(heap_t *heap, segment_t *seg);
/* Would a segment released now stay mapped for reuse (the cache has room, or
 * the overflow list keeps it for a purge delay)? Approximate. */
bool segment_cache_keeps(void);
/* Release every entirely free segment of `heap`, its last one too. */
void segment_release_empty(heap_t *heap);
/* Thread exit: hand `heap`'s segments over (free ones released). */
void segment_abandon_all(heap_t *heap);
/* A large page freed by a thread that does not own its segment. */
void segment_free_large_remote(segment_t *seg, page_t *page);
/* Is p inside a segment or huge mapping of ours? (segment map lookup) */
bool segment_map_contains(const void *p);
/* The start of the first unit (SEGMENT_SIZE, aligned) at or after `from` and
 * before `to` whose bit is set in the segment map; `to` if none. For walks
 * over big ranges that must step around ebb's own memory. */
uintptr_t segment_map_next(uintptr_t from, uintptr_t to);
void segment_map_set(const void *seg, bool present);
/* One purge step over a segment's dirty free slices: those dirty for a whole
 * pass period, unless the segment's owner exited less than `keep_ms` before
 * `now_ms` (all of them with `force`). True if dirty slices remain. *tell:
 * the owner to tell once the segment is unpinned, if the step left it
 * entirely free (unchanged otherwise). */
bool segment_purge(segment_t *seg, uint64_t now_ms, uint64_t keep_ms, bool force, uintptr_t *tell);
/* Unmap cached segments past the unmap delay (all with `force`), keeping
 * SEGMENT_STANDBY. True if some remain that a later pass must unmap. */
bool segment_cache_decay(uint64_t now_ms, bool force);
/* Collect remote frees into abandoned segments, free their empty pages,
 * release the segments that became free; trim the marked pages of those
 * abandoned at least `trim_quiet_ms` before `now_ms` (all pages of all of
 * them with `force`). */
void segment_abandoned_collect(uint64_t now_ms, uint64_t trim_quiet_ms, bool force);
/* An abandoned segment may have something to give back (see segment.c). */
void segment_abandoned_touch(void);
bool segment_abandoned_pending(void);
bool segment_cache_pending(void);
/* purge.c: whether work due at due_ms is more than two purge delays away;
 * if so it is noted as the scavenger's next deadline, not as pending. */
bool purge_due_later(uint64_t due_ms, uint64_t now_ms);
/* Unmap the segment cache, its overflow and the last region's unused rest
 * (out-of-memory retry: purge_release_caches); true if there was any. */
bool segment_cache_release(void);
/* Fork: take and release every global lock of this module. */
void segment_fork_lock(void);
void segment_fork_unlock(void);

/* ---------------------------------------------------------------------------
 * page.c — pages, their free lists, the per-heap page queues
 * ------------------------------------------------------------------------- */
/* Slow path of malloc for size class `cls`: find or make a page with a free
 * block and return one (owner's heap, lock held). NULL when out of memory. */
void *page_alloc_slow(heap_t *heap, unsigned cls);
/* A local free emptied a page (used == 0), or hit a page in the full list or
 * signalled by a trim. */
void page_free_local_slow(heap_t *heap, page_t *page);
/* A local free of p (in `seg`) left its page in use with in_full not 0 and
 * not a hot class's (or in a thread without a heap): page_free_local_slow's
 * case. */
void page_free_local_flagged(heap_t *heap, segment_t *seg, void *p);
/* A block of `page` freed by a thread that does not own its segment. */
void page_free_remote(segment_t *seg, page_t *page, block_t *block);
/* Collect remote frees into every page of the heap; free empty pages
 * (all of them if `force`, else keep one per class as usual). */
void heap_collect_pages(heap_t *heap, bool force);
/* Reclaim: adopt a page of an abandoned segment into `heap`. */
void page_adopt(heap_t *heap, page_t *page);
/* Scavenger, holding heap->lock of an owner that is not in a slow path: free
 * the pages the owner's fast paths cannot reach whose blocks all came back
 * through xthread_free. */
void heap_steal_free_pages(heap_t *heap);
/* malloc_trim(0) / ebb_collect(true), for a small page that still holds
 * live blocks: give back the OS pages that only its free blocks cover,
 * those inside one block too (dropping the blocks they overlap from its
 * free list, segment_t.trimmed), skipping those an earlier trim gave back
 * whose blocks have not gone back on the list since. The caller may touch
 * the page's free list (owner under its lock, quiesced heap, abandoned
 * segment off its list) and collected its remote frees first. The OS pages
 * go into `batch`, which the caller flushes before it lets go of the page. */
void page_trim(page_t *page, os_purge_batch_t *batch);
/* The same for every page of a heap (owner, or quiesced; lock held), after
 * heap_collect_pages. */
void heap_trim_pages(heap_t *heap);
/* The same for the pages of a heap marked in segment_t.sparse_watch: the
 * scavenger's visit to an idle heap (quiesced, lock held). */
void heap_trim_watched(heap_t *heap);
/* Abandoned segment off its list (the caller's): trim its small page at
 * slice i if it is marked in sparse_watch. */
void page_trim_if_watched(segment_t *seg, size_t i, os_purge_batch_t *batch);
/* Whether some OS page of `page`'s run was given back by a trim. */
bool page_has_dropped(const page_t *page);
/* Whether block `i` of the page is a dropped one (segment_t.trimmed). */
bool page_block_dropped(const page_t *page, size_t i);
/* How many of the page's carved blocks are dropped: capacity = used + free
 * blocks + dropped blocks. Exact for the page's owner; a bound for racy
 * readers (the telemetry). */
size_t page_dropped_count(const page_t *page);
/* Abandoned segment (no owner): collect remote frees; free the page if empty
 * (then true). The page stays abandoned (XTHREAD_ABANDONED). */
bool page_collect_abandoned(page_t *page);
/* Thread exit: mark a small page in use of a segment about to be abandoned
 * (page.c, "whom a remote free tells", step 4). */
void page_mark_abandoned(page_t *page);
/* Initialize the run starting at `page` as a large one-block page. */
void page_init_large(heap_t *heap, page_t *page, size_t slices, bool zero);
void heap_direct_update(heap_t *heap, unsigned cls);

/* ---------------------------------------------------------------------------
 * heap.c — thread heaps, TLS, thread exit, process init, fork
 * ------------------------------------------------------------------------- */
extern heap_t heap_empty;
extern page_t page_empty;

/* 1 while this thread runs a path that touches its heap without holding the
 * heap's lock (the fast paths, and the lock-free start of the slow paths).
 * The scavenger reads it, through heap_t.busy, to know that the owner is not
 * in the middle of one (heap.c, "quiescing an idle heap"). The compiler
 * barriers keep the heap accesses between the two stores; the hardware order
 * is enforced from the scavenger's side by membarrier(). */
typedef struct tls_s {
    heap_t *heap;     /* this thread's heap, or &heap_empty */
    atomic_uchar busy;
    /* Tests only (page_inject_remote_free_pause): how long this thread's
     * next remote free of a small block sleeps before its CAS; 0 otherwise.
     * In the struct's padding, not a global: .data and .bss have no byte to
     * spare in their one page (ebb_cold_bss). */
    uint16_t remote_free_pause_ms;
    /* 1 once ebb's thread-exit destructor ran in this thread: a heap made
     * after that is made by a later key destructor (heap.c, "Heaps of
     * threads that died", step 4). */
    uint8_t exiting;
} tls_t;
_Static_assert(sizeof(tls_t) == 2 * sizeof(void *), "tls_t: two words");
/* One TLS block, so the fast paths find both fields from one address. */
extern __thread tls_t tls __attribute__((tls_model("initial-exec")));

static inline void busy_enter(void)
{
    atomic_store_explicit(&tls.busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
}

static inline void busy_leave(void)
{
    /* Release: the scavenger that reads 0 sees everything done before. */
    atomic_store_explicit(&tls.busy, 0, memory_order_release);
}
/* The calling thread's heap, created (and the process initialized) on first
 * use. NULL only if no memory could be obtained for the heap itself. */
heap_t *heap_get_or_create(void);
/* Hand back every heap in use that carries `thread_id`: its thread is dead,
 * and the caller, on the same stack, has its id (heap.c). */
void heaps_of_dead_thread_hand_back(uintptr_t thread_id);
/* Debug mode: the calling thread's debug heap (thread id | THREAD_ID_DEBUG),
 * kept here rather than in tls.heap so that malloc's fast path never runs. */
extern __thread heap_t *tls_debug_heap __attribute__((tls_model("initial-exec")));
heap_t *heap_create_debug(void);
/* Initialize the process if that has not happened yet (options, debug mode). */
void heap_process_init(void);
/* Scavenger: visit idle heaps with remote frees pending (all with `force`). */
void heap_scavenge(uint64_t now_ms, uint64_t idle_ms, bool force);
/* How long a heap idle for `idle_ms` a visit must have seen no slow path
 * before its marked pages are trimmed (SPARSE_IDLE_FACTOR); an abandoned
 * segment waits as long from its owner's exit. */
uint64_t heap_sparse_idle_ms(uint64_t idle_ms);
/* How long an abandoned segment's marked pages wait from its owner's exit
 * before a pass trims them (purge.c; segment_abandoned_collect). */
uint64_t purge_abandoned_trim_wait_ms(void);
/* A request about to fail: everything ebb_collect(true) gives back, but
 * debug mode's quarantine and reuse cache, which debug.c lets go itself with
 * its own exemptions (alloc_impl_copy). */
void heap_collect_before_failing(void);
/* Purge pass, no segment pinned: the heaps of `ids` (all with `all`) have a
 * segment left entirely free by the pass (segment_purge): mark them for the
 * scavenger's visit. */
void heap_tell_owners(const uintptr_t *ids, size_t n, bool all);
/* Owner, lock held: collect if the scavenger asked (heap.c, heap_scavenge). */
void heap_collect_asked(heap_t *heap);
static inline void heap_collect_if_asked(heap_t *heap)
{
    if (ebb_unlikely(atomic_load_explicit(&heap->collect_asked, memory_order_relaxed)))
        heap_collect_asked(heap);
}
/* Work for the scavenger's visits to live heaps; `sparse_bits`: which of
 * heap_t.sparse_pending's bits count. */
bool heap_scavenge_pending(int sparse_bits);
/* Tests: sleep `ms` in every thread exit right after its segments are abandoned. */
void heap_inject_exit_pause(long ms);
/* Tests: raise `sig` (0: none) in every thread exit after the heap's lock is
 * dropped and before the heap goes back to the pool (blocked there: its
 * handler runs once the heap is back). */
void heap_inject_exit_signal(int sig);
/* Tests: sleep `ms` in every collect pass of abandoned segments before they go back on the list. */
void segment_inject_collect_pause(long ms);
/* Tests: the calling thread's next carve of more blocks in a page that has
 * some already sleeps `ms` before it puts them on the free list (page.c,
 * page_extend); page_extend_pausing() is true meanwhile. */
void page_inject_extend_pause(long ms);
bool page_extend_pausing(void);
/* Tests: pause a purge pass between its madvise of a segment's free slices
 * and their give-back (segment_purge). */
void segment_inject_purge_pause(long ms);
/* Tests: the calling thread's next remote free sleeps `ms` (at most 65535)
 * between its reads of the page or segment and its push or OR (page.c,
 * segment.c); page_remote_free_pause sleeps it, when tls asks. */
void page_inject_remote_free_pause(long ms);
void page_remote_free_pause(void);
/* Tests: ask the calling thread's heap to collect, as the scavenger does. */
void heap_inject_collect_request(void);

/* ---------------------------------------------------------------------------
 * alloc.c / large.c — the generic (slow) allocation entry points
 * ------------------------------------------------------------------------- */
void *alloc_malloc_slow(size_t size);
void free_generic(segment_t *seg, void *p);
/* alloc_generic for a given heap (debug.c: the debug heap). Sets errno. */
void *alloc_generic_in(heap_t *heap, size_t size, size_t alignment, bool zero);
/* The same, unzeroed; *fresh: it reads as zero all the same (alloc.c). */
void *alloc_generic_in_fresh(heap_t *heap, size_t size, size_t alignment, bool *fresh);
/* Free a block: as its owner if `heap` owns its segment, else remotely. */
void alloc_release(heap_t *heap, void *p);
void *alloc_aligned(size_t size, size_t alignment, bool zero);
size_t alloc_usable_size(const void *p);
/* realloc to `size` <= its usable size with no memory to move the block:
 * keep block p where it is and give back what lies past `size` (a huge
 * block's pages; a large block's slices, when `heap` owns its segment).
 * Never fails; errno is left alone. The caller holds the block alone. */
void alloc_shrink_in_place(heap_t *heap, void *p, size_t size);

/* *zero: the block reads as zero (fresh or purged mapping). */
void *huge_alloc(size_t size, size_t alignment, bool *zero);
void huge_free(segment_t *seg);
size_t huge_usable_size(segment_t *seg);
/* Resize a huge block by remapping; NULL if it must be copied elsewhere. */
void *huge_realloc(segment_t *seg, void *p, size_t size);
/* Debug mode: move the huge block p, just allocated and still the caller's
 * alone, with its pages (no byte copied) to an address of its own; the old
 * range is left unmapped. The new address, or NULL (p is as it was). */
void *huge_relocate(segment_t *seg, void *p);
/* Purge/unmap cached huge mappings by age (all with `force`). True if some
 * remain that a later pass must handle. */
bool huge_cache_decay(uint64_t now_ms, bool force);
bool huge_cache_pending(void);
/* Anything in the huge cache at all, due soon or not. */
bool huge_cache_any(void);
/* Unmap every cached mapping and spare (out-of-memory retry:
 * purge_release_caches); true if there was one. */
bool huge_cache_release(void);
void huge_fork_lock(void);
void huge_fork_unlock(void);

/* ---------------------------------------------------------------------------
 * stats.c, walk.c — telemetry (ebb_stats_get, ebb_heap_walk, EBB_STATS)
 *
 * These read other threads' owner-only fields (page counts, free lists)
 * without synchronization, on purpose: each value is read once, clamped, and a
 * pointer read that way is followed only after checking that it lies inside
 * its page, so a racing owner can make a number stale but never make the
 * reader fault or loop. ebb_racy_reader marks such functions for
 * ThreadSanitizer (which would otherwise report the races they accept).
 * ------------------------------------------------------------------------- */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
#define ebb_racy_reader __attribute__((noinline, no_sanitize("thread")))
#else
#define ebb_racy_reader __attribute__((noinline))
#endif

/* Add one segment's pages and slices to a summary (walk.c uses it per heap,
 * stats.c for the process). */
void stats_tally_segment(segment_t *seg, struct ebb_heap_summary *sum);
/* Add the live huge blocks to a summary. */
void stats_tally_huge(struct ebb_heap_summary *sum);
/* Finish a summary: the ratio fields. */
void stats_summary_finish(struct ebb_heap_summary *sum);
/* The snapshot, for glibc's reporting calls (override.c); also the live bytes
 * in segments (huge blocks excluded). */
void stats_snapshot(struct ebb_stats *st, uint64_t *segment_live_bytes);
/* Process start: report a bad combination of options. */
void stats_init(void);
/* ebb's constructor: the reports at exit run at quick_exit too, when any is on. */
void stats_register_quick_exit(void);
/* The scavenger: print a one-line sample to the stats output. */
void stats_print_sample(void);
/* Visit segments: all of them (under the segment list's lock), or the
 * abandoned ones (under the abandoned list's lock). */
void segment_for_each(void (*fn)(segment_t *seg, void *arg), void *arg);
void segment_for_each_abandoned(void (*fn)(segment_t *seg, void *arg), void *arg);
/* Segments moved between heaps and the abandoned list so far (the walk). */
unsigned long segment_moves_read(void);
/* Visit each page run in use in `seg` (the first slice of every run whose
 * slices are not free), in address order. The caller keeps the segment from
 * changing meanwhile (its owner paused or gone) or accepts a racy view. */
void segment_for_each_page(segment_t *seg, void (*fn)(page_t *page, void *arg), void *arg);
void segment_counts(size_t *cached, size_t *abandoned);
/* Bytes of the last segment region mapped but not handed out (untouched). */
size_t segment_spare_bytes(void);
typedef struct huge_counts_s {
    size_t live, live_bytes, live_usable_bytes;
    size_t cached, cached_bytes, cached_committed_bytes, cached_unpurged_bytes;
} huge_counts_t;
void huge_counts(huge_counts_t *out);
/* Visit the live huge blocks (under the huge lock: they cannot be freed or
 * moved meanwhile). */
void huge_for_each_live(void (*fn)(segment_t *seg, void *arg), void *arg);
/* The live huge mapping holding p (any byte of it), or NULL. For debug
 * mode's pointer checks: the segment map marks only a mapping's first unit. */
segment_t *huge_live_containing(const void *p);
/* Visit the address ranges of the huge cache, its mappings and its spare
 * pages (under the huge lock). */
void huge_for_each_cached(void (*fn)(void *start, size_t len, void *arg), void *arg);
/* Visit every heap in use, under its lock; with `pause`, quiesced (heap.c)
 * unless it is the caller's own: `paused` tells whether that succeeded. The
 * caller holds the purge exclusion (purge_exclusive_begin). */
void heap_for_each(void (*fn)(heap_t *h, bool paused, void *arg), void *arg, bool pause);
void heap_counts(size_t *alive, size_t *pooled);
/* No purge pass runs (and the scavenger quiesces no heap) until _end. False
 * (and nothing to end) when the calling thread holds any of ebb's locks
 * (tls_locks_held): a signal handler that interrupted it in a pass, an
 * exclusion or an allocator call's locked section (exit() from a handler
 * runs the reports at exit), which would wait for ever for the pass lock or
 * for the lock the interrupted code holds. Nothing takes the pass lock while
 * holding another (heap.c gives the order), so no other caller is refused.
 * The caller then does without the snapshot or walk. */
bool purge_exclusive_begin(void);
void purge_exclusive_end(void);


/* ---------------------------------------------------------------------------
 * debug.c, trace.c — debug mode (EBB_DEBUG=1) and its stack traces
 * ------------------------------------------------------------------------- */
/* Set once at process start, before any block exists; read by the entry
 * points (free's is the one check release mode pays for). */
extern ebb_internal bool debug_enabled;

void debug_init(void);
typedef enum { DEBUG_FREE_PLAIN, DEBUG_FREE_SIZED, DEBUG_FREE_ALIGNED_SIZED } debug_free_kind_t;
void *debug_alloc(size_t size, size_t alignment, bool zero);
void debug_free(void *p, size_t size, size_t alignment, debug_free_kind_t how);
void *debug_realloc(void *p, size_t size);
size_t debug_usable_size(const void *p);
size_t debug_quarantine_bytes(void);
size_t debug_reuse_bytes(void);
bool debug_reuse_decay(uint64_t now_ms, bool force);
bool debug_reuse_pending(void);
bool debug_quarantine_decay(uint64_t now_ms, bool force);
/* After a pass, with no lock held: what the decay took out leaves. */
void debug_quarantine_after_pass(void);
bool debug_untraced_begin(void);
void debug_untraced_end(bool was);
bool debug_quarantine_pending(void);
void debug_quarantine_flush(void);
/* page.c: a free list was cut at `link`, the first word of `block`, which was
 * not a block of its page; reported at the next debug-mode call. */
void debug_note_cut_list(void *block, uintptr_t link);
/* The leak report: the quarantine keeps every block freed while it runs. */
void debug_quarantine_hold(bool hold);
uint16_t debug_context_current(void);
const char *debug_context_name(uint16_t id);
/* override.c: tell trace.c which functions are allocator entry points (a weak
 * no-op where override.c is not linked: the sanitizer builds). */
void override_register_entry_points(void);

#define TRACE_DEPTH_MAX 32
void trace_add_entry_point(const void *fn);
/* The caller's stack, up to max return addresses, from the first frame
 * above `mark` (the CFA of the debug function that set it; 0: none) and
 * after the outermost allocator entry point short of a signal frame, stored
 * in the registry: its id (0: none).
 * Served from the capture cache when the same call chain was seen before. */
uint32_t trace_capture_id(int max, uintptr_t mark);
/* Tests: the trace from `mark` by the fast walk (into fast[], its length
 * returned; -1 if it gave up, or where there is none: not x86-64) and by
 * libgcc's unwinder (into slow[], *n_slow), each at most min(max,
 * TRACE_DEPTH_MAX) frames. */
int trace_crosscheck(uintptr_t mark, int max, uintptr_t *fast, uintptr_t *slow, int *n_slow);
void trace_cache_init(void);
/* Called once the process's constructors run, and from ebb's destructor:
 * when the unwinder may be used (trace.c, "Capture", on statically linked
 * processes). */
void trace_unwinder_ready(void);
void trace_process_exiting(void);
/* Store a trace once; its id (0: none). */
uint32_t trace_intern(const uintptr_t *pcs, int n);
int trace_get(uint32_t id, uintptr_t *pcs, int max);
/* Symbolized, one line per frame, each starting with `indent`. */
void trace_print(text_t *t, uint32_t id, const char *indent);
/* Symbolize the frames of these traces now, one addr2line run per module,
 * for the trace_print calls that follow (the report lock held). */
void trace_symbolize(const uint32_t *ids, int count);
/* The registry's bytes and the traces recorded, with the caller's own counts
 * added first (the other threads' come in batches: trace.c, trace_count). */
void trace_registry_counts(size_t *stored, size_t *raw, size_t *traces);
/* The bytes mapped for the fixed tables beside the registry (capture cache,
 * rule table, hash buckets, symbol cache). */
size_t trace_table_bytes(void);
/* Add the calling thread's held-back counts to the shared ones (thread exit). */
void trace_counts_flush(void);
/* Fork (heap.c's order: after every other lock). */
/* Before fork_prepare takes any lock: wait for reallocs in place under way
 * (debug.c, "Claims a fork must not split"); debug_fork_done after the fork,
 * in both processes. */
void debug_fork_prepare_first(void);
void debug_fork_done(bool child);
/* Tests: the next realloc in place pauses `ms` while it holds its block
 * claimed; the next eviction from the quarantine, while its blocks are on
 * no list (debug.c). The _pausing calls say whether one is paused now. */
void debug_inject_resize_pause(long ms);
void debug_inject_evict_pause(long ms);
bool debug_resize_pausing(void);
bool debug_evict_pausing(void);
void debug_fork_lock(void);
void debug_fork_unlock(void);
/* In the child, after debug_fork_unlock: one fork deeper (debug.h). */
void debug_fork_child(void);
void trace_fork_lock(void);
void trace_fork_unlock(void);
/* First in fork_prepare, before any allocator lock (trace.c, "Unloaded
 * code"); trace_fork_done in the parent and the child. */
void trace_fork_prepare(void);
void trace_fork_done(void);
/* In the child: from now on no capture lists modules (step 4 of the protocol). */
void trace_fork_child(void);
/* Before a report takes the report lock, with no ebb lock held (as a
 * capture): read the loader's unload count now, for trace_print to tell
 * frames that may belong to an unloaded library (trace.c). */
void trace_check_unloads(void);
/* override_dlopen.c, around the next dlclose, and before the next dlopen:
 * a capture-cache hit is trusted only while no dlclose is under way or done,
 * nor dlopen, since the last unload check (trace.c, "Unloads a hit sees"). */
void trace_dlclose_begin(void);
void trace_dlclose_end(void);
void trace_dlopen_begin(void);
/* From ebb's constructor, in debug mode: note the modules loaded at startup,
 * which are never unloaded. */
void trace_note_startup_modules(void);

#endif /* EBB_INTERNAL_H */
