/*
 * test_stats.c — telemetry: the snapshot (ebb_stats_get), the heap walk
 * (ebb_heap_walk) and glibc's mallinfo2, as include/ebb.h specifies them.
 *
 * Built twice (tests.mk): linked with -lebb (every case), and with
 * -DSTATS_EBB_NAMES against ebb's sources under ThreadSanitizer, where only the
 * concurrent case runs, on the ebb_ names: snapshots and walks (blocks
 * included) racing a multithreaded stress must not fault, hang, break an
 * invariant, or race anywhere but in the readers that accept it.
 * The linked build runs twice (run_tests.sh): in release mode, and in debug
 * mode, where each case checks what debug mode's telemetry promises.
 */
#include "check.h"

#include <stddef.h>

#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <stdatomic.h>
#include <unistd.h>

#include "ebb.h"

#ifdef STATS_EBB_NAMES
#define A(name) ebb_##name
#else
#include <malloc.h>
#define A(name) name
#endif

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Debug mode (EBB_DEBUG=1, the suite's second run of this file): a block
 * costs its header and canary too, at least DEBUG_BLOCK_OVERHEAD bytes past
 * the requested size, which malloc_usable_size returns; and a freed block
 * stays live in the quarantine or the reuse cache until it leaves them
 * (include/ebb.h). The program's own blocks are live_bytes less those two;
 * in release mode both are 0. */
#define DEBUG_BLOCK_OVERHEAD (48 + 16)
static bool debug_mode;

static uint64_t program_live_bytes(const struct ebb_stats *s)
{
    return s->live_bytes - s->debug_quarantine_bytes - s->debug_reuse_bytes;
}

static struct ebb_stats snapshot(void)
{
    struct ebb_stats st;
    memset(&st, 0xEE, sizeof st); /* nothing may be left unwritten */
    st.version = EBB_STATS_VERSION;
    int rc = ebb_stats_get(&st);
    CHECK(rc == 0, "ebb_stats_get should return 0; it returned %d (errno %d)", rc, errno);
    return st;
}

/* The invariants every snapshot keeps, even mid-stress. False (with the
 * reason in `why`) if one is broken. */
static bool snapshot_sane(const struct ebb_stats *s, char *why, size_t n)
{
    const uint64_t absurd = (uint64_t)1 << 46; /* a wrapped "negative" value */
    const uint64_t fields[] = {s->reserved_bytes, s->committed_bytes, s->live_bytes,
                               s->page_free_bytes, s->xthread_pending_bytes, s->purgeable_bytes,
                               s->huge_bytes, s->huge_cached_bytes};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (fields[i] >= absurd) {
            snprintf(why, n, "byte field %zu is %llu: wrapped below zero?", i,
                     (unsigned long long)fields[i]);
            return false;
        }
    }
    if (s->version != EBB_STATS_VERSION || s->size != sizeof *s) {
        snprintf(why, n, "version %u size %u, expected %u and %zu", s->version, s->size,
                 EBB_STATS_VERSION, sizeof *s);
        return false;
    }
    if (s->committed_bytes > s->reserved_bytes) {
        snprintf(why, n, "committed %llu > reserved %llu", (unsigned long long)s->committed_bytes,
                 (unsigned long long)s->reserved_bytes);
        return false;
    }
    if (s->live_bytes > s->committed_bytes) {
        snprintf(why, n, "live %llu > committed %llu", (unsigned long long)s->live_bytes,
                 (unsigned long long)s->committed_bytes);
        return false;
    }
    if (s->purgeable_bytes > s->committed_bytes || s->page_free_bytes > s->committed_bytes) {
        snprintf(why, n, "purgeable %llu or page_free %llu > committed %llu",
                 (unsigned long long)s->purgeable_bytes, (unsigned long long)s->page_free_bytes,
                 (unsigned long long)s->committed_bytes);
        return false;
    }
    if (s->live_blocks > s->live_bytes / 16 + 1) {
        snprintf(why, n, "%llu live blocks in %llu live bytes: blocks are at least 16 bytes",
                 (unsigned long long)s->live_blocks, (unsigned long long)s->live_bytes);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------------------
 * Concurrent: workers allocate and free random sizes, handing half of their
 * blocks to the next worker to free (cross-thread frees), while a sampler
 * takes snapshots and walks. Afterwards, with everyone quiescent, the live
 * bytes are back to their value before.
 * ------------------------------------------------------------------------- */
#ifdef STATS_EBB_NAMES
#define STRESS_THREADS 3
#define STRESS_ROUNDS 600
#else
#define STRESS_THREADS 4
#define STRESS_ROUNDS 5000
#endif
#define STRESS_SLOTS 256

static struct {
    _Atomic(void *) handoff[STRESS_THREADS][STRESS_SLOTS];
    atomic_int running;
    atomic_long samples, walks, walked_blocks;
    atomic_int insane;
    char why[256];
} stress;

static size_t stress_size(uint64_t *rng)
{
    uint64_t x = rng_next(rng);
    switch (x % 16) {
    case 0: return 64 * KiB + (x >> 8) % (256 * KiB);   /* large pages and runs */
    case 1: return (x >> 8) % (16 * KiB) + 1;
    default: return (x >> 8) % 512 + 1;
    }
}

static void *stress_worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(me + 1);
    void *mine[STRESS_SLOTS] = {0};
    for (int round = 0; round < STRESS_ROUNDS; round++) {
        for (int i = 0; i < STRESS_SLOTS; i++) {
            A(free)(mine[i]);
            size_t n = stress_size(&rng);
            mine[i] = A(malloc)(n);
            if (mine[i])
                memset(mine[i], me, n < 64 ? n : 64);
        }
        /* Hand every other block to the next worker, which frees it. */
        int next = (me + 1) % STRESS_THREADS;
        for (int i = 0; i < STRESS_SLOTS; i += 2) {
            void *old = atomic_exchange(&stress.handoff[next][i], mine[i]);
            A(free)(old);
            mine[i] = NULL;
        }
        for (int i = 0; i < STRESS_SLOTS; i++)
            A(free)(atomic_exchange(&stress.handoff[me][i], NULL));
    }
    for (int i = 0; i < STRESS_SLOTS; i++)
        A(free)(mine[i]);
    return NULL;
}

static void *stress_nothing(void *arg)
{
    usleep(10000); /* all alive at once */
    return arg;
}

static void count_block(void *p, size_t n, void *arg)
{
    (void)p;
    (void)n;
    (void)arg;
    atomic_fetch_add_explicit(&stress.walked_blocks, 1, memory_order_relaxed);
}

static void check_summary(const struct ebb_heap_summary *h, void *arg)
{
    (void)arg;
    if (h->live_bytes > h->committed_bytes && !atomic_exchange(&stress.insane, 1))
        snprintf(stress.why, sizeof stress.why, "a heap summary (kind %u) has live %llu > committed %llu",
                 h->kind, (unsigned long long)h->live_bytes, (unsigned long long)h->committed_bytes);
}

static void *stress_sampler(void *arg)
{
    (void)arg;
    while (atomic_load(&stress.running)) {
        struct ebb_stats s = snapshot();
        char why[256];
        if (!snapshot_sane(&s, why, sizeof why) && !atomic_exchange(&stress.insane, 1))
            snprintf(stress.why, sizeof stress.why, "%s", why);
        atomic_fetch_add(&stress.samples, 1);
        if (atomic_load(&stress.samples) % 8 == 0) {
            ebb_heap_walk(check_summary, count_block, NULL);
            atomic_fetch_add(&stress.walks, 1);
        }
    }
    return NULL;
}

static void live_bytes_return_to_start_after_a_concurrent_stress(void)
{
    memset(&stress, 0, sizeof stress);
    /* As many threads at once as below, so the C library's per-thread
     * allocations (TLS vectors of cached thread stacks) exist before `before`. */
    pthread_t warm[STRESS_THREADS + 1];
    for (int i = 0; i < STRESS_THREADS + 1; i++)
        REQUIRE(pthread_create(&warm[i], NULL, stress_nothing, NULL) == 0, "pthread_create failed");
    for (int i = 0; i < STRESS_THREADS + 1; i++)
        pthread_join(warm[i], NULL);
    if (debug_mode)
        ebb_collect(true); /* the quarantine and the reuse cache empty, both times */
    struct ebb_stats before = snapshot();
    atomic_store(&stress.running, 1);
    pthread_t sampler, t[STRESS_THREADS];
    REQUIRE(pthread_create(&sampler, NULL, stress_sampler, NULL) == 0, "pthread_create failed");
    for (int i = 0; i < STRESS_THREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, stress_worker, (void *)(intptr_t)i) == 0,
                "pthread_create failed");
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_join(t[i], NULL);
    atomic_store(&stress.running, 0);
    pthread_join(sampler, NULL);
    for (int i = 0; i < STRESS_THREADS; i++) /* handed over after the last round */
        for (int j = 0; j < STRESS_SLOTS; j++)
            A(free)(atomic_exchange(&stress.handoff[i][j], NULL));
    if (debug_mode)
        ebb_collect(true);
    struct ebb_stats after = snapshot();
    printf("    info: %ld snapshots and %ld walks (%ld blocks visited) during the stress; live "
           "before %llu, after %llu; xthread pending after %llu\n",
           atomic_load(&stress.samples), atomic_load(&stress.walks),
           atomic_load(&stress.walked_blocks), (unsigned long long)before.live_bytes,
           (unsigned long long)after.live_bytes, (unsigned long long)after.xthread_pending_bytes);
    CHECK(!atomic_load(&stress.insane), "every snapshot during the stress keeps the invariants: %s",
          stress.why);
    CHECK(atomic_load(&stress.samples) >= 10, "the sampler should have taken many snapshots; it took %ld",
          atomic_load(&stress.samples));
    CHECK(atomic_load(&stress.walks) >= 1, "the sampler should have walked at least once");
    CHECK(after.live_bytes == before.live_bytes,
          "with every block of the stress freed, live bytes should be back to %llu; they are %llu",
          (unsigned long long)before.live_bytes, (unsigned long long)after.live_bytes);
    CHECK(after.live_blocks == before.live_blocks,
          "live blocks should be back to %llu; they are %llu", (unsigned long long)before.live_blocks,
          (unsigned long long)after.live_blocks);
    char why[256];
    CHECK(snapshot_sane(&after, why, sizeof why), "the final snapshot: %s", why);
}

#ifndef STATS_EBB_NAMES
/* ---------------------------------------------------------------------------
 * Quiescent cases (this thread only).
 * ------------------------------------------------------------------------- */
static void bad_arguments_get_einval(void)
{
    errno = 0;
    CHECK(ebb_stats_get(NULL) == -1 && errno == EINVAL, "ebb_stats_get(NULL): -1/EINVAL (errno %d)",
          errno);
    struct ebb_stats st = {.version = 0};
    errno = 0;
    CHECK(ebb_stats_get(&st) == -1 && errno == EINVAL, "version 0: -1/EINVAL (errno %d)", errno);
    errno = 0;
    CHECK(ebb_heap_walk(NULL, NULL, NULL) == -1 && errno == EINVAL,
          "ebb_heap_walk with no callback: -1/EINVAL (errno %d)", errno);
    /* A caller built against a later version gets what this one has. */
    struct ebb_stats later;
    later.version = EBB_STATS_VERSION + 5;
    CHECK(ebb_stats_get(&later) == 0 && later.version == EBB_STATS_VERSION,
          "a later version asks for what exists: version %u", later.version);
    /* A caller built against an earlier version gets that version's fields
     * and not one byte more (its struct ends where the next version's
     * fields begin). */
    const struct {
        uint32_t version;
        size_t size;
    } earlier[] = {{1, offsetof(struct ebb_stats, debug_reuse_bytes)},
                   {2, offsetof(struct ebb_stats, debug_trace_table_bytes)}};
    for (size_t k = 0; k < sizeof earlier / sizeof earlier[0]; k++) {
        struct ebb_stats old;
        memset(&old, 0x77, sizeof old);
        old.version = earlier[k].version;
        CHECK(ebb_stats_get(&old) == 0 && old.version == earlier[k].version &&
                  old.size == earlier[k].size,
              "version %u: version %u size %u, expected %u and %zu", earlier[k].version,
              old.version, old.size, earlier[k].version, earlier[k].size);
        const unsigned char *tail = (const unsigned char *)&old + earlier[k].size;
        for (size_t i = 0; i < sizeof old - earlier[k].size; i++)
            CHECK(tail[i] == 0x77, "version %u: byte %zu past its struct was written",
                  earlier[k].version, earlier[k].size + i);
    }
}

/* live_bytes counts size-class-rounded blocks: malloc_usable_size of each. */
static void live_bytes_follow_malloc_and_free_exactly(void)
{
    enum { N = 3000 };
    static void *p[N];
    struct ebb_stats s0 = snapshot();
    size_t usable = 0;
    uint64_t rng = 42;
    for (int i = 0; i < N; i++) {
        size_t n = i % 100 == 0 ? 200 * KiB + (size_t)i : rng_next(&rng) % 3000 + 1;
        p[i] = malloc(n);
        REQUIRE(p[i] != NULL, "malloc(%zu) returned NULL", n);
        usable += malloc_usable_size(p[i]);
    }
    void *huge = malloc(8 * MiB);
    REQUIRE(huge != NULL, "malloc(8 MiB) returned NULL");
    size_t huge_usable = malloc_usable_size(huge);
    struct ebb_stats s1 = snapshot();
    for (int i = 0; i < N; i++)
        free(p[i]);
    free(huge);
    struct ebb_stats s2 = snapshot();
    if (debug_mode)
        CHECK(s1.live_bytes - s0.live_bytes >= usable + huge_usable + (N + 1) * DEBUG_BLOCK_OVERHEAD,
              "debug mode: live bytes should grow by the requested sizes (%zu + %zu huge) and at "
              "least %d bytes a block; they grew by %llu", usable, huge_usable,
              DEBUG_BLOCK_OVERHEAD, (unsigned long long)(s1.live_bytes - s0.live_bytes));
    else
        CHECK(s1.live_bytes - s0.live_bytes == usable + huge_usable,
              "live bytes should grow by the usable sizes (%zu + %zu huge); they grew by %llu",
              usable, huge_usable, (unsigned long long)(s1.live_bytes - s0.live_bytes));
    CHECK(s1.live_blocks - s0.live_blocks == N + 1, "live blocks should grow by %d; they grew by %llu",
          N + 1, (unsigned long long)(s1.live_blocks - s0.live_blocks));
    CHECK(s1.huge_blocks == s0.huge_blocks + 1 && s1.huge_bytes >= s0.huge_bytes + 8 * MiB,
          "one more huge block of 8 MiB: %llu -> %llu blocks, %llu -> %llu bytes",
          (unsigned long long)s0.huge_blocks, (unsigned long long)s1.huge_blocks,
          (unsigned long long)s0.huge_bytes, (unsigned long long)s1.huge_bytes);
    if (debug_mode) {
        /* The freed blocks wait in the quarantine (the oldest have left it
         * for the reuse cache or their pages): live, but not the program's. */
        CHECK(program_live_bytes(&s2) == program_live_bytes(&s0),
              "debug mode: after the frees, live bytes less the quarantine and the reuse cache "
              "should be back to %llu; they are %llu", (unsigned long long)program_live_bytes(&s0),
              (unsigned long long)program_live_bytes(&s2));
        CHECK(s2.debug_quarantine_bytes >= 8 * MiB,
              "debug mode: the freed huge block, the last one freed, waits in the quarantine: "
              "%llu bytes there", (unsigned long long)s2.debug_quarantine_bytes);
        ebb_collect(true); /* empties the quarantine and the reuse cache */
        struct ebb_stats s3 = snapshot();
        CHECK(s3.live_bytes == s0.live_bytes && s3.live_blocks == s0.live_blocks &&
                  s3.debug_quarantine_bytes == 0 && s3.debug_reuse_bytes == 0,
              "debug mode: after ebb_collect(true) live bytes/blocks should be back to %llu/%llu "
              "with nothing in the quarantine or the reuse cache; they are %llu/%llu, %llu and "
              "%llu bytes held", (unsigned long long)s0.live_bytes, (unsigned long long)s0.live_blocks,
              (unsigned long long)s3.live_bytes, (unsigned long long)s3.live_blocks,
              (unsigned long long)s3.debug_quarantine_bytes, (unsigned long long)s3.debug_reuse_bytes);
    } else {
        CHECK(s2.live_bytes == s0.live_bytes && s2.live_blocks == s0.live_blocks,
              "after the frees live bytes/blocks should be back to %llu/%llu; they are %llu/%llu",
              (unsigned long long)s0.live_bytes, (unsigned long long)s0.live_blocks,
              (unsigned long long)s2.live_bytes, (unsigned long long)s2.live_blocks);
        CHECK(s2.huge_cached >= 1, "the freed huge block waits in the huge cache: huge_cached %llu",
              (unsigned long long)s2.huge_cached);
    }
    char why[256];
    CHECK(snapshot_sane(&s1, why, sizeof why), "snapshot with the blocks live: %s", why);
    CHECK(snapshot_sane(&s2, why, sizeof why), "snapshot after the frees: %s", why);
    CHECK(s1.reserved_bytes >= s1.committed_bytes && s1.committed_bytes >= usable + huge_usable,
          "reserved %llu >= committed %llu >= what the test holds %zu",
          (unsigned long long)s1.reserved_bytes, (unsigned long long)s1.committed_bytes,
          usable + huge_usable);
}

/* A block freed by another thread is pending (not live) until its owner
 * collects it. */
static void *free_them(void *arg)
{
    void **p = arg;
    for (int i = 0; i < 100; i++)
        free(p[i]);
    return NULL;
}

static void cross_thread_frees_show_as_pending_not_live(void)
{
    static void *p[100];
    struct ebb_stats s0 = snapshot();
    for (int i = 0; i < 100; i++)
        p[i] = malloc(48);
    struct ebb_stats s1 = snapshot();
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_them, p) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    struct ebb_stats s2 = snapshot();
    if (debug_mode) {
        /* A block another thread frees waits in that thread's quarantine
         * first; it reaches its page's remote list only as it leaves. */
        CHECK(s1.live_bytes - s0.live_bytes >= 100 * (48 + DEBUG_BLOCK_OVERHEAD),
              "debug mode: 100 blocks of 48 and their headers: live +%llu",
              (unsigned long long)(s1.live_bytes - s0.live_bytes));
        CHECK(program_live_bytes(&s2) == program_live_bytes(&s0),
              "debug mode: after another thread freed them, live less the quarantine and the reuse "
              "cache should be back to %llu; it is %llu", (unsigned long long)program_live_bytes(&s0),
              (unsigned long long)program_live_bytes(&s2));
        CHECK(s2.debug_quarantine_bytes - s0.debug_quarantine_bytes == s1.live_bytes - s0.live_bytes,
              "debug mode: the 100 blocks wait in the quarantine: it grew by %llu, they hold %llu",
              (unsigned long long)(s2.debug_quarantine_bytes - s0.debug_quarantine_bytes),
              (unsigned long long)(s1.live_bytes - s0.live_bytes));
        return;
    }
    CHECK(s1.live_bytes - s0.live_bytes == 100 * 48, "100 blocks of 48: live +%llu",
          (unsigned long long)(s1.live_bytes - s0.live_bytes));
    CHECK(s2.live_bytes == s0.live_bytes, "after another thread freed them, live should be back to "
          "%llu; it is %llu", (unsigned long long)s0.live_bytes, (unsigned long long)s2.live_bytes);
    CHECK(s2.xthread_pending_bytes >= 100 * 48,
          "the 100 remote frees wait uncollected: xthread_pending_bytes %llu, expected >= 4800",
          (unsigned long long)s2.xthread_pending_bytes);
}

/* ---------------------------------------------------------------------------
 * The walk agrees with the snapshot and visits exactly the live blocks.
 * ------------------------------------------------------------------------- */
#define WALK_MAX_BLOCKS 200000
static struct {
    void *seen[WALK_MAX_BLOCKS];
    size_t seen_sizes[WALK_MAX_BLOCKS];
    size_t seen_count;
    bool overflow;
    struct ebb_heap_summary total;
    struct ebb_heap_summary parts_sum; /* live bytes/blocks, segments over the non-total summaries */
    int thread_heaps, abandoned, huge, totals;
    bool total_last_ok;
} wk;

static void wk_block(void *p, size_t n, void *arg)
{
    (void)arg;
    if (wk.seen_count == WALK_MAX_BLOCKS) {
        wk.overflow = true;
        return;
    }
    wk.seen_sizes[wk.seen_count] = n;
    wk.seen[wk.seen_count++] = p;
}

static void wk_heap(const struct ebb_heap_summary *h, void *arg)
{
    (void)arg;
    if (h->kind == EBB_HEAP_TOTAL) {
        wk.total = *h;
        wk.totals++;
        wk.total_last_ok = true;
        return;
    }
    wk.total_last_ok = false;
    wk.parts_sum.live_bytes += h->live_bytes;
    wk.parts_sum.live_blocks += h->live_blocks;
    wk.parts_sum.segments += h->segments;
    wk.thread_heaps += h->kind == EBB_HEAP_THREAD;
    wk.abandoned += h->kind == EBB_HEAP_ABANDONED;
    wk.huge += h->kind == EBB_HEAP_HUGE;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

static void wk_reset(void)
{
    memset(&wk, 0, sizeof wk);
}

/* Blocks a thread leaves behind when it exits (abandoned, then perhaps
 * reclaimed): the walk must still find them. */
static void *leave_blocks_behind(void *arg)
{
    void **out = arg;
    for (int i = 0; i < 50; i++)
        out[i] = malloc(1000 + (size_t)i);
    return NULL;
}

/* A thread that sleeps holding blocks, and one that keeps allocating. */
static atomic_int idle_ready, busy_stop;
static void *idle_holder(void *arg)
{
    void **out = arg;
    for (int i = 0; i < 64; i++)
        out[i] = malloc(300);
    atomic_store(&idle_ready, 1);
    while (!atomic_load(&busy_stop))
        usleep(1000);
    return NULL;
}

static void *busy_allocator(void *arg)
{
    (void)arg;
    uint64_t rng = 7;
    void *slot[64] = {0};
    while (!atomic_load(&busy_stop)) {
        int i = (int)(rng_next(&rng) % 64);
        free(slot[i]);
        slot[i] = malloc(rng_next(&rng) % 2000 + 1);
    }
    for (int i = 0; i < 64; i++)
        free(slot[i]);
    return NULL;
}

static void walk_agrees_with_snapshot_and_visits_every_live_block(void)
{
    enum { N = 5000 };
    static void *mine[N + 3], *left[50], *held[64];
    uint64_t rng = 99;
    for (int i = 0; i < N; i++)
        mine[i] = malloc(rng_next(&rng) % 4000 + 1);
    mine[N] = malloc(300 * KiB);     /* a large block (slice run) */
    mine[N + 1] = malloc(6 * MiB);   /* a huge block */
    mine[N + 2] = aligned_alloc(4096, 5000);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, leave_blocks_behind, left) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    pthread_t idle;
    atomic_store(&idle_ready, 0);
    atomic_store(&busy_stop, 0);
    REQUIRE(pthread_create(&idle, NULL, idle_holder, held) == 0, "pthread_create failed");
    while (!atomic_load(&idle_ready))
        usleep(1000);

    /* Quiescent: only this thread runs (the idle one sleeps). */
    wk_reset();
    struct ebb_stats st = snapshot();
    int rc = ebb_heap_walk(wk_heap, wk_block, NULL);
    CHECK(rc == 0, "ebb_heap_walk returned %d", rc);
    CHECK(!wk.overflow, "more than %d blocks visited", WALK_MAX_BLOCKS);
    CHECK(wk.totals == 1 && wk.total_last_ok, "exactly one TOTAL summary, and it comes last "
          "(%d totals)", wk.totals);
    CHECK(wk.thread_heaps >= 2, "at least the main and the idle thread's heaps: %d", wk.thread_heaps);
    CHECK(wk.huge == 1, "one HUGE summary while a huge block is live: %d", wk.huge);
    CHECK(wk.total.blocks_exact == 1, "quiescent: every block visited exactly (blocks_exact %u)",
          wk.total.blocks_exact);
    CHECK(wk.total.live_bytes == st.live_bytes && wk.total.live_blocks == st.live_blocks,
          "the walk's total (%llu bytes, %llu blocks) equals the snapshot (%llu, %llu)",
          (unsigned long long)wk.total.live_bytes, (unsigned long long)wk.total.live_blocks,
          (unsigned long long)st.live_bytes, (unsigned long long)st.live_blocks);
    CHECK(wk.parts_sum.live_bytes == wk.total.live_bytes &&
          wk.parts_sum.live_blocks == wk.total.live_blocks,
          "the heaps' summaries add up to the total: %llu bytes / %llu blocks vs %llu / %llu",
          (unsigned long long)wk.parts_sum.live_bytes, (unsigned long long)wk.parts_sum.live_blocks,
          (unsigned long long)wk.total.live_bytes, (unsigned long long)wk.total.live_blocks);
    size_t visited_bytes = 0;
    for (size_t i = 0; i < wk.seen_count; i++)
        visited_bytes += wk.seen_sizes[i];
    if (debug_mode) /* blocks visited with their requested sizes, the quarantine's not at all */
        CHECK(wk.seen_count <= wk.total.live_blocks && visited_bytes < program_live_bytes(&st),
              "debug mode: visited %zu blocks / %zu bytes; the summary says %llu / %llu, of which "
              "%llu bytes the program's", wk.seen_count, visited_bytes,
              (unsigned long long)wk.total.live_blocks, (unsigned long long)wk.total.live_bytes,
              (unsigned long long)program_live_bytes(&st));
    else
        CHECK(wk.seen_count == wk.total.live_blocks && visited_bytes == wk.total.live_bytes,
              "visited %zu blocks / %zu bytes; the summary says %llu / %llu", wk.seen_count,
              visited_bytes, (unsigned long long)wk.total.live_blocks,
              (unsigned long long)wk.total.live_bytes);
    /* Every block this test holds was visited, with its usable size. */
    qsort(wk.seen, wk.seen_count, sizeof wk.seen[0], cmp_ptr);
    int missing = 0;
    void *first_missing = NULL;
    void **all[3] = {mine, left, held};
    int counts[3] = {N + 3, 50, 64};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < counts[k]; i++) {
            void *p = all[k][i];
            if (!bsearch(&p, wk.seen, wk.seen_count, sizeof wk.seen[0], cmp_ptr)) {
                missing++;
                if (!first_missing)
                    first_missing = p;
            }
        }
    }
    CHECK(missing == 0, "%d blocks the test holds were not visited (first %p)", missing, first_missing);
    uint64_t class_blocks = 0;
    for (unsigned c = 0; c < wk.total.class_count; c++)
        class_blocks += wk.total.classes[c].used_blocks;
    CHECK(class_blocks + wk.total.large_blocks == wk.total.live_blocks,
          "per-class used blocks (%llu) + large blocks (%llu) = live blocks (%llu)",
          (unsigned long long)class_blocks, (unsigned long long)wk.total.large_blocks,
          (unsigned long long)wk.total.live_blocks);
    CHECK(wk.total.fragmentation >= 1.0 && wk.total.committed_bytes >= wk.total.live_bytes,
          "fragmentation = committed / live >= 1: %.3f", wk.total.fragmentation);
    CHECK(wk.total.largest_free_run % (64 * KiB) == 0, "largest free run is whole slices: %llu",
          (unsigned long long)wk.total.largest_free_run);
    printf("    info: quiescent walk: %d thread heaps, %d abandoned, %d huge; %zu blocks, %llu bytes "
           "live, fragmentation %.2f, largest free run %llu KiB\n", wk.thread_heaps, wk.abandoned,
           wk.huge, wk.seen_count, (unsigned long long)wk.total.live_bytes, wk.total.fragmentation,
           (unsigned long long)(wk.total.largest_free_run / KiB));

    /* Not quiescent: another thread allocates all the time. The walk must
     * finish, and still find every block of the idle thread and of ours. */
    pthread_t busy;
    REQUIRE(pthread_create(&busy, NULL, busy_allocator, NULL) == 0, "pthread_create failed");
    usleep(20000);
    double t0 = check_now();
    int walks = 0, missing_busy = 0;
    while (check_now() - t0 < 0.5) {
        wk_reset();
        CHECK(ebb_heap_walk(wk_heap, wk_block, NULL) == 0, "walk during allocation failed");
        walks++;
        qsort(wk.seen, wk.seen_count, sizeof wk.seen[0], cmp_ptr);
        for (int i = 0; i < 64; i++)
            if (!bsearch(&held[i], wk.seen, wk.seen_count, sizeof wk.seen[0], cmp_ptr))
                missing_busy++;
        for (int i = 0; i < N; i += 97)
            if (!bsearch(&mine[i], wk.seen, wk.seen_count, sizeof wk.seen[0], cmp_ptr))
                missing_busy++;
    }
    atomic_store(&busy_stop, 1);
    pthread_join(busy, NULL);
    pthread_join(idle, NULL);
    printf("    info: %d walks while another thread allocated\n", walks);
    CHECK(walks >= 3, "walks should finish while another thread allocates; %d did in 0.5 s", walks);
    CHECK(missing_busy == 0, "blocks of the idle thread and ours missed by walks racing a busy "
          "thread: %d", missing_busy);
    for (int i = 0; i < N + 3; i++)
        free(mine[i]);
    for (int i = 0; i < 50; i++)
        free(left[i]);
    for (int i = 0; i < 64; i++)
        free(held[i]);
}

/* Review finding: a thread that empties a wide page (one 30,000-byte block,
 * 8 slices) and then allocates 10,000 blocks of 16 bytes gets them in that
 * kept page, 32,768 blocks wide; the walk skipped every page of more than
 * 4,096 blocks, and saw none of the 10,000. */
enum { WIDE_SMALL = 10000 };
static void *wide_blocks[WIDE_SMALL];
static long wide_seen;

static uintptr_t wide_lo, wide_hi;

/* Every 16-byte block of that page is one of ours: the thread's 16-byte class
 * used it alone. */
static void count_wide_block(void *p, size_t usable, void *arg)
{
    (void)arg;
    uintptr_t x = (uintptr_t)p;
    if (usable == 16 && x >= wide_lo && x <= wide_hi)
        wide_seen++;
}

static void *fill_a_wide_page(void *arg)
{
    (void)arg;
    void *w = A(malloc)(30000);
    if (w == NULL)
        return NULL; /* then the 16-byte blocks are not on one page: the case says so */
    memset(w, 1, 30000);
    A(free)(w);
    for (int i = 0; i < WIDE_SMALL; i++)
        wide_blocks[i] = A(malloc)(16);
    return NULL;
}

/* Review finding (stop 50): a thread that exited while the walk was in
 * another heap had its blocks listed twice (its heap, then its abandoned
 * segments), and a thread that reclaimed an abandoned segment into a heap the
 * walk had visited took those blocks out of its sight; both walks said
 * blocks_exact = 1. A walk during which segments moved is not exact now.
 * The walk's callback holds the walk in main's heap while the other thread
 * exits (EXIT) or reclaims (RECLAIM); whichever order the heaps are visited
 * in, every block must be seen once or the walk must say it was not exact. */
enum { MOVE_EXIT, MOVE_RECLAIM };
#define MOVE_MAIN_BLOCKS 3000
#define MOVE_THREAD_BLOCKS 2000
static void *move_main[MOVE_MAIN_BLOCKS], *move_main_sorted[MOVE_MAIN_BLOCKS];
static void *move_thread[MOVE_THREAD_BLOCKS]; /* the blocks whose visits are counted */
static void *move_filler[20000];
static atomic_int move_go, move_done, move_tid;
static int move_kind;
static bool move_triggered;

static void *move_exiter(void *arg)
{
    (void)arg;
    for (int i = 0; i < MOVE_THREAD_BLOCKS; i++)
        move_thread[i] = malloc(100 + (size_t)(i % 500));
    atomic_store(&move_tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&move_go))
        usleep(200);
    return NULL; /* exits holding its blocks */
}

static void *move_leaver(void *arg)
{
    (void)arg;
    static void *all[3 * MOVE_THREAD_BLOCKS];
    for (int i = 0; i < 3 * MOVE_THREAD_BLOCKS; i++)
        all[i] = malloc(100);
    int kept = 0;
    for (int i = 0; i < 3 * MOVE_THREAD_BLOCKS; i++) {
        if (i % 3 == 0 && kept < MOVE_THREAD_BLOCKS)
            move_thread[kept++] = all[i];
        else
            free(all[i]); /* room in the segment it leaves behind */
    }
    return NULL;
}

static void *move_reclaimer(void *arg)
{
    (void)arg;
    move_filler[0] = malloc(5000); /* a heap of its own, before the walk */
    atomic_store(&move_tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&move_go))
        usleep(200);
    for (int i = 1; i < 20000; i++)
        move_filler[i] = malloc(100); /* takes the abandoned segment */
    atomic_store(&move_done, 1);
    while (atomic_load(&move_go) != 2)
        usleep(200);
    for (int i = 0; i < 20000; i++)
        free(move_filler[i]);
    return NULL;
}

static void move_block(void *p, size_t n, void *arg)
{
    wk_block(p, n, arg);
    if (move_triggered || !bsearch(&p, move_main_sorted, MOVE_MAIN_BLOCKS, sizeof(void *), cmp_ptr))
        return;
    /* In main's heap, never paused: the other thread moves segments now. */
    move_triggered = true;
    atomic_store(&move_go, 1);
    char task[64];
    snprintf(task, sizeof task, "/proc/self/task/%d", atomic_load(&move_tid));
    for (int i = 0; i < 500; i++) { /* an exit waits for the walk to leave the heap list */
        if (move_kind == MOVE_EXIT ? access(task, F_OK) != 0 : atomic_load(&move_done) != 0)
            break;
        usleep(1000);
    }
}

static void walk_beside_a_segment_move(int kind)
{
    wk_reset();
    move_kind = kind;
    move_triggered = false;
    atomic_store(&move_go, 0);
    atomic_store(&move_done, 0);
    atomic_store(&move_tid, 0);
    for (int i = 0; i < MOVE_MAIN_BLOCKS; i++)
        move_main_sorted[i] = move_main[i] = malloc(64);
    qsort(move_main_sorted, MOVE_MAIN_BLOCKS, sizeof(void *), cmp_ptr);
    pthread_t t, left;
    REQUIRE(pthread_create(&t, NULL, kind == MOVE_EXIT ? move_exiter : move_reclaimer, NULL) == 0,
            "pthread_create failed");
    while (atomic_load(&move_tid) == 0)
        usleep(200);
    if (kind == MOVE_RECLAIM) { /* after the reclaimer has its heap, which takes nothing yet */
        REQUIRE(pthread_create(&left, NULL, move_leaver, NULL) == 0, "pthread_create failed");
        pthread_join(left, NULL); /* its segment: abandoned, with room and live blocks */
    }
    REQUIRE(ebb_heap_walk(wk_heap, move_block, NULL) == 0, "ebb_heap_walk failed: %s",
            strerror(errno));
    atomic_store(&move_go, 2);
    pthread_join(t, NULL);
    REQUIRE(!wk.overflow, "more blocks than the test can hold");
    qsort(wk.seen, wk.seen_count, sizeof wk.seen[0], cmp_ptr);
    int missed = 0, twice = 0;
    for (int k = 0; k < 2; k++) {
        void **set = k == 0 ? move_main : move_thread;
        int n = k == 0 ? MOVE_MAIN_BLOCKS : MOVE_THREAD_BLOCKS;
        for (int i = 0; i < n; i++) {
            void **at = bsearch(&set[i], wk.seen, wk.seen_count, sizeof wk.seen[0], cmp_ptr);
            if (at == NULL) {
                missed++;
                continue;
            }
            size_t first = (size_t)(at - wk.seen), last = first;
            while (first > 0 && wk.seen[first - 1] == set[i])
                first--;
            while (last + 1 < wk.seen_count && wk.seen[last + 1] == set[i])
                last++;
            twice += last > first;
        }
    }
    printf("    info: %s: %d blocks missed, %d listed twice; blocks_exact %u; triggered %d\n",
           kind == MOVE_EXIT ? "a thread exits" : "a thread reclaims", missed, twice,
           wk.total.blocks_exact, (int)move_triggered);
    CHECK(move_triggered, "the walk should have visited main's heap");
    CHECK((missed == 0 && twice == 0) || wk.total.blocks_exact == 0,
          "a walk that missed %d blocks and listed %d twice should say it was not exact; its "
          "total's blocks_exact is %u", missed, twice, wk.total.blocks_exact);
    for (int i = 0; i < MOVE_MAIN_BLOCKS; i++)
        free(move_main[i]);
    for (int i = 0; i < MOVE_THREAD_BLOCKS; i++)
        free(move_thread[i]);
}

static void walk_beside_an_exit_or_a_reclaim_says_whether_it_is_exact(void)
{
    walk_beside_a_segment_move(MOVE_EXIT);
    walk_beside_a_segment_move(MOVE_RECLAIM);
}

static void walk_visits_blocks_of_a_wide_page_taken_by_16_byte_blocks(void)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, fill_a_wide_page, NULL) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    wide_lo = UINTPTR_MAX, wide_hi = 0;
    for (int i = 0; i < WIDE_SMALL; i++) {
        REQUIRE(wide_blocks[i] != NULL, "malloc(16) failed");
        uintptr_t x = (uintptr_t)wide_blocks[i];
        wide_lo = x < wide_lo ? x : wide_lo;
        wide_hi = x > wide_hi ? x : wide_hi;
    }
    if (!debug_mode) /* in debug mode a 16-byte block is an 80-byte one: no wide page */
        CHECK(wide_hi - wide_lo < 8 * 65536, "the 16-byte blocks should share one wide page: they "
              "span %zu bytes", (size_t)(wide_hi - wide_lo));
    wide_seen = 0;
    REQUIRE(ebb_heap_walk(NULL, count_wide_block, NULL) == 0, "ebb_heap_walk failed");
    CHECK(wide_seen == WIDE_SMALL, "the walk should visit all %d 16-byte blocks; it visited %ld",
          WIDE_SMALL, wide_seen);
    for (int i = 0; i < WIDE_SMALL; i++)
        A(free)(wide_blocks[i]);
}

/* ---------------------------------------------------------------------------
 * committed_bytes is an upper bound on what ebb holds resident (include/ebb.h),
 * for the process and for each heap of the walk.
 * Review finding: a new small page claimed on slices freed a moment before,
 * written and not purged yet, counted only the blocks it carved, so after
 * 3000 blocks of 1000 bytes were written and freed and 3000 small blocks of
 * 20 other classes took their slices, committed_bytes read 733184 while
 * mincore() found 1056768 bytes of the segment resident. The same when a
 * kept page that held one large block went to another class.
 * ------------------------------------------------------------------------- */
#define SEGMENT_BYTES (4 * MiB) /* ebb's segments: 4 MiB, aligned to 4 MiB */
#define NOTED_SEGMENTS_MAX 1024

typedef struct noted_segments_s {
    uintptr_t at[NOTED_SEGMENTS_MAX];
    size_t count;
} noted_segments_t;

static struct {
    void *blocks[3000];
    void *kept_taker; /* the block that took a page another class kept */
    atomic_int ready, done;
    /* The walk: the segments of every live block, those of the heap being
     * visited, and those and the summary of the worker's heap. */
    noted_segments_t all, heap, worker;
    bool heap_is_worker;
    struct ebb_heap_summary worker_sum, total;
} reuse;

static void note_segment(noted_segments_t *n, uintptr_t seg)
{
    for (size_t i = 0; i < n->count; i++) {
        if (n->at[i] == seg)
            return;
    }
    if (n->count < NOTED_SEGMENTS_MAX)
        n->at[n->count++] = seg;
}

/* Blocks above 1 MiB are skipped: a huge block's mapping may end before the
 * 4 MiB a segment has. */
static void note_block_segment(void *p, size_t n, void *arg)
{
    (void)arg;
    if (p == reuse.kept_taker)
        reuse.heap_is_worker = true;
    if (n > MiB)
        return;
    uintptr_t seg = (uintptr_t)p & ~(uintptr_t)(SEGMENT_BYTES - 1);
    note_segment(&reuse.all, seg);
    note_segment(&reuse.heap, seg);
}

/* A heap's blocks come before its summary. */
static void note_heap_summary(const struct ebb_heap_summary *h, void *arg)
{
    (void)arg;
    if (h->kind == EBB_HEAP_TOTAL)
        reuse.total = *h;
    if (h->kind == EBB_HEAP_THREAD && reuse.heap_is_worker) {
        reuse.worker_sum = *h;
        reuse.worker = reuse.heap;
    }
    reuse.heap_is_worker = false;
    reuse.heap.count = 0;
}

/* Resident bytes of the segments noted, by mincore(): a lower bound on what
 * ebb (or the heap owning them) holds resident. */
static uint64_t noted_segments_resident(const noted_segments_t *n)
{
    static unsigned char vec[SEGMENT_BYTES / 4096];
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = SEGMENT_BYTES / (size_t)page;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n->count; i++) {
        if (pages > sizeof vec || mincore((void *)n->at[i], SEGMENT_BYTES, vec) != 0)
            continue;
        for (size_t j = 0; j < pages; j++)
            bytes += (uint64_t)page * (vec[j] & 1);
    }
    return bytes;
}

/* With every freed slice purged first: writes a 100,000-byte block and frees
 * it (its wide page kept for its class), which a 20,000-byte block then
 * takes; writes 3000 blocks of 1000 bytes and frees them (their slices
 * dirty, not purged yet), then allocates 3000 blocks of 20 other classes
 * (new pages on those slices). Holds the blocks until main has measured. */
static void *reuse_written_slices(void *arg)
{
    (void)arg;
    malloc_trim(0);
    void *wide = malloc(60000);
    if (wide != NULL)
        memset(wide, 1, 60000);
    free(wide);
    reuse.kept_taker = malloc(20000);
    for (int i = 0; i < 3000; i++) {
        reuse.blocks[i] = malloc(1000);
        if (reuse.blocks[i] != NULL)
            memset(reuse.blocks[i], 1, 1000);
    }
    for (int i = 0; i < 3000; i++)
        free(reuse.blocks[i]);
    for (int i = 0; i < 3000; i++)
        reuse.blocks[i] = malloc(48 + 16 * (size_t)(i % 20));
    atomic_store(&reuse.ready, 1);
    while (!atomic_load(&reuse.done))
        usleep(1000);
    for (int i = 0; i < 3000; i++)
        free(reuse.blocks[i]);
    free(reuse.kept_taker);
    return NULL;
}

static void committed_bytes_cover_resident_slices_that_new_pages_reuse(void)
{
    memset(&reuse, 0, sizeof reuse);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, reuse_written_slices, NULL) == 0, "pthread_create failed");
    while (!atomic_load(&reuse.ready))
        usleep(1000);
    int rc = ebb_heap_walk(note_heap_summary, note_block_segment, NULL);
    struct ebb_stats st = snapshot();
    uint64_t resident = noted_segments_resident(&reuse.all);
    uint64_t worker_resident = noted_segments_resident(&reuse.worker);
    atomic_store(&reuse.done, 1);
    pthread_join(t, NULL);
    REQUIRE(rc == 0, "ebb_heap_walk should return 0; it returned %d", rc);
    REQUIRE(reuse.all.count > 0 && reuse.worker.count > 0,
            "the walk should find the segments of the live blocks (%zu) and of the worker's "
            "heap (%zu)", reuse.all.count, reuse.worker.count);
    CHECK(st.committed_bytes >= resident,
          "committed_bytes should be at least the %llu bytes mincore finds resident in the %zu "
          "segments holding live blocks; it is %llu",
          (unsigned long long)resident, reuse.all.count, (unsigned long long)st.committed_bytes);
    CHECK(reuse.total.committed_bytes >= resident,
          "the walk's total committed_bytes should be at least the %llu resident bytes of those "
          "segments; it is %llu",
          (unsigned long long)resident, (unsigned long long)reuse.total.committed_bytes);
    CHECK(reuse.worker_sum.committed_bytes >= worker_resident,
          "the worker heap's committed_bytes should be at least the %llu bytes resident in its "
          "%zu segments; it is %llu",
          (unsigned long long)worker_resident, reuse.worker.count,
          (unsigned long long)reuse.worker_sum.committed_bytes);
}

/* ---------------------------------------------------------------------------
 * Issue 3, "committed_bytes counts purged interiors": malloc_trim(0) gives
 * back the OS pages under free blocks of pages that still hold live blocks,
 * but committed_bytes dropped only for the OS pages it marked as holding
 * the start of a block it took off the free list, not for the pages inside
 * blocks of several OS pages: after a trim of 32 MiB of 10,000 B blocks
 * (1 in 50 kept) committed_bytes had grown by 5.3 MiB, the Anonymous RSS by
 * 0.8 MiB. When
 * quiescent, its change must follow the Anonymous RSS (smaps_rollup) through
 * a trim, the reuse of the trimmed blocks (page.c, page_restore_dropped),
 * their second free and trim, and freeing everything, never wrapping.
 * ------------------------------------------------------------------------- */
#define TRIMMED_KEEP_EVERY 50
static void *trimmed_blocks[(32 << 20) / 1000 + 1];

/* Anonymous RSS in bytes ("Anonymous:" of smaps_rollup), read without
 * allocating (check_anon_rss's stdio would add a block of its own). */
static long anon_rss_quiet(void)
{
    return check_proc_kb("/proc/self/smaps_rollup", "\nAnonymous:");
}

typedef struct moment_s {
    struct ebb_stats st;
    long anon;
} moment_t;

static moment_t moment(void)
{
    moment_t m;
    m.st = snapshot();
    m.anon = anon_rss_quiet();
    return m;
}

/* committed_bytes moved from `a` to `b` as the RSS did, within `slack`:
 * what ebb maps for itself beside its blocks (debug mode's trace tables,
 * whose growth is added) and the rounding of the kernel's counts. */
static void check_committed_follows_rss(const moment_t *a, const moment_t *b, size_t size,
                                        const char *when)
{
    char why[256];
    CHECK(snapshot_sane(&b->st, why, sizeof why), "%zu B blocks, %s: %s", size, when, why);
    long slack = (long)(256 * KiB) +
                 (long)(b->st.debug_trace_table_bytes - a->st.debug_trace_table_bytes);
    long committed = (long)(b->st.committed_bytes - a->st.committed_bytes);
    long rss = b->anon - a->anon;
    printf("    info: %zu B blocks, %s: committed %+.1f MiB, Anonymous RSS %+.1f MiB\n", size,
           when, (double)committed / MiB, (double)rss / MiB);
    CHECK(committed <= rss + slack,
          "%zu B blocks, %s: committed_bytes should have moved as the Anonymous RSS did "
          "(%+.2f MiB), within %.2f MiB; it moved %+.2f MiB", size, when, (double)rss / MiB,
          (double)slack / MiB, (double)committed / MiB);
    CHECK(committed >= rss - slack,
          "%zu B blocks, %s: committed_bytes should stay an upper bound on the RSS, which "
          "moved %+.2f MiB (within %.2f MiB); it moved %+.2f MiB", size, when,
          (double)rss / MiB, (double)slack / MiB, (double)committed / MiB);
}

static void trimmed_round(size_t size, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (trimmed_blocks[i] == NULL) {
            trimmed_blocks[i] = malloc(size);
            REQUIRE(trimmed_blocks[i] != NULL, "malloc(%zu) failed", size);
            memset(trimmed_blocks[i], (int)(i % 251) + 1, size);
        }
    }
}

static void trimmed_free_all_but_every_50th(size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (i % TRIMMED_KEEP_EVERY != 0) {
            free(trimmed_blocks[i]);
            trimmed_blocks[i] = NULL;
        }
    }
}

static void committed_after_trims_of(size_t size)
{
    size_t count = (size_t)(32 << 20) / size;
    memset(trimmed_blocks, 0, sizeof trimmed_blocks); /* resident before the baseline */
    malloc_trim(0);
    moment_t start = moment();
    trimmed_round(size, count);
    trimmed_free_all_but_every_50th(count);
    malloc_trim(0);
    moment_t trimmed = moment();
    check_committed_follows_rss(&start, &trimmed, size, "after the trim");
    /* The freed blocks again: the trimmed pages serve them (restored). */
    trimmed_round(size, count);
    moment_t reused = moment();
    check_committed_follows_rss(&start, &reused, size, "trimmed blocks reused");
    trimmed_free_all_but_every_50th(count);
    malloc_trim(0);
    moment_t again = moment();
    check_committed_follows_rss(&start, &again, size, "freed and trimmed again");
    for (size_t i = 0; i < count; i++) {
        free(trimmed_blocks[i]);
        trimmed_blocks[i] = NULL;
    }
    malloc_trim(0);
    moment_t end = moment();
    check_committed_follows_rss(&start, &end, size, "everything freed and trimmed");
}

static void committed_bytes_drop_by_what_a_trim_gives_back(void)
{
    committed_after_trims_of(1000);
    committed_after_trims_of(6000);
    committed_after_trims_of(10000);
    committed_after_trims_of(20000);
}

/* Review finding (/tmp/rev-stats/repro/walk_total.c): include/ebb.h called
 * EBB_HEAP_TOTAL "the sum of all of the above", but it tallies every segment
 * ebb holds, the cached ones (entirely free, in no heap) too, which no other
 * summary has; and its committed_bytes was said to be "as in ebb_stats",
 * which also counts the heaps' metadata and the huge cache. ebb.h now says
 * what TOTAL counts: this pins it down. Segments emptied by their owner go to
 * the segment cache; the walk is bracketed by two snapshots that agree on
 * the segment counts (else the scavenger moved something: try again). */
static void walk_total_counts_cached_segments_that_no_other_summary_has(void)
{
    enum { N = 30 }; /* 1 MiB blocks, three to a segment: ten segments */
    static void *blocks[N];
    for (int i = 0; i < N; i++)
        blocks[i] = malloc(MiB);
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    bool compared = false;
    for (int attempt = 0; attempt < 20 && !compared; attempt++) {
        struct ebb_stats before = snapshot();
        wk_reset();
        int rc = ebb_heap_walk(wk_heap, NULL, NULL);
        struct ebb_stats after = snapshot();
        REQUIRE(rc == 0, "ebb_heap_walk returned %d", rc);
        if (before.segments != after.segments || before.segments_cached != after.segments_cached)
            continue;
        compared = true;
        if (before.segments_cached == 0) {
            SKIP_CHECK("no cached segment after freeing %d MiB (the scavenger gave them back "
                       "already): TOTAL's extra segments not checked", N);
        }
        CHECK(wk.total.segments == before.segments,
              "TOTAL counts every segment, as ebb_stats does: %llu, expected %llu",
              (unsigned long long)wk.total.segments, (unsigned long long)before.segments);
        CHECK(wk.total.segments == wk.parts_sum.segments + before.segments_cached,
              "TOTAL's segments are the other summaries' (%llu) and the cached ones (%llu); "
              "got %llu", (unsigned long long)wk.parts_sum.segments,
              (unsigned long long)before.segments_cached, (unsigned long long)wk.total.segments);
        /* The huge blocks, live (all committed) and cached (committed as far
         * as not purged: ebb_stats counts a purged mapping's header page
         * only, so adding the whole cache failed once the scavenger had
         * purged an 8 MiB mapping an earlier case left; seen under
         * qemu-user, whose slowness let the purge delay pass first). */
        CHECK(wk.total.committed_bytes + before.huge_bytes <= before.committed_bytes,
              "TOTAL's committed bytes (%llu) leave out the huge blocks (%llu live, %llu "
              "cached) and the heaps' metadata that ebb_stats counts (%llu in all)",
              (unsigned long long)wk.total.committed_bytes,
              (unsigned long long)before.huge_bytes,
              (unsigned long long)before.huge_cached_bytes,
              (unsigned long long)before.committed_bytes);
        CHECK(wk.total.live_bytes == wk.parts_sum.live_bytes &&
                  wk.total.live_blocks == wk.parts_sum.live_blocks,
              "TOTAL's live bytes and blocks are the other summaries' sum: %llu/%llu, "
              "expected %llu/%llu", (unsigned long long)wk.total.live_bytes,
              (unsigned long long)wk.total.live_blocks,
              (unsigned long long)wk.parts_sum.live_bytes,
              (unsigned long long)wk.parts_sum.live_blocks);
    }
    CHECK(compared, "20 walks, each with the segment counts changing around it");
}

/* glibc's malloc_info: the XML it writes is one <malloc> element, and options
 * other than 0 get EINVAL as the return value, errno untouched, as glibc
 * answers (review finding: -1 with errno = EINVAL). */
static void malloc_info_writes_xml_and_answers_bad_options_as_glibc(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    REQUIRE(fp != NULL, "open_memstream failed");
    int r = malloc_info(0, fp);
    fclose(fp);
    CHECK(r == 0, "malloc_info(0, fp) returned %d, expected 0", r);
    CHECK(text != NULL && strncmp(text, "<malloc version=", 16) == 0 &&
              len >= 10 && strcmp(text + len - 10, "</malloc>\n") == 0,
          "malloc_info should write one <malloc> element; it wrote: %s", text ? text : "(nothing)");
    free(text);
    fp = fopen("/dev/null", "w");
    REQUIRE(fp != NULL, "fopen(/dev/null) failed");
    errno = EDOM;
    r = malloc_info(1, fp);
    CHECK(r == EINVAL && errno == EDOM, "malloc_info(1, fp): returned %d with errno %d; expected "
          "EINVAL (%d) returned, errno untouched", r, errno, EINVAL);
    fclose(fp);
}

/* ---------------------------------------------------------------------------
 * glibc's mallinfo2, as programs read it: in use = uordblks + hblkhd.
 * ------------------------------------------------------------------------- */
static void mallinfo2_reports_what_is_in_use(void)
{
    if (debug_mode) /* freed blocks stay in use in the quarantine until this empties it */
        malloc_trim(0);
    struct mallinfo2 m0 = mallinfo2();
    enum { N = 1000 };
    static void *p[N];
    size_t usable = 0;
    for (int i = 0; i < N; i++) {
        p[i] = malloc(1000);
        usable += malloc_usable_size(p[i]);
    }
    void *huge = malloc(4 * MiB);
    struct mallinfo2 m1 = mallinfo2();
    if (debug_mode)
        CHECK(m1.uordblks - m0.uordblks >= usable + N * DEBUG_BLOCK_OVERHEAD,
              "debug mode: uordblks should grow by the requested %zu and at least %d bytes a "
              "block; it grew by %zu", usable, DEBUG_BLOCK_OVERHEAD, m1.uordblks - m0.uordblks);
    else
        CHECK(m1.uordblks - m0.uordblks == usable, "uordblks should grow by %zu; it grew by %zu",
              usable, m1.uordblks - m0.uordblks);
    CHECK(m1.hblks == m0.hblks + 1 && m1.hblkhd >= m0.hblkhd + 4 * MiB,
          "one more mmapped block of >= 4 MiB: hblks %zu -> %zu, hblkhd %zu -> %zu", m0.hblks,
          m1.hblks, m0.hblkhd, m1.hblkhd);
    CHECK(m1.arena >= m1.uordblks && m1.fordblks == m1.arena - m1.uordblks,
          "arena %zu >= uordblks %zu and fordblks %zu = arena - uordblks", m1.arena, m1.uordblks,
          m1.fordblks);
    for (int i = 0; i < N; i++)
        free(p[i]);
    free(huge);
    if (debug_mode)
        malloc_trim(0);
    struct mallinfo2 m2 = mallinfo2();
    CHECK(m2.uordblks == m0.uordblks && m2.hblks == m0.hblks,
          "after the frees uordblks/hblks are back to %zu/%zu; they are %zu/%zu", m0.uordblks,
          m0.hblks, m2.uordblks, m2.hblks);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo m = mallinfo(); /* deprecated, and still called by old programs */
#pragma GCC diagnostic pop
    CHECK(m.uordblks >= 0 && m.arena >= m.uordblks, "mallinfo (int fields) sane: arena %d uordblks %d",
          m.arena, m.uordblks);
}
#endif /* !STATS_EBB_NAMES */

#ifndef STATS_EBB_NAMES
/* ---------------------------------------------------------------------------
 * Telemetry from a signal handler that interrupted ebb holding a lock.
 * Review finding (/tmp/rev-stats: sig_deadlock.c, sig_quick_exit.c): a
 * handler that interrupted malloc or free and called ebb_stats_get waited for
 * ever for the lock the interrupted call held (huge_lock, in huge_free), and
 * so did exit() or quick_exit() from such a handler with EBB_STATS=1 (the
 * report at exit). Only a handler inside ebb's purge pass was told EDEADLK.
 *
 * The interruption is made deterministic here: this program's own mmap, which
 * ebb's calls reach (the executable's definition comes before the C
 * library's), raises SIGUSR2 in a thread that armed it. ebb maps each new
 * region of segments holding its region lock (segment.c,
 * segment_from_region), a lock the snapshot takes too; a run of 1 MiB blocks
 * (three to a segment) soon needs a new region.
 * ------------------------------------------------------------------------- */
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>

extern char **environ;

static __thread bool mmap_raises; /* this thread's next mmap raises SIGUSR2 */

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (mmap_raises)
        raise(SIGUSR2);
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

/* Written by the handler, read by the child's main flow after it (and by the
 * parent: the memory is shared). */
typedef struct {
    atomic_long calls, ok, edeadlk, other;
    atomic_int last_rc, last_errno;
} handler_results_t;
static handler_results_t *handler_results;

static void handler_count(int rc, int err)
{
    handler_results_t *r = handler_results;
    atomic_fetch_add(&r->calls, 1);
    if (rc == 0) {
        atomic_fetch_add(&r->ok, 1);
    } else if (rc == -1 && err == EDEADLK) {
        atomic_fetch_add(&r->edeadlk, 1);
    } else {
        atomic_fetch_add(&r->other, 1);
        atomic_store(&r->last_rc, rc);
        atomic_store(&r->last_errno, err);
    }
}

static void ignore_summary(const struct ebb_heap_summary *h, void *arg)
{
    (void)h;
    (void)arg;
}

static void telemetry_in_handler(int sig)
{
    (void)sig;
    int saved = errno;
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    errno = 0;
    int rc = ebb_stats_get(&st);
    handler_count(rc, errno);
    errno = 0;
    rc = ebb_heap_walk(ignore_summary, NULL, NULL);
    handler_count(rc, errno);
    errno = saved;
}

/* Review finding (stop 50): ebb_stats_get kept a 3 KiB summary on the stack
 * and the walk a 4 KiB bitmap; on a signal handler's small alternate stack
 * (a crash handler's 4-5 KiB) both overflowed it: SIGSEGV. The handler runs
 * on an alternate stack of the kernel's minimum signal frame plus 2.25 KiB,
 * with a guard page below, and calls both (the walk visiting blocks). */
static volatile int small_stack_rc[2] = {-1, -1};
static volatile long small_stack_blocks;

static void count_small_stack_block(void *p, size_t n, void *arg)
{
    (void)p;
    (void)n;
    (void)arg;
    small_stack_blocks++;
}

static void telemetry_on_small_stack(int sig)
{
    (void)sig;
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    small_stack_rc[0] = ebb_stats_get(&st);
    small_stack_rc[1] = ebb_heap_walk(ignore_summary, count_small_stack_block, NULL);
}

static void telemetry_from_a_handler_on_a_small_alternate_stack(void)
{
    long min_frame = sysconf(_SC_MINSIGSTKSZ);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = (size_t)(min_frame > 0 ? min_frame : 2048) + 2304;
    size_t span = (size + page - 1) / page * page;
    uint8_t *map = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(map != MAP_FAILED, "mmap failed");
    REQUIRE(mprotect(map, page, PROT_NONE) == 0, "mprotect failed");
    void *blocks[100];
    for (int i = 0; i < 100; i++)
        blocks[i] = malloc((size_t)i * 10 + 1);
    stack_t ss = {.ss_sp = map + page + span - size, .ss_size = size}, old_ss;
    REQUIRE(sigaltstack(&ss, &old_ss) == 0, "sigaltstack failed");
    struct sigaction sa = {.sa_handler = telemetry_on_small_stack, .sa_flags = SA_ONSTACK}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &old);
    raise(SIGUSR1); /* a SIGSEGV here is the failure */
    sigaction(SIGUSR1, &old, NULL);
    sigaltstack(&old_ss, NULL);
    printf("    info: an alternate stack of %zu bytes; the walk visited %ld blocks\n", size,
           small_stack_blocks);
    CHECK(small_stack_rc[0] == 0 && small_stack_rc[1] == 0,
          "ebb_stats_get and ebb_heap_walk should succeed in the handler; they returned %d and %d",
          small_stack_rc[0], small_stack_rc[1]);
    CHECK(small_stack_blocks >= 100, "the walk should visit the 100 blocks at least; it visited %ld",
          small_stack_blocks);
    for (int i = 0; i < 100; i++)
        free(blocks[i]);
    munmap(map, span + page);
}

/* 1 MiB blocks (kept) until the handler was refused `until_refused` times or
 * 300 blocks were taken: about 100 segments, several new regions. */
static void allocate_until_refused(long until_refused)
{
    static void *blocks[300];
    mmap_raises = true;
    size_t n = 0;
    while (n < 300 && atomic_load(&handler_results->edeadlk) < until_refused)
        blocks[n++] = malloc(MiB);
    mmap_raises = false;
    while (n > 0)
        free(blocks[--n]);
}

static void telemetry_from_a_handler_inside_a_locked_allocator_call_gets_edeadlk(void)
{
    handler_results = mmap(NULL, sizeof *handler_results, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(handler_results != MAP_FAILED, "mmap of the shared results failed");
    memset(handler_results, 0, sizeof *handler_results);
    fflush(stdout);
    /* In a child: before the fix it hung for good. */
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork failed");
    if (pid == 0) {
        struct sigaction sa = {.sa_handler = telemetry_in_handler};
        sigaction(SIGUSR2, &sa, NULL);
        allocate_until_refused(2); /* both calls of one interruption */
        /* And outside any allocator call, the same calls answer. */
        telemetry_in_handler(0);
        _exit(0);
    }
    int status;
    bool ended = check_wait_child(pid, &status, 30);
    handler_results_t *r = handler_results;
    printf("    info: %ld calls from the handler: %ld returned 0, %ld EDEADLK\n",
           atomic_load(&r->calls), atomic_load(&r->ok), atomic_load(&r->edeadlk));
    CHECK(ended, "the child should end; it hung in a handler's ebb_stats_get or ebb_heap_walk "
                 "(%ld calls returned so far) and was killed after 30 s", atomic_load(&r->calls));
    if (ended)
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the child should exit 0; status 0x%x", status);
    CHECK(atomic_load(&r->other) == 0,
          "every call from the handler should return 0 or -1 with EDEADLK; %ld did not "
          "(last: %d, errno %d)", atomic_load(&r->other), atomic_load(&r->last_rc),
          atomic_load(&r->last_errno));
    CHECK(atomic_load(&r->edeadlk) >= 2,
          "the handler inside the mapping of a new segment region (region lock held) should "
          "get EDEADLK from both calls; %ld did", atomic_load(&r->edeadlk));
    CHECK(atomic_load(&r->ok) >= 2, "both calls outside any allocator call should return 0; "
                                    "%ld calls did", atomic_load(&r->ok));
    munmap(handler_results, sizeof *handler_results);
}

/* The child's side of the next case: exit (or quick_exit) from the handler
 * of an mmap made under ebb's region lock (told by ebb_stats_get's EDEADLK). */
static bool exit_quickly;

static void exit_in_handler(int sig)
{
    (void)sig;
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    if (ebb_stats_get(&st) == 0)
        return; /* not inside a lock: keep going */
    static const char msg[] = "exit from the handler\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(3);
    if (exit_quickly)
        quick_exit(0);
    exit(0);
}

static int child_exit_from_a_handler_inside_a_locked_call(bool quick)
{
    exit_quickly = quick;
    static handler_results_t unused;
    handler_results = &unused;
    struct sigaction sa = {.sa_handler = exit_in_handler};
    sigaction(SIGUSR2, &sa, NULL);
    allocate_until_refused(1);
    return 4; /* the handler never exited */
}

/* This environment for a child run of this program with EBB_STATS=1 (no
 * report file, no CHECK_ONLY); NULL if calloc failed. */
static char **stats_child_env(void)
{
    size_t n_env = 0;
    while (environ[n_env])
        n_env++;
    char **envp = calloc(n_env + 2, sizeof *envp);
    if (envp == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++)
        if (strncmp(environ[i], "EBB_STATS", 9) != 0 && strncmp(environ[i], "CHECK_ONLY=", 11) != 0)
            envp[k++] = environ[i];
    envp[k++] = (char *)"EBB_STATS=1";
    envp[k] = NULL;
    return envp;
}

static void exit_from_a_handler_inside_a_locked_call_skips_the_stats_report(void)
{
    char path[] = "/tmp/ebb_test_stats_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp failed");
    unlink(path);
    char **envp = stats_child_env();
    REQUIRE(envp != NULL, "calloc failed");
    const char *modes[] = {"--exit-in-handler", "--quick-exit-in-handler"};
    for (int m = 0; m < 2; m++) {
        REQUIRE(ftruncate(fd, 0) == 0 && lseek(fd, 0, SEEK_SET) == 0, "truncating the output failed");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd, 1);
        posix_spawn_file_actions_adddup2(&fa, fd, 2);
        char *argv[] = {(char *)"test_stats", (char *)modes[m], NULL};
        fflush(stdout);
        pid_t pid;
        int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        REQUIRE(rc == 0, "posix_spawn failed: %d", rc);
        int status;
        bool ended = check_wait_child(pid, &status, 30);
        static char out[16384];
        ssize_t len = pread(fd, out, sizeof out - 1, 0);
        out[len > 0 ? len : 0] = '\0';
        CHECK(ended, "%s: the child should exit; it hung (in the report at exit?) and was "
                     "killed after 30 s. Its output:\n%s", modes[m], out);
        if (!ended)
            continue;
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "%s: the child should exit 0 from its handler; status 0x%x. Its output:\n%s",
              modes[m], status, out);
        CHECK(strstr(out, "exit from the handler\n") != NULL,
              "%s: the handler should have run inside ebb's region lock. Its output:\n%s",
              modes[m], out);
        CHECK(strstr(out, ", at exit: skipped, the process is exiting from a signal handler that "
                          "interrupted ebb holding a lock (an allocator call, a purge pass or a "
                          "heap snapshot) ==\n") != NULL,
              "%s: the EBB_STATS report should say it was skipped. Its output:\n%s", modes[m],
              out);
    }
    free(envp);
    close(fd);
}
#endif /* !STATS_EBB_NAMES */

#ifndef STATS_EBB_NAMES
/* Exact counts compare two snapshots with nothing else allocating between
 * them; but the C library allocates too: stdout's buffer, and a new thread's
 * TLS vector (the first time a thread stack is created, and when ebb's
 * background thread starts). Let all of that happen first. */
static void *nothing(void *arg)
{
    return arg;
}

static void settle_the_c_library(void)
{
    printf("    info: warming up\n");
    for (int i = 0; i < 100 && !snapshot().scavenger_running; i++) {
        free(malloc(8 * MiB)); /* ebb wants its scavenger... */
        free(malloc(100));     /* ...and starts it from an allocation */
        usleep(1000);
    }
    CHECK(snapshot().scavenger_running, "the background thread should have started");
    pthread_t t;
    if (pthread_create(&t, NULL, nothing, NULL) == 0)
        pthread_join(t, NULL);
}
#endif

#ifndef STATS_EBB_NAMES
#include <fcntl.h>

/* Review finding (stop 50): exit in one thread and quick_exit in another ran
 * two EBB_STATS reports at once; sharing the report's static buffers, one
 * printed the other's figures, cut mid-line. The child: its stderr, a pipe
 * of one page, is full, so the report main's exit makes blocks in its write;
 * meanwhile a second thread takes a 3 GiB block (a huge block main's report
 * never saw) and calls quick_exit. */
static atomic_int two_exits_main_exiting;

static void two_exits_mark(void)
{
    atomic_store(&two_exits_main_exiting, 1);
}

static void *two_exits_quick(void *arg)
{
    while (!atomic_load(&two_exits_main_exiting))
        usleep(1000);
    usleep(300000); /* main's report is gathered, its write blocked */
    volatile char *p = malloc((size_t)3 << 30);
    if (p)
        p[0] = 1;
    quick_exit(0);
    return arg;
}

static int child_exit_beside_a_quick_exit(void)
{
    char junk[256];
    memset(junk, 'x', sizeof junk);
    junk[255] = '\n';
    int fl = fcntl(2, F_GETFL);
    fcntl(2, F_SETFL, fl | O_NONBLOCK);
    while (write(2, junk, sizeof junk) > 0) {
    }
    fcntl(2, F_SETFL, fl);
    pthread_t t;
    if (pthread_create(&t, NULL, two_exits_quick, NULL) != 0)
        return 2;
    atexit(two_exits_mark);
    return 0;
}

static void reports_of_two_exits_at_once_stay_whole(void)
{
    int pipe_fd[2];
    REQUIRE(pipe(pipe_fd) == 0, "pipe failed");
    REQUIRE(fcntl(pipe_fd[1], F_SETPIPE_SZ, 4096) > 0, "F_SETPIPE_SZ failed");
    char **envp = stats_child_env();
    REQUIRE(envp != NULL, "calloc failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipe_fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pipe_fd[1], 2);
    posix_spawn_file_actions_addclose(&fa, pipe_fd[0]);
    char *argv[] = {(char *)"test_stats", (char *)"--exit-beside-quick-exit", NULL};
    fflush(stdout);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(pipe_fd[1]);
    REQUIRE(rc == 0, "posix_spawn failed: %d", rc);
    usleep(1000000); /* both exits under way, the first report blocked */
    static char out[65536];
    size_t len = check_read_all(pipe_fd[0], out, sizeof out);
    close(pipe_fd[0]);
    int status;
    CHECK(check_wait_child(pid, &status, 30), "the child should exit");
    free(envp);
    /* Every report whole: its header, then its end marker before any other
     * header; none with the other's huge block in the report main began. */
    int reports = 0, broken = 0;
    const char *at = out;
    while ((at = strstr(at, "== ebb stats: pid ")) != NULL) {
        reports++;
        const char *end = strstr(at, "\n== end of ebb stats ==\n");
        const char *next = strstr(at + 1, "== ebb stats: pid ");
        if (end == NULL || (next != NULL && next < end))
            broken++;
        at++;
    }
    printf("    info: %d reports, %d broken\n", reports, broken);
    CHECK(reports >= 1 && broken == 0, "the reports at exit should each be whole; %d of %d were not. "
          "The output's last 1500 bytes:\n%s", broken, reports, len > 1500 ? out + len - 1500 : out);
}
#endif

int main(int argc, char **argv)
{
#ifndef STATS_EBB_NAMES
    if (argc == 2 && strcmp(argv[1], "--exit-in-handler") == 0)
        return child_exit_from_a_handler_inside_a_locked_call(false);
    if (argc == 2 && strcmp(argv[1], "--quick-exit-in-handler") == 0)
        return child_exit_from_a_handler_inside_a_locked_call(true);
    if (argc == 2 && strcmp(argv[1], "--exit-beside-quick-exit") == 0)
        return child_exit_beside_a_quick_exit();
#else
    (void)argc;
    (void)argv;
#endif
    setvbuf(stdout, NULL, _IOLBF, 0);
    debug_mode = snapshot().debug_mode != 0;
    printf("    info: %s mode\n", debug_mode ? "debug" : "release");
#ifndef STATS_EBB_NAMES
    RUN_CASE(settle_the_c_library);
    RUN_CASE(bad_arguments_get_einval);
    RUN_CASE(live_bytes_follow_malloc_and_free_exactly);
    RUN_CASE(cross_thread_frees_show_as_pending_not_live);
    RUN_CASE(walk_agrees_with_snapshot_and_visits_every_live_block);
    RUN_CASE(walk_visits_blocks_of_a_wide_page_taken_by_16_byte_blocks);
    RUN_CASE(walk_beside_an_exit_or_a_reclaim_says_whether_it_is_exact);
    RUN_CASE(committed_bytes_cover_resident_slices_that_new_pages_reuse);
    RUN_CASE(committed_bytes_drop_by_what_a_trim_gives_back);
    RUN_CASE(walk_total_counts_cached_segments_that_no_other_summary_has);
    RUN_CASE(mallinfo2_reports_what_is_in_use);
    RUN_CASE(malloc_info_writes_xml_and_answers_bad_options_as_glibc);
    RUN_CASE(telemetry_from_a_handler_inside_a_locked_allocator_call_gets_edeadlk);
    RUN_CASE(telemetry_from_a_handler_on_a_small_alternate_stack);
    RUN_CASE(exit_from_a_handler_inside_a_locked_call_skips_the_stats_report);
    RUN_CASE(reports_of_two_exits_at_once_stay_whole);
#endif
    RUN_CASE(live_bytes_return_to_start_after_a_concurrent_stress);
    return check_finish();
}
