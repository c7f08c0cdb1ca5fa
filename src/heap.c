/*
 * heap.c — thread heaps: creation on a thread's first allocation, the TLS
 * pointer, hand-over at thread exit; process initialization; fork.
 *
 * Bootstrap. The first malloc can come from the dynamic loader before any
 * constructor, and from any thread. Every thread starts with tls.heap pointing
 * at heap_empty, whose direct slots all hold page_empty (no free block), so its
 * first malloc falls into the slow path, which initializes the process once
 * (process_init) and then gives the thread a heap. Nothing here calls stdio,
 * dlsym or anything else that might allocate, except pthread_key_create and
 * pthread_atfork, which run after the allocator is usable (a recursive malloc
 * from them is served normally).
 *
 * Heaps live in chunks mapped for them and are never unmapped: a thread may
 * hold a stale pointer to a heap that was handed to another thread (page.c's
 * full-page protocol), and writing a flag there must stay harmless.
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "internal.h"

page_t page_empty;
heap_t heap_empty = {.direct = {[0 ... DIRECT_SLOTS - 1] = &page_empty},
                     .direct_class = {[0 ... CLASS_COUNT - 1] = &page_empty}};
__thread tls_t tls __attribute__((tls_model("initial-exec"))) = {.heap = &heap_empty};
__thread heap_t *tls_debug_heap __attribute__((tls_model("initial-exec")));

static lock_t heap_pool_lock = LOCK_INIT; /* heap_all, heap_pool_free, in_use */
static heap_t *heap_all;
static heap_t *heap_pool_free;

static pthread_key_t heap_key;
static bool heap_key_ready;

/* 0: not started, 1: running, 2: done. */
static atomic_int init_state;
static _Atomic(uintptr_t) init_thread;

static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);
static void heap_thread_done(void *arg);

static void process_init(void)
{
    if (ebb_likely(atomic_load_explicit(&init_state, memory_order_acquire) == 2))
        return;
    int expected = 0;
    if (atomic_compare_exchange_strong(&init_state, &expected, 1)) {
        atomic_store(&init_thread, thread_id_self());
        options_init();
        os_init();
        purge_init();
        debug_init();
        /* The allocator works from here on; the calls below may allocate. */
        if (pthread_key_create(&heap_key, heap_thread_done) == 0)
            heap_key_ready = true;
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        atomic_store_explicit(&init_state, 2, memory_order_release);
        return;
    }
    if (atomic_load(&init_thread) == thread_id_self())
        return; /* a recursive call from inside the initialization above */
    while (atomic_load_explicit(&init_state, memory_order_acquire) != 2)
        os_yield();
}

void heap_process_init(void)
{
    process_init();
}

/* A program that never allocates still gets its EBB_* options read (and a
 * bad one reported) and its EBB_STATS report; usually the first malloc came
 * long before this constructor and it returns at once. Constructors run once
 * the C library has set itself up, so debug mode's unwinder may be used from
 * here on; priority 101 runs this one before the other constructors of its
 * object (a static link's own, C++ static initializers), whose allocations
 * then get traces too. */
__attribute__((constructor(101))) static void process_init_at_load(void)
{
    process_init();
    options_forget_untrusted();
    trace_unwinder_ready();
    if (debug_enabled)
        trace_note_startup_modules();
    stats_register_quick_exit();
}

/* ---------------------------------------------------------------------------
 * The heap pool
 * ------------------------------------------------------------------------- */
#define HEAP_CHUNK_SIZE ((size_t)64 * 1024)

/* Heaps are carved from chunks of HEAP_CHUNK_SIZE one at a time, as threads
 * first need them, so a process with few threads touches a page or two of its
 * chunk, not all of it (writing every heap's links at once kept 64 KiB
 * resident in a one-thread program after it went idle). Under heap_pool_lock. */
static uint8_t *heap_chunk_next, *heap_chunk_end;

/* The heaps in use by thread id, so that a new thread finds a dead thread's
 * heap carrying its id (heaps_of_dead_thread_hand_back) without walking
 * every heap: that walk made a new thread's first malloc cost 35 us with
 * 3,000 threads alive. Chained through id_next, under heap_pool_lock.
 * Two sizes: HEAP_ID_FIRST_BUCKETS in the first bytes of the first heap
 * chunk, on the page the first heap is on, until more than HEAP_ID_GROW
 * heaps are in use; then heap_by_id, in cold bss. A table of its own page
 * from the start kept one page more resident in every process (4 KiB of
 * what ebb held above glibc after idle, docs/memory-return.md, "The
 * floor"); chains stay 4 heaps long on average either way. */
#define HEAP_ID_BUCKETS       4096 /* heap_by_id: a power of two */
#define HEAP_ID_FIRST_BUCKETS 128  /* 1 KiB: a power of two */
#define HEAP_ID_GROW          (4 * HEAP_ID_FIRST_BUCKETS)
static heap_t *heap_by_id[HEAP_ID_BUCKETS] ebb_cold_bss;
/* NULL before the first heap; the first chunk's table; heap_by_id once grown. */
static heap_t **heap_buckets;
static unsigned heap_ids_in_use; /* heaps linked into heap_buckets */

static heap_t **heap_id_bucket(uintptr_t thread_id)
{
    uint64_t hash = thread_id * 0x9E3779B97F4A7C15ull;
    if (heap_buckets == heap_by_id)
        return &heap_by_id[hash >> (64 - __builtin_ctz(HEAP_ID_BUCKETS))];
    return &heap_buckets[hash >> (64 - __builtin_ctz(HEAP_ID_FIRST_BUCKETS))];
}

/* Under heap_pool_lock: move every heap in use to heap_by_id. */
static void heap_ids_grow(void)
{
    heap_buckets = heap_by_id;
    for (heap_t *h = heap_all; h; h = h->all_next) {
        if (!h->in_use)
            continue;
        heap_t **bucket = heap_id_bucket(h->thread_id);
        h->id_next = *bucket;
        *bucket = h;
    }
}

/* Where a heap carved at `at` or after starts: 64 bytes past a multiple of
 * 256. A heap's first line holds the direct[] slots of the smallest sizes,
 * which every malloc of up to 112 bytes reads. At a 256-byte boundary (the
 * first heap began 1 KiB into its chunk, the first of any later chunk at its
 * start) that line shares its L1 set with the first lines of the blocks of
 * every class of 256-byte multiples, each page's first block among them:
 * `bench_core rand 8 1024` took 8% more L1 read misses there (cachegrind;
 * no change in time measurable on this VM; docs/benchmarks.md, "The
 * segment header's first line"). Costs at most 255 bytes a heap. */
static uint8_t *heap_place(uint8_t *at)
{
    uintptr_t a = (uintptr_t)at;
    return (uint8_t *)(((a - 64 + 255) & ~(uintptr_t)255) + 64);
}

/* A heap for the thread `thread_id`. Under heap_pool_lock, so that threads
 * starting together map one chunk, not one each, and so that the id and its
 * index are written where heaps_of_dead_thread_hand_back reads them. */
static heap_t *heap_pool_take(uintptr_t thread_id)
{
    lock_acquire(&heap_pool_lock);
    heap_t *heap = heap_pool_free;
    if (heap) {
        heap_pool_free = heap->pool_next;
    } else {
        /* Compared as addresses: the placed start may lie past the end. */
        if (heap_chunk_next == NULL || (uintptr_t)heap_place(heap_chunk_next) + sizeof(heap_t) >
                                           (uintptr_t)heap_chunk_end) {
            uint8_t *chunk = os_map_aligned(HEAP_CHUNK_SIZE, os_info.page_size, 0);
            if (chunk == NULL && purge_release_caches())
                chunk = os_map_aligned(HEAP_CHUNK_SIZE, os_info.page_size, 0);
            if (chunk == NULL) {
                lock_release(&heap_pool_lock);
                return NULL;
            }
            heap_chunk_next = chunk;
            heap_chunk_end = chunk + HEAP_CHUNK_SIZE;
            if (heap_buckets == NULL) { /* the first chunk: the first table too */
                heap_buckets = (heap_t **)chunk;
                heap_chunk_next += HEAP_ID_FIRST_BUCKETS * sizeof(heap_t *);
            }
        }
        heap = (heap_t *)heap_place(heap_chunk_next);
        heap_chunk_next = (uint8_t *)heap + sizeof(heap_t);
        heap->all_next = heap_all;
        heap_all = heap;
    }
    heap->in_use = true;
    heap->thread_id = thread_id;
    heap_t **bucket = heap_id_bucket(thread_id);
    heap->id_next = *bucket;
    *bucket = heap;
    if (++heap_ids_in_use > HEAP_ID_GROW && heap_buckets != heap_by_id)
        heap_ids_grow();
    lock_release(&heap_pool_lock);
    return heap;
}

static void heap_pool_put_locked(heap_t *heap)
{
    heap_t **link = heap_id_bucket(heap->thread_id);
    while (*link != heap)
        link = &(*link)->id_next;
    *link = heap->id_next;
    heap->id_next = NULL;
    heap_ids_in_use--;
    heap->in_use = false;
    heap->thread_id = 0;
    heap->pool_next = heap_pool_free;
    heap_pool_free = heap;
}

/* Point every fast-path slot at the empty page (its malloc takes the slow path). */
static void heap_direct_clear(heap_t *heap)
{
    for (size_t i = 0; i < DIRECT_SLOTS; i++)
        atomic_store_explicit(&heap->direct[i], &page_empty, memory_order_relaxed);
    for (size_t i = 0; i < CLASS_COUNT; i++)
        atomic_store_explicit(&heap->direct_class[i], &page_empty, memory_order_relaxed);
}

/* How many heaps are marked exit_pending (step 4): when none, a thread that
 * makes a heap looks at no other. */
static atomic_int heaps_exit_pending;

/* heap_reset's, and the scavenger's past EXIT_PENDING_MAX_PASSES. */
static void heap_exit_pending_clear(heap_t *heap)
{
    if (atomic_exchange(&heap->exit_pending, 0))
        atomic_fetch_sub(&heaps_exit_pending, 1);
}

/* Forget every page and segment (they have been freed or abandoned: another
 * thread may own them now, so nothing here writes to them; abandoning cleared
 * the kept pages' flags). */
static void heap_reset(heap_t *heap)
{
    heap_direct_clear(heap);
    memset(heap->queues, 0, sizeof heap->queues);
    memset(&heap->full, 0, sizeof heap->full);
    memset(heap->retained, 0, sizeof heap->retained);
    heap->retained_mask = 0;
    atomic_store_explicit(&heap->xfull_pending, 0, memory_order_relaxed);
    heap->segments = NULL;
    heap->segment_count = 0;
    atomic_store(&heap->remote_pending, 0);
    atomic_store(&heap->retained_pending, 0);
    heap_exit_pending_clear(heap);
    atomic_store(&heap->sparse_pending, 0);
    atomic_store(&heap->collect_asked, 0);
    atomic_store(&heap->collect_parked, 0);
    atomic_store(&heap->collect_cost_us, 0);
    atomic_store(&heap->revoked, 0);
    /* slow_count only grows, and scav_seen_* belong to the scavenger. */
}

/* ---------------------------------------------------------------------------
 * Heaps of threads that died without handing them back. glibc runs pthread
 * key destructors in at most PTHREAD_DESTRUCTOR_ITERATIONS rounds, ebb's
 * (made at the first malloc) first in each. A destructor that runs after
 * ebb's in the last round and allocates makes a heap no destructor hands back:
 * it stays in use, its `busy` pointing into TLS that goes away with the
 * thread (unmapped with its stack, if the program supplied the stack), its
 * segments carrying the dead thread's id, which the next thread on the same
 * stack gets again (and would take those segments for its own). So:
 *   1. a thread making a heap first hands back every heap in use that carries
 *      its id: that heap's thread is dead, and its TLS is now this thread's;
 *   2. the scavenger reads a heap's `busy` through the kernel, without
 *      faulting (os_peek_byte): TLS that is gone counts as not busy. A heap
 *      it quiesced whose owner the kernel no longer knows (owner_tid, in this
 *      process: owner_pid) is handed back. (A tid the kernel gave to a new thread makes the
 *      heap look alive: it is only collected, as any idle heap.)
 *   3. a thread with no heap whose free finds a segment with its own id (the
 *      dead thread's) hands such heaps back (page_free_local_slow), instead
 *      of treating the page as a page of heap_empty.
 *   4. a heap made after ebb's destructor ran in its thread (tls.exiting) is
 *      marked exit_pending; the next thread that makes a heap, or the
 *      scavenger's next pass, whether anything else is pending or not,
 *      hands it back once its owner is gone. Steps 1-3 need a new thread
 *      on the same stack, or the heap to have something pending: a program
 *      that gives each thread a stack of its own that it never frees, and a
 *      last-round destructor that kept one small block, left one segment of
 *      4 MiB mapped for every thread, each holding a few blocks (review
 *      finding: 1,000 threads, 1,001 segments, 4 GiB of address space, for
 *      66 KiB live).
 *   5. a thread that makes a heap when twice as many are in use as after
 *      the last such look hands back every one whose owner is gone
 *      (heaps_of_gone_owners_hand_back): a thread whose first allocation is
 *      in the last round runs no destructor of ebb's, which step 4 needs.
 * A gone owner runs nothing of its heap's, so steps 1, 4 and 5 need no
 * quiescing (heap_hand_back_if_gone).
 * ------------------------------------------------------------------------- */
/* Under heap_pool_lock and heap->lock, which this releases. */
static void heap_hand_back_held(heap_t *heap)
{
    heap_collect_pages(heap, true);
    segment_abandon_all(heap);
    heap_reset(heap);
    heap->busy = NULL;
    lock_release(&heap->lock);
    heap_pool_put_locked(heap);
}

/* Under heap->lock. A heap made in another process (a child of a fork that
 * ran no handler: _Fork, a raw clone) is never judged gone. */
static bool heap_owner_gone(const heap_t *heap)
{
    return heap->busy != NULL && heap->owner_tid != 0 && heap->owner_pid == os_getpid() &&
           !os_thread_alive(heap->owner_tid);
}

void heaps_of_dead_thread_hand_back(uintptr_t thread_id)
{
    lock_acquire(&heap_pool_lock);
    if (heap_buckets == NULL) { /* no heap yet */
        lock_release(&heap_pool_lock);
        return;
    }
    for (heap_t *h = *heap_id_bucket(thread_id), *next; h != NULL; h = next) {
        next = h->id_next; /* a hand-back unlinks h alone */
        if (h->thread_id != thread_id)
            continue;
        lock_acquire(&h->lock);
        /* busy NULL: the heap of this very thread in heap_thread_done, which
         * a signal handler interrupted after it let the lock go and before
         * it put the heap back (it still carries the id until then). That
         * one is heap_thread_done's to put back; taking it here gave the
         * handler's malloc the same heap, and the pool held it twice
         * (review finding). */
        if (h->busy != NULL)
            heap_hand_back_held(h);
        else
            lock_release(&h->lock);
    }
    lock_release(&heap_pool_lock);
}

/* Step 4 above: a heap made by a destructor after ebb's. Its thread ends
 * within microseconds of the destructor, unless a later one blocks; past
 * this many scavenger passes (one a purge delay while the mark is pending:
 * 10 s by default) the mark goes (heap_scavenge). */
#define EXIT_PENDING_MAX_PASSES 200

static void heap_mark_if_exiting(heap_t *heap)
{
    if (ebb_unlikely(tls.exiting)) {
        if (!atomic_exchange(&heap->exit_pending, 1))
            atomic_fetch_add(&heaps_exit_pending, 1);
        purge_wake();
    }
}

/* Under heap_pool_lock: hand h back if its owner is gone (steps 4 and 5);
 * true if it went. A heap whose lock is held is left for the next look. */
static bool heap_hand_back_if_gone(heap_t *h)
{
    if (!lock_try_acquire(&h->lock))
        return false;
    if (heap_owner_gone(h)) {
        heap_hand_back_held(h);
        return true;
    }
    lock_release(&h->lock);
    return false;
}

/* Step 5: when this many heaps are in use, a thread making its heap looks
 * at every one's owner (HEAP_SWEEP_MIN at first, then twice as many as were
 * left in use by the last look). Under heap_pool_lock. */
#define HEAP_SWEEP_MIN 16
static unsigned heap_sweep_at = HEAP_SWEEP_MIN;

/* Steps 4 and 5, by a thread making its heap: the heaps whose owners are
 * gone go back to the pool, so that their segments can be reclaimed by this
 * thread. Step 4 looks at the marked ones: a program that starts threads
 * faster than the scavenger's passes come kept hundreds (review finding).
 * Step 5 looks at all of them once they are twice as many as the last time
 * it did: a thread whose first allocation is in the last destructor round
 * runs no destructor of ebb's, so nothing marks its heap (review finding:
 * 200 such threads, 201 segments). That bounds the heaps in use to twice the
 * threads alive, HEAP_SWEEP_MIN at least; each look costs a system call a
 * heap, amortized over the heaps made since the last. */
static void heaps_of_gone_owners_hand_back(void)
{
    lock_acquire(&heap_pool_lock);
    bool all = heap_ids_in_use >= heap_sweep_at;
    if (ebb_likely(!all && atomic_load_explicit(&heaps_exit_pending, memory_order_relaxed) == 0)) {
        lock_release(&heap_pool_lock);
        return;
    }
    for (heap_t *h = heap_all; h; h = h->all_next)
        if (h->in_use && (all || atomic_load(&h->exit_pending)))
            heap_hand_back_if_gone(h);
    if (all)
        heap_sweep_at = heap_ids_in_use * 2 > HEAP_SWEEP_MIN ? heap_ids_in_use * 2 : HEAP_SWEEP_MIN;
    lock_release(&heap_pool_lock);
}

/* A heap for the calling thread, carrying `thread_id` (its own, or with
 * THREAD_ID_DEBUG); NULL if no memory could be had for it. The caller makes
 * it the thread's (tls.heap, tls_debug_heap), then heap_made. */
static heap_t *heap_make(uintptr_t thread_id)
{
    heaps_of_dead_thread_hand_back(thread_id);
    heaps_of_gone_owners_hand_back();
    heap_t *heap = heap_pool_take(thread_id);
    if (heap == NULL)
        return NULL;
    lock_acquire(&heap->lock); /* a forced pass may already look at it */
    heap_reset(heap);
    heap->busy = &tls.busy;
    heap->owner_tid = os_gettid();
    heap->owner_pid = os_getpid();
    lock_release(&heap->lock);
    return heap;
}

/* The heap is the thread's now: its key gets it, so that the thread's exit
 * hands it back (heap_thread_done). May allocate (glibc's second-level key
 * array): the caller has set the thread's heap already. */
static void heap_made(heap_t *heap)
{
    heap_mark_if_exiting(heap);
    if (heap_key_ready)
        pthread_setspecific(heap_key, heap);
}

heap_t *heap_get_or_create(void)
{
    process_init();
    if (tls.heap != &heap_empty)
        return tls.heap; /* created by a recursive call during initialization */
    heap_t *heap = heap_make(thread_id_self());
    if (heap == NULL)
        return NULL;
    tls.heap = heap;
    heap_made(heap);
    return heap;
}
heap_t *heap_create_debug(void)
{
    process_init();
    if (tls_debug_heap)
        return tls_debug_heap;
    heap_t *heap = heap_make(thread_id_self() | THREAD_ID_DEBUG);
    if (heap == NULL)
        return NULL;
    tls_debug_heap = heap;
    heap_made(heap);
    return heap;
}

/* ---------------------------------------------------------------------------
 * Thread exit: free what is empty, abandon the rest for others to reclaim.
 * ------------------------------------------------------------------------- */
static atomic_long exit_pause_ms; /* tests: widen the window after abandoning */

void heap_inject_exit_pause(long ms)
{
    atomic_store(&exit_pause_ms, ms);
}

static atomic_int exit_signal; /* tests: raised between the heap's lock and the pool's */

void heap_inject_exit_signal(int sig)
{
    atomic_store(&exit_signal, sig);
}

static void heap_thread_done(void *arg)
{
    heap_t *heap = arg;
    if (heap == NULL || (heap != tls.heap && heap != tls_debug_heap))
        return;
    if (heap == tls_debug_heap)
        trace_counts_flush();
    /* No signal handler runs until the heap is back in the pool: one that
     * allocated after the lock is let go but before tls.heap is cleared
     * would put segments into a heap that is being reset (and the pool
     * would forget them); one after that, before the put, handed this heap
     * back itself before 13bb68b (review findings). Two system calls, in a
     * thread's exit. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    lock_acquire(&heap->lock);
    heap_collect_pages(heap, true);
    segment_abandon_all(heap);
    /* From here other threads may reclaim, empty and unmap those segments. */
    long pause = atomic_load_explicit(&exit_pause_ms, memory_order_relaxed);
    if (ebb_unlikely(pause > 0))
        os_sleep_ms(pause);
    heap_reset(heap);
    heap->busy = NULL; /* this thread's TLS goes away with it */
    lock_release(&heap->lock);
    /* A destructor that runs after this one and allocates gets a new heap
     * (and this destructor again in the next round; in the last, step 4
     * of "Heaps of threads that died"). */
    tls.exiting = 1;
    tls.heap = &heap_empty;
    tls_debug_heap = NULL;
    int sig = atomic_load_explicit(&exit_signal, memory_order_relaxed);
    if (ebb_unlikely(sig != 0))
        os_raise(sig);
    lock_acquire(&heap_pool_lock);
    heap_pool_put_locked(heap);
    lock_release(&heap_pool_lock);
    pthread_sigmask(SIG_SETMASK, &old, NULL); /* a handler that allocates gets a new heap */
}

/* The calling thread's heap (its debug heap in debug mode), or NULL. */
static heap_t *heap_of_caller(void)
{
    return tls.heap != &heap_empty ? tls.heap : tls_debug_heap;
}

static void collect_all(bool force, bool debug_too)
{
    process_init(); /* the options a pass reads */
    if (force && debug_too && debug_enabled)
        debug_quarantine_flush();
    heap_t *heap = heap_of_caller();
    if (heap != NULL) {
        lock_acquire(&heap->lock);
        heap_collect_pages(heap, force);
        if (force) {
            heap_trim_pages(heap);
            segment_release_empty(heap); /* as the scavenger's visit would */
        }
        lock_release(&heap->lock);
    }
    /* The passes' visits do not quiesce this heap (heap_scavenge,
     * heap_visit_own): it was done above, by its owner. */
    if (force)
        purge_run(true, debug_too);
}

void ebb_collect(bool force)
{
    collect_all(force, true);
}

/* Review finding: a realloc's try with headroom in debug mode (debug.c,
 * alloc_impl_copy), refused under RLIMIT_AS, emptied the quarantine through
 * here, which that path's own flush leaves alone: a use after free of a
 * block in the quarantine then went unreported. */
void heap_collect_before_failing(void)
{
    collect_all(true, false);
}

/*
 * Quiescing an idle heap. Some memory of a sleeping thread can only be given
 * back by acting as its owner: the page its fast paths pop from (which may
 * hold only blocks other threads freed), and the empty page it keeps per size
 * class. The scavenger may do that while the owner provably runs none of its
 * lock-free paths:
 *   1. take the owner's lock (try only): the owner is in no locked slow path
 *      and cannot enter one;
 *   2. revoke: set `revoked`, point every direct slot at page_empty and set
 *      every segment's thread_id to THREAD_ID_QUIESCED. From now on the owner's
 *      malloc falls to the slow path (and waits for the lock), its free takes
 *      the remote path (one CAS, safe at any time);
 *   3. membarrier(): every running thread executes a full barrier, so an owner
 *      that set tls.busy before step 2 has that store visible now, and one
 *      that sets it after sees step 2's stores;
 *   4. read the owner's tls.busy: 1 means it is inside a lock-free path that
 *      began before step 2 — undo and retry at a later pass. 0 means no such
 *      path is running and none can start; and if every class slot still
 *      names page_empty (heap_direct_cleared: a path that began before step
 *      2 may have written one after it), the heap is ours;
 *   5. collect every page, free the empty ones (heap_collect_pages) and
 *      release the segments that became entirely free;
 *   6. restore the thread ids and the direct slots (release), clear
 *      `revoked`, unlock.
 * Without membarrier (old kernels, or refused by a seccomp filter, even one
 * installed after it was registered: a failed call undoes step 2 and turns
 * quiescing off), step 3 is impossible: the scavenger then only takes pages
 * the owner's fast paths cannot reach (steps 1 and heap_steal_free_pages),
 * and each sleeping thread keeps at most one page per size class; blocks
 * other threads freed into its other pages wait for a request parked for the
 * owner (heap_scavenge), which collects them when it runs again.
 */
static bool quiesce_ready; /* under pass_lock, like everything the scavenger owns */
static bool quiesce_tried;

static void heap_quiesce_init(void)
{
    if (!quiesce_tried) {
        quiesce_tried = true;
        quiesce_ready = os_membarrier_register();
    }
}

/* Step 4, second half: whether every class slot still names page_empty. The
 * owner's lock-free paths write them too: a free into a page of a hot class
 * points its class's slot at that page (alloc.h), and the lock-free start of
 * the malloc slow path points it back at the first page of the queue. One
 * that saw the owner's thread id (or `revoked` clear) before step 2 may
 * store after step 2's clear, and finish before step 4 reads tls.busy: the
 * owner's next malloc would then pop from that page while the scavenger
 * works on it. Its store is visible here (step 4's read of tls.busy is an
 * acquire of the owner's release). Any path that starts later sees step 2
 * and writes no slot. So a slot changed since step 2 means undo, as busy does. */
static bool heap_direct_cleared(heap_t *h)
{
    for (unsigned cls = 0; cls < CLASS_COUNT; cls++)
        if (atomic_load_explicit(&h->direct_class[cls], memory_order_relaxed) != &page_empty)
            return false;
    return true;
}

/* Step 6. The direct slots are restored last, after every page write of
 * step 5, so the owner's acquire load of a slot sees the page as left here
 * (they stayed at page_empty throughout: heap_direct_update skips a revoked
 * heap, and only the scavenger writes them until it unlocks). */
static void heap_unquiesce(heap_t *h)
{
    for (segment_t *seg = h->segments; seg; seg = seg->next)
        atomic_store_explicit(&seg->thread_id, h->thread_id, memory_order_release);
    atomic_store_explicit(&h->revoked, 0, memory_order_release);
    for (unsigned cls = 0; cls < CLASS_COUNT; cls++)
        heap_direct_update(h, cls);
}

/* Steps 2-4, with h->lock held. */
static bool heap_quiesce(heap_t *h)
{
    heap_quiesce_init();
    if (!quiesce_ready || h->busy == NULL)
        return false;
    atomic_store_explicit(&h->revoked, 1, memory_order_relaxed);
    heap_direct_clear(h);
    for (segment_t *seg = h->segments; seg; seg = seg->next)
        atomic_store_explicit(&seg->thread_id, THREAD_ID_QUIESCED, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    if (!os_membarrier()) { /* refused since it was registered (review finding) */
        quiesce_ready = false; /* from now on, as on a kernel without it */
        heap_unquiesce(h);
        return false;
    }
    /* The owner may have died with its TLS unmapped ("Heaps of threads that
     * died", step 2): then nobody is inside. The byte the kernel read is the
     * one judged: loading it again could fault if the TLS went in between.
     * Where the system lets no way of reading through the kernel work (no
     * pipe could be made, os_read_own), a dead owner is judged by its tid
     * and a live one's TLS loaded: it is mapped while the thread lives, and
     * only a heap left by a last-round key destructor on a stack the program
     * unmaps can lose it in between (a SIGSEGV here, when this was a load). */
    uint8_t busy;
    int peek = os_peek_byte(h->busy, &busy);
    if (peek == 0)
        return true;
    if (peek < 0) {
        if (h->owner_tid != 0 && h->owner_pid == os_getpid() && !os_thread_alive(h->owner_tid))
            return true;
        busy = atomic_load_explicit(h->busy, memory_order_acquire);
    } else {
        atomic_thread_fence(memory_order_acquire);
        ebb_tsan_acquire(h->busy);
    }
    if (busy || !heap_direct_cleared(h)) {
        heap_unquiesce(h);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------------------
 * The scavenger's visit to live heaps (purge.c, pass step 5). A heap whose
 * owner has taken no slow path for `idle_ms` and that received remote frees,
 * kept an empty page, or had blocks freed into full pages gives back what it
 * can: everything, when it can be quiesced (its empty pages, and the free
 * blocks of the pages marked in segment_t.sparse_watch, by a trim: page.c);
 * else the pages its fast paths cannot reach.
 *
 * A heap whose owner keeps running is asked to collect, less often: its
 * owner collects a page's remote frees only when it allocates from that page,
 * so the pages of a size class it no longer uses would hold every block other
 * threads freed into them for as long as it runs (a thread that built 100 MiB
 * of 64-byte blocks for consumers to free, then went on with other sizes,
 * kept all of it resident). Once remote frees have been pending on it for
 * BUSY_COLLECT_MS, the scavenger sets `collect_asked`; the owner's next locked
 * slow path collects every page, frees the empty ones (keeping an empty page
 * only where it is its class's only page), and releases its entirely free
 * segments but its last
 * (heap_collect_asked). Quiescing a running owner would mostly fail: it is
 * inside the allocator, or holds its lock, much of the time. An owner that
 * stops before it sees the request is idle a purge delay later, and the
 * request, still pending, makes the scavenger collect for it as above.
 * Without membarrier the scavenger cannot do that: its visit to an idle heap
 * with remote frees then leaves a request "parked" for the owner (set, but
 * no longer counted as work for the scavenger, which may sleep), and the
 * owner's next locked slow path collects whatever the visit could not reach.
 * (Clearing the request instead let those blocks wait for good.)
 * A collection walks every page of the heap, so requests are spaced by at
 * least 100 times the last one's duration as well: at most 1% of the owner's
 * time, however large its heap.
 * ------------------------------------------------------------------------- */
#define BUSY_COLLECT_MS 250

/* A request the owner has not served yet and that is the scavenger's to
 * follow (not parked for the owner). */
static bool collect_request_pending(heap_t *h)
{
    return atomic_load(&h->collect_asked) && !atomic_load(&h->collect_parked);
}

static uint64_t busy_collect_wait_ms(const heap_t *h)
{
    uint64_t cost_ms = atomic_load_explicit(&h->collect_cost_us, memory_order_relaxed) / 10;
    return cost_ms > BUSY_COLLECT_MS ? cost_ms : BUSY_COLLECT_MS;
}

/* The idle time before a visit trims pages under live blocks (internal.h,
 * SPARSE_IDLE_FACTOR). */
uint64_t heap_sparse_idle_ms(uint64_t idle_ms)
{
    return delay_scaled_ms(idle_ms, SPARSE_IDLE_FACTOR);
}

/* A forced pass's visit to its caller's heap. The pass runs in ebb_collect,
 * which has just collected, trimmed and released that heap as its owner:
 * quiescing it again would cost a membarrier (which interrupts every thread)
 * and a read of its busy byte for nothing. Its flags are consumed all the
 * same: skipped, they stayed set after the trim had done what they asked
 * for, and the scavenger polled the heap every purge delay until its owner
 * had idled for the trim's wait, then quiesced it for nothing (about 20
 * passes and a membarrier after each malloc_trim: review of ebde081;
 * test_purge, a_trim_leaves_the_scavenger_nothing_for_its_callers_heap).
 * Only the owner sets retained_pending and sparse_pending (a pass beside
 * ebb_collect's collection may have put back what it took before): they ask
 * for nothing more. Remote frees may have come since the collection: those
 * are collected here, as the owner, which is this thread and runs none of
 * the heap's lock-free paths. Under heap_pool_lock, like every visit. */
static void heap_visit_own(heap_t *h)
{
    atomic_store(&h->retained_pending, 0);
    atomic_store(&h->sparse_pending, 0); /* before the collection, which may mark pages */
    h->scav_remote_ms = 0;
    if (!atomic_exchange(&h->remote_pending, 0) && !collect_request_pending(h))
        return;
    lock_acquire(&h->lock);
    atomic_store(&h->collect_asked, 0);
    heap_collect_pages(h, true);
    segment_release_empty(h);
    lock_release(&h->lock);
}

void heap_scavenge(uint64_t now_ms, uint64_t idle_ms, bool force)
{
    heap_quiesce_init(); /* quiesce_ready decides what a busy heap keeps pending */
    const heap_t *own = force ? heap_of_caller() : NULL;
    lock_acquire(&heap_pool_lock);
    for (heap_t *h = heap_all; h; h = h->all_next) {
        if (!h->in_use)
            continue;
        if (h == own) {
            heap_visit_own(h);
            continue;
        }
        int exit_passes = atomic_load(&h->exit_pending);
        if (ebb_unlikely(exit_passes != 0)) {
            /* A thread that got the dead owner's id keeps it looking alive:
             * then only steps 1-3 remain, and an idle process gets no
             * passes for it after this many. */
            if (exit_passes > EXIT_PENDING_MAX_PASSES)
                heap_exit_pending_clear(h);
            else
                atomic_compare_exchange_strong(&h->exit_pending, &exit_passes, exit_passes + 1);
        }
        /* Step 4 of "Heaps of threads that died": not waiting for the heap
         * to look idle, which a dead owner's never stops being. One whose
         * owner still runs its destructors is looked at next pass. */
        if (ebb_unlikely(atomic_load(&h->exit_pending)) && heap_hand_back_if_gone(h))
            continue;
        int remote = atomic_exchange(&h->remote_pending, 0) || collect_request_pending(h);
        int retained = atomic_exchange(&h->retained_pending, 0);
        int sparse = atomic_exchange(&h->sparse_pending, 0);
        if (!remote)
            h->scav_remote_ms = 0;
        else if (h->scav_remote_ms == 0)
            h->scav_remote_ms = now_ms | 1; /* 0 means none pending */
        if (!remote && !retained && !sparse && !force)
            continue;
        uint64_t count = atomic_load_explicit(&h->slow_count, memory_order_relaxed);
        if (count != h->scav_seen_count) {
            h->scav_seen_count = count;
            h->scav_seen_ms = now_ms;
        }
        uint64_t quiet_ms = ms_since(now_ms, h->scav_seen_ms);
        bool idle = force || quiet_ms >= idle_ms;
        /* Marked pages wait for a longer quiet than the rest (SPARSE_IDLE_FACTOR). */
        bool trim = force || quiet_ms >= heap_sparse_idle_ms(idle_ms);
        bool done = false;
        if (idle && (remote || retained || trim) && lock_try_acquire(&h->lock)) {
            if (heap_quiesce(h)) {
                if (heap_owner_gone(h)) { /* its thread died without handing it back */
                    heap_hand_back_held(h);
                    continue;
                }
                atomic_store(&h->collect_asked, 0);
                heap_collect_pages(h, true);
                if (force)
                    heap_trim_pages(h); /* malloc_trim: pages with live blocks too */
                else if (trim)
                    heap_trim_watched(h); /* pages with blocks freed under live ones */
                /* What this visit marked (collected remote frees into full
                 * pages) it has just trimmed; else it waits for the trim. */
                if (trim)
                    atomic_store(&h->sparse_pending, 0);
                else if (sparse)
                    atomic_fetch_or(&h->sparse_pending, sparse);
                segment_release_empty(h); /* an idle thread keeps no header either */
                heap_unquiesce(h);
                done = true;
            } else {
                heap_steal_free_pages(h);
                done = !quiesce_ready; /* without membarrier, this is all we can do */
                if (done && remote) { /* the rest is the owner's, when it runs */
                    atomic_store(&h->collect_parked, 1);
                    atomic_store(&h->collect_asked, 1);
                }
            }
            lock_release(&h->lock);
        } else if (!idle && remote && ms_since(now_ms, h->scav_remote_ms) >= busy_collect_wait_ms(h)) {
            atomic_store(&h->collect_parked, 0);
            atomic_store(&h->collect_asked, 1); /* stays pending until served */
            h->scav_remote_ms = now_ms | 1;
            remote = 0;
        }
        if (!done) { /* look again at a later pass */
            if (remote)
                atomic_store(&h->remote_pending, 1);
            if (retained)
                atomic_store(&h->retained_pending, 1);
            if (sparse && quiesce_ready) /* without membarrier, no visit can trim */
                atomic_fetch_or(&h->sparse_pending, sparse);
        }
    }
    lock_release(&heap_pool_lock);
}

/* Tests: a request to collect for the calling thread's heap, as the
 * scavenger makes it. */
void heap_inject_collect_request(void)
{
    if (tls.heap != &heap_empty)
        atomic_store(&tls.heap->collect_asked, 1);
}

/* Owner, lock held: the collection heap_scavenge asked for, if it did. */
void heap_collect_asked(heap_t *heap)
{
    if (!atomic_exchange(&heap->collect_asked, 0))
        return;
    atomic_store(&heap->collect_parked, 0);
    uint64_t t0 = os_now_us();
    heap_collect_pages(heap, false);
    segment_t *next;
    for (segment_t *seg = heap->segments; seg; seg = next) {
        next = seg->next;
        segment_maybe_release(heap, seg); /* keeps the last */
    }
    atomic_store_explicit(&heap->collect_cost_us, os_now_us() - t0, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------
 * Telemetry (walk.c): each heap in use, under its lock, optionally quiesced
 * like an idle heap above so that its free lists hold still. An owner busy in
 * a lock-free path is retried a few times (it finishes within microseconds,
 * or waits for this lock, which is why the lock is dropped between tries).
 * ------------------------------------------------------------------------- */
void heap_for_each(void (*fn)(heap_t *h, bool paused, void *arg), void *arg, bool pause)
{
    lock_acquire(&heap_pool_lock);
    for (heap_t *h = heap_all; h; h = h->all_next) {
        if (!h->in_use)
            continue;
        lock_acquire(&h->lock);
        /* Our own fast paths are not running; and an owner that cleared
         * `busy` has exited (it emptied the heap and never touches it again). */
        bool own = h == tls.heap || h->busy == NULL;
        bool paused = own;
        for (int tries = 0; pause && !own && !paused && tries < 50; tries++) {
            paused = heap_quiesce(h);
            if (!paused && quiesce_ready) {
                lock_release(&h->lock);
                os_yield();
                lock_acquire(&h->lock);
            } else if (!paused) {
                break; /* no membarrier: cannot pause at all */
            }
        }
        fn(h, paused, arg);
        if (paused && !own)
            heap_unquiesce(h);
        lock_release(&h->lock);
    }
    lock_release(&heap_pool_lock);
}

void heap_counts(size_t *alive, size_t *pooled)
{
    size_t a = 0, p = 0;
    lock_acquire(&heap_pool_lock);
    for (heap_t *h = heap_all; h; h = h->all_next) {
        if (h->in_use)
            a++;
        else
            p++;
    }
    lock_release(&heap_pool_lock);
    *alive = a;
    *pooled = p;
}

/* Purge passes gave back free slices they had held (segment_purge) and so
 * left segments owned by the threads `ids` entirely free: mark those heaps'
 * remote frees pending (every heap's with `all`), so that the scavenger's
 * next visit releases the segments if their owners stay idle. An id no heap
 * in use carries: its thread exited meanwhile, and its segments went to the
 * abandoned list (which the pass touched). A heap an id names wrongly (a new
 * thread reusing it) gets a visit for nothing. The caller pins no segment
 * (purge_segments). */
void heap_tell_owners(const uintptr_t *ids, size_t n, bool all)
{
    lock_acquire(&heap_pool_lock);
    if (all) {
        for (heap_t *h = heap_all; h; h = h->all_next)
            if (h->in_use)
                atomic_store(&h->remote_pending, 1);
    }
    for (size_t i = 0; i < n && !all; i++) {
        for (heap_t *h = heap_buckets ? *heap_id_bucket(ids[i]) : NULL; h; h = h->id_next) {
            if (h->in_use && h->thread_id == ids[i]) {
                atomic_store(&h->remote_pending, 1);
                break;
            }
        }
    }
    lock_release(&heap_pool_lock);
}

bool heap_scavenge_pending(int sparse_bits)
{
    bool pending = false;
    lock_acquire(&heap_pool_lock);
    for (heap_t *h = heap_all; h && !pending; h = h->all_next)
        pending = h->in_use && (atomic_load(&h->remote_pending) || atomic_load(&h->retained_pending) ||
                                atomic_load(&h->exit_pending) ||
                                (atomic_load(&h->sparse_pending) & sparse_bits) ||
                                collect_request_pending(h));
    lock_release(&heap_pool_lock);
    return pending;
}

/* ---------------------------------------------------------------------------
 * fork(): every lock is taken before the fork and released after it in both
 * processes, in the one order every other path nests them in: the purge pass,
 * the heap pool, the heaps, segment.c's locks, the purge list, the huge
 * cache, debug mode's leaf locks. In the child only the forking thread
 * survives: the other threads' heaps (debug heaps too) are abandoned so their
 * memory can be reclaimed, and
 * so a new thread that happens to get a dead thread's id cannot mistake that
 * thread's segments for its own.
 * ------------------------------------------------------------------------- */
static void fork_prepare(void)
{
    /* Looked up here, in the parent, holding no lock of ours: a child must
     * not call dlvsym, whose loader lock another thread may have held at
     * the fork (the child's scavenger needs the count, purge.c). */
    (void)os_libc_thread_count();
    debug_fork_prepare_first(); /* before any lock: a resize may need them */
    trace_fork_prepare();
    purge_fork_prepare_first();
    lock_acquire(&heap_pool_lock);
    for (heap_t *h = heap_all; h; h = h->all_next)
        lock_acquire(&h->lock);
    segment_fork_lock();
    purge_fork_prepare_last();
    huge_fork_lock();
    debug_fork_lock();
}

static void fork_parent(void)
{
    trace_fork_done();
    debug_fork_unlock();
    huge_fork_unlock();
    purge_fork_parent();
    segment_fork_unlock();
    for (heap_t *h = heap_all; h; h = h->all_next)
        lock_release(&h->lock);
    lock_release(&heap_pool_lock);
    debug_fork_done(false);
}

static void fork_child(void)
{
    trace_fork_child();
    debug_fork_unlock();
    debug_fork_child();
    huge_fork_unlock();
    purge_fork_child();
    segment_fork_unlock();
    for (heap_t *h = heap_all; h; h = h->all_next)
        lock_release(&h->lock);
    for (heap_t *h = heap_all; h; h = h->all_next) {
        if (h->in_use && h != tls.heap && h != tls_debug_heap) {
            segment_abandon_all(h);
            heap_reset(h);
            heap_pool_put_locked(h);
        } else if (h->in_use) {
            h->owner_tid = os_gettid(); /* this thread has new ids in the child */
            h->owner_pid = os_getpid();
        }
    }
    lock_release(&heap_pool_lock);
    debug_fork_done(true);
    purge_fork_child_restart();
}
