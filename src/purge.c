/*
 * purge.c — giving memory back to the OS after a delay: the purge list, the
 * purge pass, and the background thread (the scavenger) that runs passes when
 * the program does not call the allocator.
 *
 * What a pass does (purge_pass), oldest concern first:
 *   1. segments on the purge list: purge the free slices that have been free
 *      for a whole pass period (segment_purge; an exited thread's only once
 *      it has been gone ABANDONED_KEEP_FACTOR delays);
 *   2. the huge cache: purge mappings freed a delay ago, unmap them after the
 *      unmap delay (large.c);
 *   3. the segment cache: unmap segments past the unmap delay, beyond the
 *      standby (segment.c);
 *   4. abandoned segments: collect what other threads freed into them (segment.c);
 *   5. idle heaps with remote frees: free the pages whose blocks all came back
 *      while their owner slept (heap.c, page.c);
 *   6. in debug mode, the quarantine shards of threads that stopped freeing,
 *      and the reuse cache: purge and release the blocks that waited a delay
 *      (debug.c; first in the pass, so that 5 finds them).
 * Passes run one at a time (pass_lock) and, while anything is pending, one
 * purge delay apart; so a slice is purged between one and two delays after it
 * was freed. With no pending work the scavenger sleeps on a condition variable
 * with no timeout: an idle process gets no wake-ups (unless EBB_STATS_INTERVAL
 * asks for periodic samples, which the scavenger prints). Work that waits only
 * for a deadline further than two delays (an unmap delay) is not pending: the
 * scavenger sleeps until that deadline (purge_due_later).
 *
 * The purge-list protocol. A free must never be left unpurged because a pass
 * was running when it happened (the race of seeds/002_055b8aef5e6a65c3.txt).
 *   Freer (segment_free_run), for a run of slices:
 *     1. sets the run's bits in seg->dirty_slices (seq_cst RMW);
 *     3. lists the segment: reads seg->purge_listed (seq_cst); if 0, takes
 *        purge_lock, and if still not listed, links it and sets it to 1;
 *        then purge_wake();
 *     2. sets the run's bits in free_slices (release) — last, because after
 *        that the segment may be released and unmapped by its owner.
 *   Pass, per listed segment (marked busy under purge_lock, so it cannot be
 *   unmapped meanwhile):
 *     a. purges dirty & dirty_old slices that are free (claimed with a CAS);
 *        dirty slices not yet free belong to a free between its steps 1 and 2
 *        and stay dirty;
 *     b. sets dirty_old = dirty;
 *     c. under purge_lock: stores purge_listed = 0 (seq_cst), then re-reads
 *        dirty_slices (seq_cst); if 0 the segment leaves the list, else it is
 *        listed again (purge_listed = 1).
 *   A free whose step 1 comes before c's re-read is seen by it, and the
 *   segment stays listed; one whose step 1 comes after it reads purge_listed
 *   after c's store (both seq_cst: they cannot both miss), finds 0 and lists
 *   the segment again. Either way its slices meet a later pass.
 *
 * The wake-up protocol. `purge_work` is 1 while a pass may have work.
 *   Any source of work: first records it (dirty bits, cache entry, flag), then
 *   purge_wake(): exchanges purge_work to 1 (seq_cst); if it was 0, signals
 *   the condition variable under wake_mutex — whenever the thread exists or
 *   is being created (its creator marks it running only after pthread_create
 *   returns, and by then the thread may be waiting already).
 *   Scavenger, after a pass that left nothing pending: stores purge_work = 0
 *   (seq_cst), then checks every source again (purge_pending); if one has work
 *   it sets purge_work back to 1 and runs another pass. Otherwise it waits,
 *   re-checking purge_work under wake_mutex before every wait.
 *   A source that recorded its work before the re-check is found by it; one
 *   after it exchanges a 0 and signals, and the signal cannot fall between the
 *   scavenger's check of purge_work and its wait, which wake_mutex makes one
 *   step. A source that wakes only a thread that exists (purge_nudge: new
 *   pages above 1 KiB) and found none is looked for by the thread when it
 *   starts, before its first wait (scavenger_main).
 *
 * The thread is started lazily: it is wanted once the process has something
 * to purge and is not solo (below: no thread of its own, one segment, little
 * freed), or maps its second segment (or a huge block), and it is created by
 * the next allocation slow path (purge_poll(true)), holding no lock of ours.
 * Never from inside free(): the C library frees some memory while holding its
 * own locks (glibc frees a joined thread's TLS under the stack-cache lock),
 * and pthread_create takes the same lock — a free that started the thread
 * there would deadlock. Until the thread exists, frees purge what they leave
 * at once (purge_at_free: the process may go idle before any allocation
 * starts the thread), and passes run inline from purge_poll when one is due.
 * It blocks every signal and is detached, and it never keeps the process
 * alive: glibc ends a process when its count of running threads falls to 0
 * (the last to finish calls exit(0)), and a detached thread counts like any
 * other, so the thread takes itself out of that count as it starts
 * (scavenger_main, "Not one of the program's threads"). Before that, a
 * program whose main thread called pthread_exit, or a child forked from a
 * secondary thread, stayed alive for good, with only this thread left in
 * it, once its own threads had all finished (a sweep of real programs:
 * CPython's test_threading hung there). In a forked child it does not
 * exist; the child starts one like any process, or at once if it inherited
 * resident memory waiting for a pass or EBB_STATS_INTERVAL asks for samples
 * (purge_fork_child_restart). With EBB_BACKGROUND=0, or if the thread cannot
 * be created, passes run inline from purge_poll when one is due (purges then
 * happen only during allocator calls).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

enum { THREAD_NONE = 0, THREAD_STARTING, THREAD_RUNNING, THREAD_FAILED, THREAD_DISABLED };

static lock_t purge_lock = LOCK_INIT; /* the purge list, purge_listed, purge_busy */
static segment_t *purge_first;

/* One pass at a time. A signal handler that interrupts this thread while it
 * takes, holds or lets go of it (for a pass or an exclusion), and calls back
 * into ebb, must not wait for it: tls_locks_held tells (purge_exclusive_begin). */
static lock_t pass_lock = LOCK_INIT;

static void pass_take(void)
{
    lock_acquire(&pass_lock);
}

static bool pass_try_take(void)
{
    return lock_try_acquire(&pass_lock);
}

/* Once the lock is dropped, the blocks the pass took out of debug mode's
 * quarantine leave it: a write after free found there is reported, and a
 * report may abort, which must not happen holding the lock (debug.c,
 * debug_quarantine_after_pass). */
static void pass_drop(void)
{
    lock_release(&pass_lock);
    if (debug_enabled)
        debug_quarantine_after_pass();
}

static atomic_int purge_work;
static atomic_int thread_state;
static atomic_int thread_wanted;
static ebb_small_global pthread_mutex_t wake_mutex = PTHREAD_MUTEX_INITIALIZER;
static ebb_small_global pthread_cond_t wake_cond = PTHREAD_COND_INITIALIZER;
static _Atomic(uint64_t) next_inline_pass_ms;

static atomic_ulong pass_count;
static atomic_ulong wakeup_count;
static atomic_long start_delay_ms; /* tests: widen the window while STARTING */

void purge_inject_start_delay(long ms)
{
    atomic_store(&start_delay_ms, ms);
}

unsigned long purge_pass_count(void)
{
    return atomic_load_explicit(&pass_count, memory_order_relaxed);
}

unsigned long purge_wakeup_count(void)
{
    return atomic_load_explicit(&wakeup_count, memory_order_relaxed);
}

int purge_thread_state(void)
{
    return atomic_load_explicit(&thread_state, memory_order_relaxed);
}

/* The scavenger's thread id (os_gettid), 0 while there is none: written by
 * the scavenger as its first step, cleared in a forked child (which has
 * none; a thread of the child could get the id once the parent's scavenger
 * is gone). The leak report skips the thread by it (os_other_threads_registers)
 * without reading its /proc status, which may be unreadable (no descriptor
 * left: before 2026-12-06 the scavenger was then counted as a thread whose
 * registers went unread, and the report said INCOMPLETE). Relaxed: nothing
 * else is published with it. */
static atomic_int scavenger_tid;

/* How long purge_thread_tid waits for a scavenger just created to run. */
#define SCAVENGER_TID_WAIT_MS 500

/* A scavenger created but not yet run has no id here, and one is often
 * created just before the report (tests/test_debug.sh, leak_big_roots with
 * one descriptor left: 0.4 ms before it, and its first step came 0.03 ms
 * after the report asked). So while one is created or being created, wait
 * for its id, SCAVENGER_TID_WAIT_MS at most (a process stopped meanwhile);
 * past that, 0: the report then knows it by its name only. The leak
 * report's path alone calls this. */
int purge_thread_tid(void)
{
    uint64_t until = 0;
    for (;;) {
        int tid = atomic_load_explicit(&scavenger_tid, memory_order_relaxed);
        int state = atomic_load_explicit(&thread_state, memory_order_relaxed);
        if (tid != 0 || (state != THREAD_STARTING && state != THREAD_RUNNING))
            return tid;
        uint64_t now = os_now_ms();
        if (until == 0)
            until = now + SCAVENGER_TID_WAIT_MS;
        else if (now >= until)
            return 0;
        os_sleep_ms(1);
    }
}

/* A solo process has never created a thread, has mapped one segment and no
 * huge block, and holds at most SOLO_PENDING_MAX bytes of freed slices
 * waiting for a pass. It gets no scavenger: a thread would cost it what every
 * threaded process pays under glibc (locked stdio, slower forks, and
 * unshare(CLONE_NEWUSER) refused; docs/memory-return.md), and it has too
 * little to give back to need one. Its passes run inline from its allocator
 * calls (purge_poll), so when it goes idle it keeps at most SOLO_PENDING_MAX
 * of freed slices plus its retained pages (internal.h, items 1 and 2). It
 * stops being solo for good, and asks for the thread, at the first of: a
 * second segment or a huge block (purge_want_thread), a free that would take
 * its pending slices past the bound (that free purges at once instead, as
 * every free does until the thread runs), or a thread in the process. The
 * program's first pthread_create is where that shows: glibc marks the
 * process threaded, then callocs the new thread's TLS vector; that calloc
 * starts ours (purge_poll, or purge_poll_start for a calloc that took no
 * slow path: internal.h, alloc_calloc_slow), holding no lock of glibc's
 * (allocate_stack callocs the vector before it takes any). Otherwise a
 * process whose new thread only freed, and which then slept, would have no
 * scavenger to collect those frees: free never starts it (review finding).
 * Debug mode is never solo: its quarantine (internal.h, item 7) waits for
 * passes, and a solo process that went idle would keep it. */
static atomic_int solo_over;

/* Set calloc's watch bits (internal.h, alloc_calloc_slow) to `bits`.
 * seq_cst: purge_want_thread orders it against the thread's state. */
static void calloc_watch(unsigned bits)
{
    const unsigned mask = CALLOC_WATCH_THREADS | CALLOC_WATCH_WANTED;
    unsigned old = atomic_load_explicit(&alloc_calloc_slow, memory_order_relaxed);
    while (!atomic_compare_exchange_weak(&alloc_calloc_slow, &old, (old & ~mask) | bits))
        ;
}

/* Would a scavenger do anything? Not with EBB_PURGE_DELAY=-1 (no pass but
 * malloc_trim's: purge_wake never wakes it) unless EBB_STATS_INTERVAL asks
 * for samples, which it prints. */
static bool thread_useful(void)
{
    return option_get(OPT_PURGE_DELAY) >= 0 || option_get(OPT_STATS_INTERVAL) > 0;
}

static bool purge_solo(void)
{
    if (atomic_load_explicit(&solo_over, memory_order_relaxed))
        return false;
    if (debug_enabled) {
        purge_want_thread();
        return false;
    }
    if (os_single_threaded())
        return true;
    purge_want_thread(); /* a thread appeared: from now on, the scavenger's job */
    return false;
}

/* The scavenger thread starts only on an allocation path (see the top of
 * this file). A process may free its memory and go idle before one runs
 * again: without a thread, delayed work would then wait forever. So until
 * the thread exists, frees purge what they leave at once (as with
 * EBB_PURGE_DELAY=0). It is a short window: such a free asks for the thread,
 * and the next allocation slow path starts it. A solo process (above) defers
 * its frees to its own inline passes instead. With EBB_BACKGROUND=0, or when
 * the thread could not be created, passes run inline from allocator calls
 * instead, as documented for that option. */
static bool at_free(const segment_t *seg, uint64_t mask)
{
    long delay = option_get(OPT_PURGE_DELAY);
    if (delay == 0)
        return true;
    if (delay < 0 || atomic_load_explicit(&thread_state, memory_order_relaxed) != THREAD_NONE)
        return false;
    if (purge_solo()) {
        if (seg == NULL)
            return false;
        /* A solo process has this one segment: its dirty slices are all the
         * slices it has waiting for a pass. */
        uint64_t dirty = atomic_load_explicit(&seg->dirty_slices, memory_order_relaxed) | mask;
        if ((size_t)__builtin_popcountll(dirty) * SLICE_SIZE <= SOLO_PENDING_MAX)
            return false;
    }
    purge_want_thread();
    return true;
}

bool purge_at_free(void)
{
    return at_free(NULL, 0);
}

bool purge_slices_at_free(const segment_t *seg, uint64_t mask)
{
    return at_free(seg, mask);
}

/* Whether page.c may keep an emptied page for reuse (page_free_local_slow):
 * not in the window above, while no scavenger exists to take a kept page
 * back once its thread idles. A process that frees its memory and goes idle
 * before an allocation starts the thread kept one written page per size
 * class for good (review finding: a forked child that freed the 256 MiB it
 * inherited, then slept, held 5 MiB): there the page goes back to its
 * segment, and the free purges it at once. It is the same short window: the
 * thread is asked for, and the next allocation slow path starts it. */
bool purge_keeps_empty_pages(void)
{
    if (atomic_load_explicit(&thread_state, memory_order_relaxed) != THREAD_NONE ||
        option_get(OPT_PURGE_DELAY) < 0 || purge_solo())
        return true; /* a scavenger, passes inline (disabled, failed, solo), or no purge at all */
    purge_want_thread();
    return false;
}

bool purge_thread_running(void)
{
    return atomic_load_explicit(&thread_state, memory_order_relaxed) == THREAD_RUNNING;
}

static long purge_delay_ms(void)
{
    return option_get(OPT_PURGE_DELAY);
}

bool purge_release_caches(void)
{
    bool released = segment_cache_release();
    released |= huge_cache_release();
    return released;
}

void purge_init(void)
{
    if (!option_get(OPT_BACKGROUND)) {
        atomic_store(&thread_state, THREAD_DISABLED);
    } else if (thread_useful()) {
        calloc_watch(CALLOC_WATCH_THREADS);
        if (option_get(OPT_STATS_INTERVAL) > 0)
            purge_want_thread(); /* the samples come from the scavenger */
    }
    stats_init();
}

/* ---------------------------------------------------------------------------
 * The purge list
 * ------------------------------------------------------------------------- */
void purge_segment_dirty(segment_t *seg)
{
    /* Step 3. */
    if (atomic_load(&seg->purge_listed))
        return;
    lock_acquire(&purge_lock);
    if (!atomic_load_explicit(&seg->purge_listed, memory_order_relaxed)) {
        atomic_store(&seg->purge_listed, 1);
        seg->purge_prev = NULL;
        seg->purge_next = purge_first;
        if (purge_first)
            purge_first->purge_prev = seg;
        purge_first = seg;
    }
    lock_release(&purge_lock);
    purge_wake();
}

static void purge_unlink_locked(segment_t *seg)
{
    if (seg->purge_prev)
        seg->purge_prev->purge_next = seg->purge_next;
    else
        purge_first = seg->purge_next;
    if (seg->purge_next)
        seg->purge_next->purge_prev = seg->purge_prev;
    seg->purge_next = seg->purge_prev = NULL;
    atomic_store(&seg->purge_listed, 0);
}

void purge_segment_forget(segment_t *seg)
{
    lock_acquire(&purge_lock);
    while (seg->purge_busy) {
        lock_release(&purge_lock);
        os_sleep_ms(1);
        lock_acquire(&purge_lock);
    }
    if (atomic_load_explicit(&seg->purge_listed, memory_order_relaxed))
        purge_unlink_locked(seg);
    lock_release(&purge_lock);
}

/* Steps a–c over every listed segment. True if dirty slices remain. */
static bool purge_segments(uint64_t now_ms, uint64_t keep_ms, bool force)
{
    bool pending = false;
    lock_acquire(&purge_lock);
    segment_t *seg = purge_first;
    if (seg)
        seg->purge_busy = 1;
    lock_release(&purge_lock);
    /* Owners whose segments a purge left entirely free (segment_purge), told
     * once no segment is pinned: heap_tell_owners takes heap_pool_lock, whose
     * holders may wait for a pinned segment's purge_busy (review finding: a
     * deadlock). More than fit here: every heap is told. */
    uintptr_t tell[16];
    size_t ntell = 0;
    bool tell_all = false;
    while (seg) {
        uintptr_t owner = 0;
        segment_purge(seg, now_ms, keep_ms, force, &owner); /* steps a and b */
        if (owner != 0 && ntell < sizeof tell / sizeof tell[0])
            tell[ntell++] = owner;
        else if (owner != 0)
            tell_all = true;
        lock_acquire(&purge_lock);
        segment_t *next = seg->purge_next;
        /* Step c. */
        atomic_store(&seg->purge_listed, 0);
        if (atomic_load(&seg->dirty_slices) != 0) {
            atomic_store(&seg->purge_listed, 1);
            pending = true;
        } else {
            purge_unlink_locked(seg);
            seg->purge_held_mask = 0; /* (an owner claimed the last dirty slices) */
        }
        seg->purge_busy = 0;
        if (next)
            next->purge_busy = 1;
        lock_release(&purge_lock);
        seg = next;
    }
    if (ntell != 0 || tell_all)
        heap_tell_owners(tell, ntell, tell_all);
    return pending;
}

/* ---------------------------------------------------------------------------
 * The pass
 * ------------------------------------------------------------------------- */

/* Is any segment on the purge list (freed slices waiting for their delay)? */
static bool purge_listed(void)
{
    lock_acquire(&purge_lock);
    bool listed = purge_first != NULL;
    lock_release(&purge_lock);
    return listed;
}

/* Resident memory a pass gives back without visiting a heap: freed slices,
 * cached huge mappings, abandoned segments. */
static bool purge_unowned_pending(void)
{
    return purge_listed() || huge_cache_pending() || segment_abandoned_pending();
}

/* Does any source of work hold resident memory a pass would give back? All
 * but the segment cache: the slices of cached segments are on the purge list
 * while dirty, so what the cache itself waits for is address space (unmaps).
 * `sparse_bits`: which marks of live heaps count (heap_t.sparse_pending).
 * New pages waiting for their first look at idle (SPARSE_FRESH,
 * SPARSE_FRESH_HOT) are work for a scavenger that exists, not a reason to
 * start one. */
static bool purge_resident_pending(int sparse_bits)
{
    return purge_unowned_pending() || heap_scavenge_pending(sparse_bits) ||
           (debug_enabled && (debug_reuse_pending() || debug_quarantine_pending()));
}

/* Is any source of work non-empty? (The scavenger's re-check, with
 * SPARSE_ALL.) */
static bool purge_pending(int sparse_bits)
{
    return purge_resident_pending(sparse_bits) || segment_cache_pending();
}

/* What a solo process's inline pass (purge_poll) can still do: all of the
 * above but the visit to its one heap. That visit trims pages and takes back
 * the kept ones once the owner has been idle, and the owner is the caller,
 * in the middle of an allocator call: only a scavenger ever does it. */
static bool purge_pending_solo(void)
{
    return purge_unowned_pending() || segment_cache_pending();
}

/* How long the free slices of an exited thread's segments wait for a thread
 * that reclaims them (internal.h, ABANDONED_KEEP_FACTOR). */
static uint64_t abandoned_keep_ms(long delay)
{
    return delay > 0 ? delay_scaled_ms((uint64_t)delay, ABANDONED_KEEP_FACTOR) : 0;
}

/* How long a heap must have taken no slow path to count as idle for the
 * scavenger's visit (heap.c, heap_scavenge). */
static uint64_t heap_idle_ms(long delay)
{
    return delay > HEAP_IDLE_MIN_MS ? (uint64_t)delay : HEAP_IDLE_MIN_MS;
}

uint64_t purge_abandoned_trim_wait_ms(void)
{
    return heap_sparse_idle_ms(heap_idle_ms(purge_delay_ms()));
}

/* Work that waits only for a deadline more than two purge delays away (a
 * cached mapping or segment, or the last region's rest, waiting out the
 * unmap delay) is not "pending": its source notes the deadline here
 * (purge_due_later), and the scavenger sleeps until the earliest instead of
 * passing once a delay until then (review finding: 20 wake-ups a second for
 * an hour with EBB_UNMAP_DELAY=3600000, and 20 in the second after every
 * idle at the default). Reset by each pass, which notes them again. */
static _Atomic(uint64_t) far_due_ms = UINT64_MAX;

static void far_due_lower(uint64_t due_ms)
{
    uint64_t seen = atomic_load(&far_due_ms);
    while (due_ms < seen && !atomic_compare_exchange_weak(&far_due_ms, &seen, due_ms)) {
    }
}

bool purge_due_later(uint64_t due_ms, uint64_t now_ms)
{
    long delay = purge_delay_ms();
    uint64_t soon = now_ms + 2 * (uint64_t)(delay > 0 ? delay : 1);
    if (due_ms <= soon)
        return false;
    far_due_lower(due_ms);
    return true;
}

/* One pass; the caller holds pass_lock. True if work remains for later.
 * `force`: everything that can go back goes now; debug mode's quarantine and
 * reuse cache too if `force_debug`. */
static bool purge_pass_locked(bool force, bool force_debug)
{
    atomic_fetch_add_explicit(&pass_count, 1, memory_order_relaxed);
    uint64_t now = os_now_ms();
    long delay = purge_delay_ms();
    bool pending = false;
    atomic_store(&far_due_ms, UINT64_MAX); /* noted again below */
    /* Debug mode's quarantine and reuse cache first: their blocks go back
     * to their pages. */
    if (debug_enabled) {
        pending |= debug_quarantine_decay(now, force_debug);
        pending |= debug_reuse_decay(now, force_debug);
    }
    /* Idle heaps next: the pages they give up join the segments below. */
    uint64_t idle_ms = heap_idle_ms(delay);
    heap_scavenge(now, idle_ms, force);
    segment_abandoned_collect(now, heap_sparse_idle_ms(idle_ms), force);
    if (delay >= 0 || force)
        pending |= purge_segments(now, abandoned_keep_ms(delay), force);
    pending |= huge_cache_decay(now, force);
    pending |= segment_cache_decay(now, force);
    pending |= heap_scavenge_pending(SPARSE_ALL);
    return pending;
}

void purge_run(bool force, bool force_debug)
{
    pass_take();
    purge_pass_locked(force, force_debug);
    if (force)
        purge_pass_locked(true, force_debug); /* what the first pass freed (pages → slices) */
    pass_drop();
}

bool purge_exclusive_begin(void)
{
    /* A handler interrupted this thread in a pass, an exclusion or any other
     * locked section of ebb (an allocator call's slow path): each lock the
     * snapshot or walk takes may be one the interrupted code holds. */
    if (lock_any_held())
        return false;
    pass_take();
    return true;
}

void purge_exclusive_end(void)
{
    pass_drop();
}

/* ---------------------------------------------------------------------------
 * Waking and the scavenger thread
 * ------------------------------------------------------------------------- */
void purge_wake(void)
{
    if (purge_delay_ms() < 0)
        return; /* never purge on our own; malloc_trim still works */
    bool solo = purge_solo(); /* before the exchange: a solo process's inline
                               * passes may keep purge_work at 1 when a thread
                               * appears, and then it must still ask for ours */
    if (atomic_exchange(&purge_work, 1) != 0)
        return;
    int state = atomic_load(&thread_state);
    if (state == THREAD_RUNNING || state == THREAD_STARTING) {
        /* STARTING too: the new thread may already be running, and may have
         * found nothing and be about to wait; a wake-up that skipped it
         * would leave it asleep with purge_work = 1, and every later wake
         * would see the 1 and not signal either. */
        /* With signals blocked: a handler that interrupted this section
         * and freed a huge block came back here, to a mutex its own thread
         * held, for ever (review finding: the scavenger, waiting for the
         * same mutex, hung with it). The wake is rare: once per stretch of
         * work after the scavenger went idle. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_mutex_lock(&wake_mutex);
        pthread_cond_signal(&wake_cond);
        pthread_mutex_unlock(&wake_mutex);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    } else if (state == THREAD_NONE && !solo) {
        purge_want_thread();
    }
}

/* Seq_cst load: the caller's record of its work (a seq_cst RMW) comes
 * before it in the single total order, so a NONE read here means that a
 * thread created later finds the record when it starts (scavenger_main). */
void purge_nudge(void)
{
    int state = atomic_load(&thread_state);
    if (state == THREAD_RUNNING || state == THREAD_STARTING)
        purge_wake();
}

/* EBB_STATS_INTERVAL: print a sample if one is due; the next deadline. */
static uint64_t sample_if_due(uint64_t next_ms, long interval_ms)
{
    uint64_t now = os_now_ms();
    if (interval_ms <= 0 || now < next_ms)
        return next_ms;
    stats_print_sample();
    return now + (uint64_t)interval_ms;
}

/* Wait (wake_mutex held) until purge_work is set, or until `deadline_ms` when
 * samples are due (UINT64_MAX: no deadline, no timed wake-ups at all). */
static void scavenger_wait(uint64_t deadline_ms)
{
    while (!atomic_load(&purge_work)) {
        if (deadline_ms == UINT64_MAX) {
            pthread_cond_wait(&wake_cond, &wake_mutex);
            continue;
        }
        uint64_t now = os_now_ms();
        if (now >= deadline_ms)
            return;
        struct timespec ts;
        os_monotonic_after_ms(&ts, deadline_ms - now); /* the deadlines' clock */
        pthread_cond_clockwait(&wake_cond, &wake_mutex, CLOCK_MONOTONIC, &ts);
    }
}

/* Sleep `delay_ms` (at least 1) between passes, waking for each sample due
 * meanwhile: one os_sleep_ms of the whole delay printed no sample for as
 * long as freed memory waited (soak finding: one a second with
 * EBB_PURGE_DELAY=1000 and EBB_STATS_INTERVAL=100; test_ebbrun.sh). */
static uint64_t scavenger_sleep(long delay_ms, uint64_t next_sample, long interval_ms)
{
    uint64_t end = os_now_ms() + (uint64_t)(delay_ms > 0 ? delay_ms : 1);
    for (;;) {
        uint64_t now = os_now_ms();
        if (now >= end)
            return next_sample;
        uint64_t until = next_sample < end ? next_sample : end;
        if (until > now)
            os_sleep_ms((long)(until - now));
        next_sample = sample_if_due(next_sample, interval_ms);
    }
}

/* Not one of the program's threads. `count` is the C library's count of
 * running threads (os_libc_thread_count, found by the thread that created
 * this one), which pthread_create raised for this thread. The steps:
 *   1. pthread_create adds this thread to the count before it runs.
 *   2. Here, first of all, the thread takes itself off, holding nothing.
 *      From then on the count is the program's threads alone: the last of
 *      them to finish takes it to 0 and calls exit(0), as without ebb, and
 *      the exit ends this thread with the process.
 *   3. If this thread's own step takes it to 0, the program's threads all
 *      finished between step 1 and step 2, each seeing this thread still
 *      counted: none called exit. This thread calls exit(0) in their stead:
 *      atexit handlers and destructors then run on it, as on the program's
 *      last thread, so it has a stack of the size the program's threads
 *      get (it had 64 KiB, less the static TLS: a handler with 128 KiB of
 *      locals crashed, and a big static TLS left no room to start it; review
 *      finding), and it takes back the signal mask of the thread that
 *      started it before calling exit (all were blocked).
 *   4. The thread never returns (glibc would take it off the count again).
 * Without the count (a stripped static executable, or another C library),
 * the thread stays counted: a process whose last thread of its own ends by
 * pthread_exit or by returning from its start routine keeps running with
 * this thread alone (docs/memory-return.md, "The last thread"). */
static atomic_long leave_delay_ms; /* tests: widen the window of step 3 */

void purge_inject_leave_count_delay(long ms)
{
    atomic_store(&leave_delay_ms, ms);
}

#define SCAVENGER_STACK_MIN ((size_t)256 << 10)
#define SCAVENGER_STACK_MAX ((size_t)8 << 20)

/* The signal mask of the thread that started the scavenger (step 3). */
static sigset_t starter_mask ebb_cold_bss;

static void leave_thread_count(_Atomic(unsigned) *count)
{
    long delay = atomic_load_explicit(&leave_delay_ms, memory_order_relaxed);
    if (ebb_unlikely(delay > 0))
        os_sleep_ms(delay);
    if (count != NULL && atomic_fetch_sub(count, 1) == 1) {
        pthread_sigmask(SIG_SETMASK, &starter_mask, NULL);
        exit(0);
    }
}

static void *scavenger_main(void *arg)
{
    /* Known first: a leak report at an exit of step 3 skips this thread. */
    atomic_store_explicit(&scavenger_tid, os_gettid(), memory_order_relaxed);
    leave_thread_count(arg); /* step 2 of "Not one of the program's threads" */
    /* Work recorded while no thread existed that woke none: a new page of a
     * class above 1 KiB nudges only a scavenger that exists (purge_nudge).
     * A thread started with nothing else pending (by the program's first
     * pthread_create, or a second segment) slept without looking at it, and
     * the heap's later pages did not nudge again: a solo main's pages of
     * 2-64 KiB blocks stayed resident for good once it had a thread and
     * idled (review of 3f86810). A small class's new page waits, as in a
     * running scavenger, for a visit made for another reason. */
    if (purge_delay_ms() >= 0 && !atomic_load(&purge_work) &&
        purge_pending(SPARSE_MARKED | SPARSE_FRESH_HOT))
        atomic_store(&purge_work, 1);
    long interval = option_get(OPT_STATS_INTERVAL);
    uint64_t next_sample = interval > 0 ? os_now_ms() + (uint64_t)interval : UINT64_MAX;
    for (;;) {
        uint64_t due = atomic_load(&far_due_ms);
        pthread_mutex_lock(&wake_mutex);
        scavenger_wait(due < next_sample ? due : next_sample);
        pthread_mutex_unlock(&wake_mutex);
        next_sample = sample_if_due(next_sample, interval);
        if (!atomic_load(&purge_work)) {
            if (os_now_ms() < atomic_load(&far_due_ms))
                continue; /* woke only for a sample */
            atomic_store(&purge_work, 1); /* a far deadline came: pass */
        }
        atomic_fetch_add_explicit(&wakeup_count, 1, memory_order_relaxed);

        /* Work is pending: pass, one delay apart, until none is left. */
        for (;;) {
            next_sample = scavenger_sleep(purge_delay_ms(), next_sample, interval);
            pass_take();
            bool pending = purge_pass_locked(false, false);
            pass_drop();
            next_sample = sample_if_due(next_sample, interval);
            if (pending)
                continue;
            atomic_store(&purge_work, 0);
            if (!purge_pending(SPARSE_ALL))
                break;
            atomic_store(&purge_work, 1);
        }
    }
    return NULL;
}

static void purge_start_thread(void)
{
    int expected = THREAD_NONE;
    if (!atomic_compare_exchange_strong(&thread_state, &expected, THREAD_STARTING))
        return;
    int saved_errno = errno; /* the allocation that starts it may still succeed */
    /* A cancel pending in the thread that happens to start it must not act
     * in here (malloc is no cancellation point): the state would stay
     * STARTING, and nothing would be purged again (review finding). os.c's
     * calls are no cancellation points either; this covers libc's. */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits this mask */
    starter_mask = old;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The stack size the program's threads get by default (step 3 of "Not
     * one of the program's threads"), within [256 KiB, 8 MiB]: address
     * space, resident only where used; not less (`ulimit -s 16` gave it 16
     * KiB), nor more (under a tight RLIMIT_AS, or no overcommit, all of it
     * is charged; review finding). */
    size_t stack = 0;
    pthread_attr_t defaults;
    if (pthread_getattr_default_np(&defaults) == 0) {
        pthread_attr_getstacksize(&defaults, &stack);
        pthread_attr_destroy(&defaults);
    }
    stack = stack < SCAVENGER_STACK_MIN ? SCAVENGER_STACK_MIN
            : stack > SCAVENGER_STACK_MAX ? SCAVENGER_STACK_MAX : stack;
    pthread_attr_setstacksize(&attr, stack);
    /* Not a real-time policy: a SCHED_FIFO or SCHED_RR thread that happened to
     * start the scavenger would otherwise give it its policy and priority, and
     * each pass would preempt the program's ordinary threads. Such a starter's
     * scavenger gets SCHED_OTHER (lowering a policy needs no privilege); any
     * other policy is inherited as it is (SCHED_IDLE to SCHED_OTHER could need
     * one, and a refused pthread_create would leave no scavenger at all). The
     * CPU affinity and nice value stay the starter's too (but for a nice value
     * SCHED_RESET_ON_FORK resets): the program chose them for its threads,
     * and this thread runs for them. */
    bool realtime = os_thread_realtime();
    if (realtime) {
        struct sched_param param = {.sched_priority = 0};
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
        pthread_attr_setschedparam(&attr, &param);
    }
    pthread_t tid;
    bool traced = debug_untraced_begin(); /* its allocations are ebb's */
    bool room = os_thread_room(SCAVENGER_ROOM_THREADS);
    _Atomic(unsigned) *count = os_libc_thread_count(); /* holding no lock of ours: dlvsym */
    int rc = room ? pthread_create(&tid, &attr, scavenger_main, (void *)count) : EAGAIN;
    if (rc != 0 && room && realtime) {
        /* The policy is set on the new thread by its id, which a sandbox
         * (seccomp) may refuse: better a real-time scavenger than none. */
        pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
        rc = pthread_create(&tid, &attr, scavenger_main, (void *)count);
    }
    if (rc == 0) /* before the program runs on: the leak report knows it by
                  * name too (purge_thread_tid) */
        pthread_setname_np(tid, PURGE_THREAD_NAME);
    debug_untraced_end(traced);
    pthread_attr_destroy(&attr);
    long delay = atomic_load_explicit(&start_delay_ms, memory_order_relaxed);
    if (ebb_unlikely(delay > 0))
        os_sleep_ms(delay);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    atomic_store(&thread_state, rc == 0 ? THREAD_RUNNING : THREAD_FAILED);
    calloc_watch(0);
    if (!room) {
        static const char msg[] = "ebb: not starting the background purge thread: it would take "
                                  "one of the last threads RLIMIT_NPROC or pids.max allows; "
                                  "memory is returned during allocator calls only\n";
        os_write_stderr(msg, sizeof msg - 1);
    } else if (rc != 0) {
        static const char msg[] = "ebb: cannot start the background purge thread; "
                                  "memory is returned during allocator calls only\n";
        os_write_stderr(msg, sizeof msg - 1);
    }
    pthread_setcancelstate(cancel_state, &cancel_state);
    errno = saved_errno;
}

void purge_want_thread(void)
{
    if (!atomic_load_explicit(&solo_over, memory_order_relaxed))
        atomic_store_explicit(&solo_over, 1, memory_order_relaxed);
    if (!thread_useful())
        return;
    if (atomic_load_explicit(&thread_state, memory_order_relaxed) == THREAD_NONE &&
        !atomic_load_explicit(&thread_wanted, memory_order_relaxed)) {
        atomic_store_explicit(&thread_wanted, 1, memory_order_relaxed);
        calloc_watch(CALLOC_WATCH_WANTED);
        /* A start that came between the test above and the watch has
         * cleared the watch already (purge_start_thread: the state, then
         * the watch, both seq_cst, as here): clear what we set after it,
         * or every later calloc would take the slow path for nothing. */
        if (atomic_load(&thread_state) != THREAD_NONE)
            calloc_watch(0);
    }
}

static atomic_bool thread_forbidden; /* purge_forbid_thread */

void purge_forbid_thread(void)
{
    atomic_store_explicit(&thread_forbidden, true, memory_order_relaxed);
}

/* No thread yet: note a thread of the program's (which wants ours, see
 * "solo"), then start ours if it is wanted, `may_start`, and not forbidden.
 * True if started. */
static bool start_if_wanted(bool may_start)
{
    (void)purge_solo();
    if (!may_start || !atomic_load_explicit(&thread_wanted, memory_order_relaxed) ||
        atomic_load_explicit(&thread_forbidden, memory_order_relaxed))
        return false;
    atomic_store_explicit(&thread_wanted, 0, memory_order_relaxed);
    purge_start_thread();
    return true;
}

void purge_poll(bool may_start)
{
    int state = atomic_load_explicit(&thread_state, memory_order_relaxed);
    if (ebb_likely(state == THREAD_RUNNING))
        return;
    if (state == THREAD_NONE && start_if_wanted(may_start))
        return;
    if (state == THREAD_STARTING)
        return;
    /* No thread (disabled or failed): a pass inline, at most one per delay;
     * also once a far deadline came (purge_due_later), which sets no
     * purge_work. */
    if (!atomic_load_explicit(&purge_work, memory_order_relaxed)) {
        uint64_t due = atomic_load_explicit(&far_due_ms, memory_order_relaxed);
        if (ebb_likely(due == UINT64_MAX) || os_now_ms() < due)
            return;
    }
    uint64_t now = os_now_ms();
    if (now < atomic_load_explicit(&next_inline_pass_ms, memory_order_relaxed))
        return;
    if (!pass_try_take())
        return; /* another thread is in a pass */
    long delay = purge_delay_ms();
    atomic_store_explicit(&next_inline_pass_ms, now + (uint64_t)(delay > 0 ? delay : 1),
                          memory_order_relaxed);
    bool pending = purge_pass_locked(false, false);
    pass_drop();
    /* A solo process's heap marks (pages to trim, a kept page) wait for a
     * scavenger; counted as pending, they kept purge_work set for good, and
     * every slow path read the clock (a FIFO of 100 blocks of 1 KiB on pages
     * of 64: three reads every 100 mallocs, 340 instructions of the 1,500
     * its pages' turns cost; docs/benchmarks.md). A thread's start asks for
     * them again (scavenger_main). */
    bool solo = purge_solo();
    if (solo)
        pending = purge_pending_solo();
    if (!pending) {
        atomic_store(&purge_work, 0);
        if (solo ? purge_pending_solo() : purge_pending(SPARSE_ALL))
            atomic_store(&purge_work, 1);
    } else if (!atomic_load(&purge_work)) {
        /* A pass a far deadline started (purge_work 0) that left work due
         * soon: nothing else would run the next one (review finding: a
         * forked child's second cached mapping stayed mapped for good). */
        far_due_lower(now + (uint64_t)(delay > 0 ? delay : 1));
    }
}

void purge_poll_start(void)
{
    if (atomic_load_explicit(&thread_state, memory_order_relaxed) == THREAD_NONE)
        (void)start_if_wanted(true);
}

/* ---------------------------------------------------------------------------
 * fork: no pass runs across a fork, and the child starts with no thread.
 * ------------------------------------------------------------------------- */
void purge_fork_prepare_first(void)
{
    lock_acquire(&pass_lock);
}

void purge_fork_prepare_last(void)
{
    lock_acquire(&purge_lock);
}

void purge_fork_parent(void)
{
    lock_release(&purge_lock);
    lock_release(&pass_lock);
}

void purge_fork_child(void)
{
    lock_release(&purge_lock);
    lock_release(&pass_lock);
    pthread_mutex_init(&wake_mutex, NULL);
    pthread_cond_init(&wake_cond, NULL);
    atomic_store_explicit(&scavenger_tid, 0, memory_order_relaxed);
    /* A child forked after its parent's leak report began (a destructor
     * that runs after ebb's) is a process of its own, with its own exit. */
    atomic_store_explicit(&thread_forbidden, false, memory_order_relaxed);
    int state = atomic_load(&thread_state);
    if (state != THREAD_DISABLED) {
        atomic_store(&thread_state, THREAD_NONE);
        /* A solo parent's child watches for its first thread; any other
         * child starts its thread as a wanting source asks (restart). */
        calloc_watch(atomic_load_explicit(&solo_over, memory_order_relaxed) || !thread_useful()
                         ? 0
                         : CALLOC_WATCH_THREADS);
    }
}

/* The end of the child's fork handler, every lock of ours released (glibc has
 * reset its own thread locks in the child before this runs). The child starts
 * with no scavenger and gets one the way a new process does: lazily, once
 * something becomes purgeable. Until then its frees purge what they leave at
 * once (purge_at_free) and ask for the thread, which the next allocation slow
 * path starts. A child that execs at once, the common case, so pays for no
 * thread: making one here cost each child of a fork-malloc-exit loop
 * 1.2-1.4 ms of its 7 (docs/memory-return.md, "fork").
 *
 * Two cases start the thread here. EBB_STATS_INTERVAL asks for samples,
 * which the thread prints. And the child inherited resident memory that is
 * waiting for a pass (purge_resident_pending), among it the segments of the
 * parent's other threads, which the child's fork handler has just abandoned:
 * what the child frees into them is collected by a pass only. No free of
 * the child's purges that work, and free() must not start threads (see the
 * top of this file), so a child that never allocated again would hold all
 * of it. Work that holds only address space (a spare region, cached
 * segments beyond the standby, all already purged) waits for the thread the
 * child's own work starts: purge_work is cleared so that this work's first
 * purge_wake asks for it. */
void purge_fork_child_restart(void)
{
    int state = atomic_load(&thread_state);
    /* With EBB_PURGE_DELAY=-1 nothing is purged but by malloc_trim, and no
     * thread could ever be woken (purge_wake). */
    /* A cached huge mapping too, purged or not (its header page stays
     * resident, and only a pass unmaps it: a child that went idle kept every
     * one before it counted; review finding). */
    bool resident = purge_delay_ms() >= 0 && (purge_resident_pending(SPARSE_MARKED) || huge_cache_any());
    /* The fork may have come between a pass's store of purge_work = 0 and
     * its re-check of the sources (the fork handler held a lock that the
     * re-check waits for): the child inherits the 0 with work pending. Set
     * it again for whatever runs the child's passes. */
    if (state == THREAD_DISABLED) {
        if (purge_delay_ms() >= 0 && purge_pending(SPARSE_ALL)) /* -1: no pass but malloc_trim's */
            atomic_store(&purge_work, 1);
        return;
    }
    if (state != THREAD_NONE)
        return;
    if (purge_solo()) {
        /* Inherited from a solo parent: at most SOLO_PENDING_MAX waits, for
         * the child's own inline passes, as it did for the parent's. */
        atomic_store(&purge_work, purge_delay_ms() >= 0 && purge_pending(SPARSE_ALL));
        return;
    }
    if (resident || option_get(OPT_STATS_INTERVAL) > 0) { /* the samples come from it */
        if (resident)
            atomic_store(&purge_work, 1);
        purge_start_thread();
        return;
    }
    atomic_store(&purge_work, 0);
    atomic_store(&thread_wanted, 0);
}
