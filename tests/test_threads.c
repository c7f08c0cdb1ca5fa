/*
 * test_threads.c — multithreaded stress: random sizes, patterns checked before
 * every free, blocks passed between threads so most frees are cross-thread,
 * and the thread patterns that break allocators (DESIGN.md, "Threads and
 * processes"): a producer/consumer pair, a thread that only frees, threads that
 * exit holding blocks that others free later. And malloc_trim(0) after such
 * cross-thread traffic gives the memory back (SPEC.md: "returns everything that
 * can be returned, at once", "no matter which thread freed it").
 *
 * Built twice: with the standard names (linked with -lebb), and with
 * -DSTRESS_EBB_NAMES against ebb's sources under AddressSanitizer+UBSan and
 * ThreadSanitizer (tests.mk); in the sanitizer builds the loops are shorter and
 * the RSS bounds are not checked (the sanitizers' own memory swamps them).
 */
#include "check.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "ebb.h" /* ebb_stats_get, ebb_collect: in every build */
#ifdef STRESS_EBB_NAMES
#define A(name) ebb_##name
#else
#include <malloc.h>
void free_sized(void *p, size_t size);
void free_aligned_sized(void *p, size_t alignment, size_t size);
#define A(name) name
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 2
#elif __has_feature(thread_sanitizer)
#define SANITIZED 4
#define THREAD_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(THREAD_SANITIZED)
#define THREAD_SANITIZED 1
#endif
#ifndef THREAD_SANITIZED
#define THREAD_SANITIZED 0
#endif
#if !defined(SANITIZED) && (defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__))
#define SANITIZED 4
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif
/* Iteration counts are divided by this under a sanitizer. */
#define SCALE_DIV (SANITIZED ? SANITIZED : 1)

/* ------------------------------------------------------------------------
 * Random numbers, sizes, patterns
 * ---------------------------------------------------------------------- */

typedef struct {
    uint64_t s;
} rng_t;

static inline uint64_t rng_next(rng_t *r)
{
    /* xorshift64* */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

/* Mostly small, some up to 256 KiB, a few up to 4 MiB. */
static size_t random_size(rng_t *r)
{
    uint64_t x = rng_next(r);
    unsigned pick = (unsigned)(x % 1000);
    x >>= 10;
    if (pick < 800)
        return (size_t)(x % 257);
    if (pick < 960)
        return 257 + (size_t)(x % (16 * KiB));
    if (pick < 998)
        return 1 + (size_t)(x % (256 * KiB));
    return 1 + (size_t)(x % (4 * MiB));
}

/* The pattern of a block depends on its address and size, one 64-bit word per
 * 8 bytes. Blocks above 64 KiB get their first and last 4 KiB and the first
 * word of every 4 KiB patterned (fast, and still touches every page). */
#define FULL_LIMIT (64 * KiB)

static inline uint64_t seed_of(const void *p, size_t n)
{
    return ((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)n << 1) ^ 1;
}

static inline uint64_t word_at(uint64_t seed, size_t w)
{
    uint64_t x = seed + w * 0xD1B54A32D192ED03ull;
    x ^= x >> 29;
    return x;
}

/* Apply f to each patterned byte range [a, b) of a block of n bytes, limited
 * to [0, limit). */
#define FOR_PATTERN_RANGES(n, limit, a, b, body)                               \
    do {                                                                       \
        size_t n_ = (n), lim_ = (limit);                                       \
        if (n_ <= FULL_LIMIT) {                                                \
            size_t a = 0, b = lim_;                                            \
            body;                                                              \
        } else {                                                               \
            for (size_t off_ = 0; off_ < n_; off_ += 4096) {                   \
                size_t a = off_, b;                                            \
                if (off_ < 4096 || off_ + 8192 > n_)                           \
                    b = off_ + 4096 < n_ ? off_ + 4096 : n_;                   \
                else                                                           \
                    b = off_ + 8;                                              \
                if (a >= lim_)                                                 \
                    break;                                                     \
                if (b > lim_)                                                  \
                    b = lim_;                                                  \
                body;                                                          \
            }                                                                  \
        }                                                                      \
    } while (0)

static inline uint8_t byte_at(uint64_t seed, size_t i)
{
    return (uint8_t)(word_at(seed, i / 8) >> ((i % 8) * 8));
}

static void fill_range(uint8_t *p, size_t a, size_t b, uint64_t seed)
{
    size_t i = a;
    while (i < b && (i & 7))
        p[i] = byte_at(seed, i), i++;
    for (; i + 8 <= b; i += 8) {
        uint64_t w = word_at(seed, i / 8);
        memcpy(p + i, &w, 8);
    }
    for (; i < b; i++)
        p[i] = byte_at(seed, i);
}

/* First differing index in [a, b), or b. */
static size_t verify_range(const uint8_t *p, size_t a, size_t b, uint64_t seed)
{
    size_t i = a;
    while (i < b && (i & 7)) {
        if (p[i] != byte_at(seed, i))
            return i;
        i++;
    }
    for (; i + 8 <= b; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w != word_at(seed, i / 8))
            break;
    }
    for (; i < b; i++)
        if (p[i] != byte_at(seed, i))
            return i;
    return b;
}

static void fill_block(uint8_t *p, size_t n, uint64_t seed)
{
    FOR_PATTERN_RANGES(n, n, a, b, fill_range(p, a, b, seed));
}

/* Returns the offset of the first bad byte in [0, limit) of a block of n
 * bytes, or SIZE_MAX if all patterned bytes there are intact. */
static size_t verify_block(const uint8_t *p, size_t n, size_t limit, uint64_t seed)
{
    size_t bad = SIZE_MAX;
    FOR_PATTERN_RANGES(n, limit, a, b, {
        size_t r = verify_range(p, a, b, seed);
        if (r != b) {
            bad = r;
            break;
        }
    });
    return bad;
}

/* ------------------------------------------------------------------------
 * Blocks with descriptors
 * ---------------------------------------------------------------------- */

enum { K_MALLOC, K_CALLOC, K_ALIGNED, K_POSIX };

/* A live block. The descriptor itself is allocated with malloc too, so it is
 * also freed by whichever thread ends up with it. */
typedef struct desc {
    uint8_t *p;
    size_t n;
    size_t align; /* 0: not an aligned allocation */
    uint64_t seed;
    uint64_t check; /* p ^ n ^ seed scrambled: catches a corrupted descriptor */
    int owner;      /* index of the allocating thread */
} desc_t;

static inline uint64_t desc_check(const desc_t *d)
{
    return ((uint64_t)(uintptr_t)d->p ^ d->n ^ d->seed ^ d->align) * 0xff51afd7ed558ccdull;
}

static atomic_long cross_frees, local_frees, allocs;

static desc_t *make_block(rng_t *r, int owner, size_t n)
{
    desc_t *d = A(malloc)(sizeof *d);
    CHECK(d != NULL, "malloc(%zu) for a descriptor: expected a block, got NULL", sizeof *d);
    if (!d)
        return NULL;
    unsigned kind = (unsigned)(rng_next(r) % 100);
    uint8_t *p;
    size_t align = 0;
    if (kind < 85) {
        p = A(malloc)(n);
    } else if (kind < 92) {
        p = A(calloc)(1, n);
        if (p) {
            size_t lim = n < FULL_LIMIT ? n : FULL_LIMIT;
            size_t z = check_all_bytes(p, lim, 0);
            CHECK(z == lim, "calloc(1, %zu) = %p: expected zeroed memory, byte %zu is 0x%02x", n,
                  (void *)p, z, z < lim ? p[z] : 0);
        }
    } else if (kind < 97) {
        align = (size_t)32 << (rng_next(r) % 8); /* 32 .. 4096 */
        p = A(aligned_alloc)(align, n);
    } else {
        align = (size_t)64 << (rng_next(r) % 11); /* 64 .. 64 KiB */
        void *q = NULL;
        int e = A(posix_memalign)(&q, align, n);
        CHECK(e == 0, "posix_memalign(%zu, %zu): expected 0, got %d", align, n, e);
        p = e == 0 ? q : NULL;
    }
    CHECK(p != NULL, "allocation of %zu bytes (align %zu): expected a block, got NULL", n, align);
    if (!p) {
        A(free)(d);
        return NULL;
    }
    CHECK((uintptr_t)p % 16 == 0 && (!align || (uintptr_t)p % align == 0),
          "allocation of %zu bytes: expected alignment %zu, got %p", n, align ? align : 16,
          (void *)p);
    d->p = p;
    d->n = n;
    d->align = align;
    d->seed = seed_of(p, n);
    d->owner = owner;
    d->check = desc_check(d);
    fill_block(p, n, d->seed);
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    return d;
}

static bool verify_desc(const desc_t *d, const char *when)
{
    CHECK(d->check == desc_check(d), "%s: descriptor %p corrupted (p %p, n %zu)", when,
          (const void *)d, (void *)d->p, d->n);
    if (d->check != desc_check(d))
        return false;
    size_t bad = verify_block(d->p, d->n, d->n, d->seed);
    CHECK(bad == SIZE_MAX, "%s: block %p of %zu bytes (allocated by thread %d): expected its "
          "pattern intact, byte %zu is 0x%02x instead of 0x%02x", when, (void *)d->p, d->n,
          d->owner, bad, bad < d->n ? d->p[bad] : 0, bad < d->n ? byte_at(d->seed, bad) : 0);
    return bad == SIZE_MAX;
}

static void free_block(desc_t *d, int me, rng_t *r)
{
    if (!d)
        return;
    if (!verify_desc(d, "before free"))
        return; /* leak rather than free a block we no longer trust */
    unsigned how = (unsigned)(rng_next(r) % 10);
    if (d->align && how < 5)
        A(free_aligned_sized)(d->p, d->align, d->n);
    else if (!d->align && how == 0)
        A(free_sized)(d->p, d->n);
    else
        A(free)(d->p);
    atomic_fetch_add_explicit(d->owner == me ? &local_frees : &cross_frees, 1,
                              memory_order_relaxed);
    A(free)(d);
}

/* Resize a block with realloc; its pattern prefix must survive. */
static void realloc_block(desc_t *d, rng_t *r, int me)
{
    if (!verify_desc(d, "before realloc") || d->align)
        return;
    size_t n = random_size(r);
    if (n == 0)
        n = 1;
    uint8_t *q = A(realloc)(d->p, n);
    CHECK(q != NULL, "realloc(%p, %zu): expected a block, got NULL", (void *)d->p, n);
    if (!q)
        return;
    size_t keep = n < d->n ? n : d->n;
    size_t bad = verify_block(q, d->n, keep, d->seed);
    CHECK(bad == SIZE_MAX, "realloc %zu -> %zu bytes (%p -> %p): expected the first %zu bytes "
          "kept, byte %zu differs", d->n, n, (void *)d->p, (void *)q, keep, bad);
    d->p = q;
    d->n = n;
    d->seed = seed_of(q, n);
    d->owner = me; /* realloc may move it into this thread's heap */
    d->check = desc_check(d);
    fill_block(q, n, d->seed);
}

/* ------------------------------------------------------------------------
 * Random stress through a shared array of slots
 * ---------------------------------------------------------------------- */

#define NSLOTS 8192
static _Atomic(desc_t *) slots[NSLOTS];

struct stress_arg {
    int id;
    int nthreads;
    long ops;
};

/* Operations done by each stress thread, published every STRESS_STEP. A
 * thread more than STRESS_LEAD ahead of the slowest waits for it, so the
 * threads interleave however the machine schedules them: on a loaded 2-core
 * machine one thread used to run most of its operations alone, freeing its
 * own blocks, and the cross-thread share fell to 11%. */
#define STRESS_STEP 1024
#define STRESS_LEAD 2048
static atomic_long stress_progress[16];

static void stress_keep_pace(const struct stress_arg *arg, long done)
{
    atomic_store(&stress_progress[arg->id], done);
    for (;;) {
        long slowest = LONG_MAX;
        for (int t = 0; t < arg->nthreads; t++) {
            long p = atomic_load(&stress_progress[t]);
            slowest = p < slowest ? p : slowest;
        }
        if (done - slowest <= STRESS_LEAD)
            return;
        /* Sleep rather than yield: with 8 threads on 2 loaded cores, waiters
         * that kept yielding took the CPU from the thread they waited for. */
        struct timespec ts = {0, 50 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void *stress_worker(void *argp)
{
    struct stress_arg *arg = argp;
    rng_t r = {0x1234567ull + (uint64_t)arg->id * 0x9E3779B97F4A7C15ull};
    for (long i = 0; i < arg->ops; i++) {
        if (i % STRESS_STEP == 0)
            stress_keep_pace(arg, i);
        uint64_t x = rng_next(&r);
        size_t j = (size_t)(x % NSLOTS);
        unsigned act = (unsigned)((x >> 32) % 100);
        if (act < 60) {
            desc_t *d = make_block(&r, arg->id, random_size(&r));
            desc_t *old = atomic_exchange(&slots[j], d);
            free_block(old, arg->id, &r);
        } else if (act < 90) {
            free_block(atomic_exchange(&slots[j], NULL), arg->id, &r);
        } else {
            desc_t *d = atomic_exchange(&slots[j], NULL);
            if (d) {
                realloc_block(d, &r, arg->id);
                desc_t *old = atomic_exchange(&slots[j], d);
                free_block(old, arg->id, &r);
            }
        }
    }
    atomic_store(&stress_progress[arg->id], LONG_MAX); /* done: nobody waits for it */
    return NULL;
}

static void drain_slots(void)
{
    rng_t r = {99};
    for (size_t j = 0; j < NSLOTS; j++)
        free_block(atomic_exchange(&slots[j], NULL), -1, &r);
}

/* Debug mode: ebb_debug_verify called over and over beside the workers
 * (verify_beside_the_stress). It must find nothing: the workers make no fault.
 * A heap walk runs between the calls: it reads the headers of live blocks
 * that the workers free and realloc in place (debug.c, "Claiming a block"). */
static atomic_bool stress_running;
static atomic_long verify_calls, verify_problems, walk_blocks;

static void walk_count(void *p, size_t n, void *arg)
{
    (void)p;
    (void)n;
    (void)arg;
    atomic_fetch_add_explicit(&walk_blocks, 1, memory_order_relaxed);
}

static void *verify_loop(void *unused)
{
    (void)unused;
    while (atomic_load(&stress_running)) {
        atomic_fetch_add(&verify_problems, (long)ebb_debug_verify());
        atomic_fetch_add(&verify_calls, 1);
        ebb_heap_walk(NULL, walk_count, NULL);
    }
    return NULL;
}

static void run_stress_verified(int nthreads, long ops_per_thread, bool verify)
{
    pthread_t th[16], verifier;
    struct stress_arg args[16];
    atomic_store(&cross_frees, 0);
    atomic_store(&local_frees, 0);
    atomic_store(&allocs, 0);
    for (int i = 0; i < nthreads; i++)
        atomic_store(&stress_progress[i], 0);
    for (int i = 0; i < nthreads; i++) {
        args[i].id = i;
        args[i].nthreads = nthreads;
        args[i].ops = ops_per_thread / SCALE_DIV;
        int e = pthread_create(&th[i], NULL, stress_worker, &args[i]);
        REQUIRE(e == 0, "pthread_create: %s", strerror(e));
    }
    atomic_store(&stress_running, true);
    if (verify) {
        atomic_store(&verify_calls, 0);
        atomic_store(&verify_problems, 0);
        int e = pthread_create(&verifier, NULL, verify_loop, NULL);
        REQUIRE(e == 0, "pthread_create: %s", strerror(e));
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stress_running, false);
    if (verify)
        pthread_join(verifier, NULL);
    drain_slots();
    long cross = atomic_load(&cross_frees), local = atomic_load(&local_frees);
    long total = atomic_load(&allocs);
    printf("    %d threads: %ld blocks, %ld freed by their allocating thread, %ld by another\n",
           nthreads, total, local, cross);
    CHECK(cross + local == total, "expected every block allocated (%ld) to be freed, %ld were",
          total, cross + local);
    /* With threads picking slots at random, about (n-1)/n of the frees of
     * surviving blocks are cross-thread; require a fair share so the test
     * really exercises the remote free path. */
    CHECK(cross > total / 5, "expected > 20%% cross-thread frees, got %ld of %ld", cross, total);
    if (verify) {
        long calls = atomic_load(&verify_calls), problems = atomic_load(&verify_problems);
        printf("    ebb_debug_verify and a heap walk ran %ld times beside them (the walks "
               "saw %ld blocks)\n", calls, atomic_load(&walk_blocks));
        CHECK(calls > 0, "the verifying thread never finished a call");
        CHECK(problems == 0, "ebb_debug_verify found %ld problems among threads that make no "
              "fault (it reports only real faults, even beside running threads)", problems);
        CHECK(ebb_debug_verify() == 0, "ebb_debug_verify of the quiescent heap found a problem");
    }
}

static void run_stress(int nthreads, long ops_per_thread)
{
    run_stress_verified(nthreads, ops_per_thread, false);
}

static void stress_2_threads_random_sizes_cross_thread_frees(void)
{
    run_stress(2, 400000);
}

static void stress_8_threads_random_sizes_cross_thread_frees(void)
{
    run_stress(8, 100000);
}

/* Debug mode: a thread verifying the whole heap again and again while four
 * threads allocate, free (mostly each other's blocks) and realloc. The
 * blocks verify reads are being freed, filled and reused beside it: a block
 * is claimed while it is checked (debug.c), so verify neither races those
 * writes (ThreadSanitizer checks it: tests/run_tests.sh, threads_tsan_debug_
 * verify) nor reports a fault that is not there. */
static void verify_beside_the_stress(void)
{
    run_stress_verified(4, 100000, true);
}

/* After the stress threads are gone and every block is freed, malloc_trim(0)
 * gives back everything that can be given back (SPEC.md), whichever thread's
 * heap the memory was in: RSS returns close to where it was before. */
static long rss_at_start;

static void malloc_trim_after_threads_exit_returns_their_memory(void)
{
    int r = A(malloc_trim)(0);
    long rss = check_anon_rss();
    printf("    anonymous RSS at start %ld KiB, after the stress and malloc_trim(0) %ld KiB\n",
           rss_at_start / 1024, rss / 1024);
    CHECK(r == 0 || r == 1, "malloc_trim(0): expected 0 or 1, got %d", r);
    if (!SANITIZED)
        CHECK(rss - rss_at_start < 24 * (long)MiB, "expected RSS within 24 MiB of the start "
              "(%ld KiB) once all blocks are freed and malloc_trim(0) ran, got %ld KiB",
              rss_at_start / 1024, rss / 1024);
}

/* 20,000 blocks (100..2060 bytes, ~20 MiB) allocated by one thread and freed
 * by main; then malloc_trim(0) must give the pages back although their owner
 * never runs the allocator again (DESIGN.md: "a page whose blocks are all free
 * must become reclaimable without its owner's help"). */
#define TRIM_BLOCKS 20000
static void *trim_blocks[TRIM_BLOCKS];
static atomic_int owner_go, owner_allocated;

static void *allocate_then_wait(void *unused)
{
    (void)unused;
    for (int i = 0; i < TRIM_BLOCKS; i++) {
        trim_blocks[i] = A(malloc)(100 + (size_t)(i % 50) * 40);
        if (trim_blocks[i])
            memset(trim_blocks[i], 1, 100);
    }
    atomic_store(&owner_allocated, 1);
    while (!atomic_load(&owner_go)) { /* idle: no allocator call while waiting */
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void trim_after_remote_frees(bool owner_exits_first)
{
    A(malloc_trim)(0);
    long rss0 = check_anon_rss();
    atomic_store(&owner_go, owner_exits_first);
    atomic_store(&owner_allocated, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, allocate_then_wait, NULL) == 0, "pthread_create");
    while (!atomic_load(&owner_allocated))
        sched_yield();
    if (owner_exits_first)
        pthread_join(t, NULL);
    long rss1 = check_anon_rss();
    for (int i = 0; i < TRIM_BLOCKS; i++) {
        CHECK(trim_blocks[i] != NULL, "malloc in the owner thread failed");
        A(free)(trim_blocks[i]);
    }
    int r = A(malloc_trim)(0);
    long rss2 = check_anon_rss();
    if (!owner_exits_first) {
        atomic_store(&owner_go, 1);
        pthread_join(t, NULL);
    }
    printf("    RSS %ld KiB before, %ld KiB allocated, %ld KiB after free by main + "
           "malloc_trim(0) (returned %d)\n", rss0 / 1024, rss1 / 1024, rss2 / 1024, r);
    if (SANITIZED)
        return;
    CHECK(rss1 - rss0 > 10 * (long)MiB, "expected the blocks to add > 10 MiB of RSS (else this "
          "measures nothing), got %ld KiB", (rss1 - rss0) / 1024);
    CHECK(rss2 - rss0 < 4 * (long)MiB, "expected malloc_trim(0) to bring RSS back within 4 MiB "
          "of %ld KiB after main freed the %s thread's blocks, got %ld KiB", rss0 / 1024,
          owner_exits_first ? "exited" : "sleeping", rss2 / 1024);
}

static void malloc_trim_returns_pages_freed_remotely_while_their_owner_sleeps(void)
{
    trim_after_remote_frees(false);
}

static void malloc_trim_returns_pages_freed_after_their_owner_exited(void)
{
    trim_after_remote_frees(true);
}

/* ------------------------------------------------------------------------
 * Producer / consumer
 * ---------------------------------------------------------------------- */

#define RING 1024
static _Atomic(desc_t *) ring[RING];
static atomic_long ring_head, ring_tail; /* head: next to write; tail: next to read */
static long pc_items;

static void *producer(void *unused)
{
    (void)unused;
    rng_t r = {0xfeedface};
    for (long i = 0; i < pc_items; i++) {
        size_t n = (rng_next(&r) % 16 == 0) ? 4096 + rng_next(&r) % (60 * KiB)
                                             : 16 + rng_next(&r) % 2048;
        desc_t *d = make_block(&r, 0, n);
        if (!d)
            continue;
        while (atomic_load_explicit(&ring_head, memory_order_relaxed) -
                   atomic_load_explicit(&ring_tail, memory_order_acquire) >= RING)
            sched_yield();
        long h = atomic_load_explicit(&ring_head, memory_order_relaxed);
        atomic_store_explicit(&ring[h % RING], d, memory_order_relaxed);
        atomic_store_explicit(&ring_head, h + 1, memory_order_release);
    }
    return NULL;
}

static atomic_long pc_done;

static void *consumer(void *unused)
{
    (void)unused;
    rng_t r = {0xdeadbeef};
    long got = 0;
    while (got < pc_items) {
        long t = atomic_load_explicit(&ring_tail, memory_order_relaxed);
        if (t == atomic_load_explicit(&ring_head, memory_order_acquire)) {
            if (atomic_load(&pc_done))
                break;
            sched_yield();
            continue;
        }
        desc_t *d = atomic_load_explicit(&ring[t % RING], memory_order_relaxed);
        atomic_store_explicit(&ring_tail, t + 1, memory_order_release);
        free_block(d, 1, &r);
        got++;
    }
    return NULL;
}

static void producer_consumer_pair_reuses_memory_freed_by_the_consumer(void)
{
    pc_items = 300000 / SCALE_DIV;
    atomic_store(&ring_head, 0);
    atomic_store(&ring_tail, 0);
    atomic_store(&pc_done, 0);
    atomic_store(&cross_frees, 0);
    atomic_store(&local_frees, 0);
    atomic_store(&allocs, 0);
    long rss0 = check_anon_rss();
    pthread_t p, c;
    REQUIRE(pthread_create(&c, NULL, consumer, NULL) == 0, "pthread_create consumer");
    REQUIRE(pthread_create(&p, NULL, producer, NULL) == 0, "pthread_create producer");
    pthread_join(p, NULL);
    atomic_store(&pc_done, 1);
    pthread_join(c, NULL);
    long rss1 = check_anon_rss();
    long total = atomic_load(&allocs), cross = atomic_load(&cross_frees);
    printf("    %ld blocks passed, %ld freed by the consumer; RSS %+ld KiB\n", total, cross,
           (rss1 - rss0) / 1024);
    CHECK(cross == total, "expected the consumer to free all %ld blocks, it freed %ld", total,
          cross);
    /* ~300 MB went through the pair; only the ring (1024 blocks) is live at
     * once. If the producer never got the consumer's frees back, RSS would
     * grow by hundreds of MiB. */
    if (!SANITIZED)
        CHECK(rss1 - rss0 < 64 * (long)MiB, "expected RSS growth < 64 MiB for a pair with at most "
              "%d live blocks, got %ld KiB: cross-thread frees are not reused", RING,
              (rss1 - rss0) / 1024);
}

/* ------------------------------------------------------------------------
 * A thread that only frees
 * ---------------------------------------------------------------------- */

#define FREER_BLOCKS 20000
static desc_t *handoff[FREER_BLOCKS];
static atomic_long freer_bad;

/* Must not allocate anything: this thread never gets a heap of its own. The
 * checks are inline (no CHECK, whose message formatting could allocate). */
static void *only_frees(void *unused)
{
    (void)unused;
    for (int i = 0; i < FREER_BLOCKS; i++) {
        desc_t *d = handoff[i];
        if (d->check != desc_check(d) || verify_block(d->p, d->n, d->n, d->seed) != SIZE_MAX) {
            atomic_fetch_add(&freer_bad, 1);
            continue;
        }
        A(free)(d->p);
        A(free)(d);
    }
    return NULL;
}

static void thread_that_only_frees_blocks_allocated_by_main(void)
{
    rng_t r = {777};
    long rss_after_first = 0;
    int rounds = SANITIZED ? 3 : 10;
    atomic_store(&freer_bad, 0);
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < FREER_BLOCKS; i++) {
            size_t n = i % 1000 == 0 ? 300 * KiB + (size_t)i : random_size(&r) % (8 * KiB);
            desc_t *d = make_block(&r, 0, n);
            REQUIRE(d, "make_block failed");
            if (d->align) { /* keep it simple: only plain free in that thread */
                d->align = 0;
                d->check = desc_check(d);
            }
            handoff[i] = d;
        }
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, only_frees, NULL) == 0, "pthread_create");
        pthread_join(t, NULL);
        if (round == 0)
            rss_after_first = check_anon_rss();
    }
    long rss_end = check_anon_rss();
    CHECK(atomic_load(&freer_bad) == 0, "the freeing thread found %ld corrupted blocks",
          atomic_load(&freer_bad));
    printf("    RSS after round 1: %ld KiB, after round %d: %ld KiB\n", rss_after_first / 1024,
           rounds, rss_end / 1024);
    /* Each round allocates ~50 MB; if frees by a heapless thread were lost
     * the heap would grow by that much per round. */
    if (!SANITIZED)
        CHECK(rss_end - rss_after_first < 32 * (long)MiB, "expected RSS to stay flat over %d "
              "rounds (< 32 MiB growth), it grew %ld KiB: frees by a thread that never "
              "allocated are not reused", rounds - 1, (rss_end - rss_after_first) / 1024);
}

/* ------------------------------------------------------------------------
 * Threads that exit while holding live blocks
 * ---------------------------------------------------------------------- */

#define EXIT_THREADS 4
#define EXIT_BLOCKS 5000
static desc_t *left_behind[EXIT_THREADS * EXIT_BLOCKS];

struct exit_arg {
    int index; /* which share of left_behind[] it fills */
    int id;    /* owner id recorded in the descriptors */
};

static void *allocate_and_exit(void *argp)
{
    struct exit_arg *a = argp;
    rng_t r = {(uint64_t)a->id * 7919 + 1};
    for (int i = 0; i < EXIT_BLOCKS; i++) {
        /* Free some of our own on the way, so the pages are partly free. */
        desc_t *d = make_block(&r, a->id, i % 500 == 0 ? 200 * KiB : random_size(&r) % (16 * KiB));
        if (i % 3 == 0) {
            free_block(d, a->id, &r);
            d = NULL;
        }
        left_behind[a->index * EXIT_BLOCKS + i] = d;
    }
    return NULL; /* exits holding two thirds of its blocks */
}

struct free_range_arg {
    int from, to, id;
};

static void *free_range(void *argp)
{
    struct free_range_arg *a = argp;
    rng_t r = {(uint64_t)a->from + 5};
    for (int i = a->from; i < a->to; i++) {
        free_block(left_behind[i], a->id, &r);
        left_behind[i] = NULL;
    }
    /* And allocate a little: reclaiming the dead threads' pages is fine. */
    for (int i = 0; i < 1000; i++)
        free_block(make_block(&r, a->id, random_size(&r) % 4096), a->id, &r);
    return NULL;
}

static void threads_exit_holding_blocks_that_others_free_later(void)
{
    int rounds = SANITIZED ? 3 : 12;
    long rss_after_first = 0;
    for (int round = 0; round < rounds; round++) {
        pthread_t t[EXIT_THREADS];
        struct exit_arg ea[EXIT_THREADS];
        for (int i = 0; i < EXIT_THREADS; i++) {
            ea[i].index = i;
            ea[i].id = 100 + i;
            REQUIRE(pthread_create(&t[i], NULL, allocate_and_exit, &ea[i]) == 0, "create");
        }
        for (int i = 0; i < EXIT_THREADS; i++)
            pthread_join(t[i], NULL);
        /* All allocating threads are gone. Two new threads and main free
         * their blocks. */
        const int total = EXIT_THREADS * EXIT_BLOCKS;
        struct free_range_arg fa[2] = {{0, total / 3, 200}, {total / 3, 2 * total / 3, 201}};
        pthread_t f[2];
        for (int i = 0; i < 2; i++)
            REQUIRE(pthread_create(&f[i], NULL, free_range, &fa[i]) == 0, "create");
        rng_t r = {3};
        for (int i = 2 * total / 3; i < total; i++) {
            free_block(left_behind[i], -1, &r);
            left_behind[i] = NULL;
        }
        for (int i = 0; i < 2; i++)
            pthread_join(f[i], NULL);
        if (round == 0)
            rss_after_first = check_anon_rss();
    }
    long rss_end = check_anon_rss();
    printf("    RSS after round 1: %ld KiB, after round %d: %ld KiB\n", rss_after_first / 1024,
           rounds, rss_end / 1024);
    if (!SANITIZED)
        CHECK(rss_end - rss_after_first < 32 * (long)MiB, "expected RSS to stay flat over %d "
              "rounds of threads exiting with live blocks (< 32 MiB growth), it grew %ld KiB",
              rounds - 1, (rss_end - rss_after_first) / 1024);
}

/* Bursts with idle gaps, for the scavenger's visits to live heaps: threads
 * allocate bursts of 64..512 KiB and 16..70,000 B blocks, free them (a
 * quarter through shared slots, so by another thread), and now and then sleep
 * 3 ms. run_tests.sh runs this case a second time under ThreadSanitizer with
 * EBB_PURGE_DELAY=2, so that the scavenger finds heaps idle while their
 * owners run: it then collects or steals pages (heap.c, heap_scavenge) while
 * the owners keep, reuse and free pages of their own. This found a race
 * between the scavenger's steal of a full page and the owner's kept page
 * (page.c, the `kept` flag): two to four reports a run before the fix. */
#define BURST_SLOTS 64
static _Atomic(uint8_t *) burst_slots[BURST_SLOTS];

static bool burst_block_intact(const uint8_t *p)
{
    size_t n = 0;
    memcpy(&n, p, sizeof n);
    return n >= 16 && p[n - 1] == (uint8_t)n && p[sizeof n] == (uint8_t)(n >> 8);
}

static uint8_t *burst_alloc(rng_t *r, size_t lo, size_t hi)
{
    size_t n = lo + (size_t)(rng_next(r) % (hi - lo));
    uint8_t *p = A(malloc)(n);
    if (p == NULL)
        return NULL;
    memcpy(p, &n, sizeof n);
    p[sizeof n] = (uint8_t)(n >> 8);
    p[n - 1] = (uint8_t)n;
    return p;
}

static atomic_long burst_failures;

static void burst_free(uint8_t *p, rng_t *r)
{
    if (rng_next(r) % 4 == 0)
        p = atomic_exchange(&burst_slots[rng_next(r) % BURST_SLOTS], p);
    if (p == NULL)
        return;
    if (!burst_block_intact(p))
        atomic_fetch_add(&burst_failures, 1);
    A(free)(p);
}

/* Bursts per worker. In debug mode every block is filled at malloc and at
 * free and checked as it leaves the quarantine, whole up to 1 MiB: with
 * 3000 bursts this case took 197 of debug_threads' 230 s on a loaded 2-core
 * machine (the limit is 300 s), so debug mode does a quarter. */
static int burst_iterations;

static void *burst_worker(void *argp)
{
    rng_t r = {0x5eed + (uint64_t)(uintptr_t)argp * 0x9E3779B97F4A7C15ull};
    for (int it = 0; it < burst_iterations; it++) {
        uint8_t *big[8], *small[16];
        for (int i = 0; i < 8; i++)
            big[i] = burst_alloc(&r, 64 * 1024, 512 * 1024);
        for (int i = 0; i < 16; i++)
            small[i] = burst_alloc(&r, 16, 70000);
        for (int i = 0; i < 8; i++) {
            if (big[i] == NULL)
                atomic_fetch_add(&burst_failures, 1);
            else
                burst_free(big[i], &r);
        }
        for (int i = 0; i < 16; i++) {
            if (small[i] == NULL)
                atomic_fetch_add(&burst_failures, 1);
            else
                burst_free(small[i], &r);
        }
        if (rng_next(&r) % 200 == 0)
            usleep(3000);
    }
    return NULL;
}

static void bursts_with_idle_gaps_while_the_scavenger_visits(void)
{
    const char *debug = getenv("EBB_DEBUG");
    burst_iterations = debug && strcmp(debug, "0") != 0 ? 750 : 3000;
    for (int round = 0; round < 4; round++) {
        pthread_t th[6];
        for (int i = 0; i < 6; i++) {
            int e = pthread_create(&th[i], NULL, burst_worker, (void *)(uintptr_t)(round * 6 + i));
            REQUIRE(e == 0, "pthread_create: %s", strerror(e));
        }
        for (int i = 0; i < 6; i++)
            pthread_join(th[i], NULL);
    }
    for (int i = 0; i < BURST_SLOTS; i++) {
        uint8_t *p = atomic_exchange(&burst_slots[i], NULL);
        if (p && !burst_block_intact(p))
            atomic_fetch_add(&burst_failures, 1);
        A(free)(p);
    }
    CHECK(atomic_load(&burst_failures) == 0,
          "%ld blocks failed to allocate or came back changed", atomic_load(&burst_failures));
}

/* FIFO rings of blocks above 1 KiB (bench_core pair) while the scavenger
 * visits. The owner's free of such a block points its class's direct slot at
 * the block's page (src/internal.h, PAGE_HOT), on the fast path, without the
 * heap's lock. A scavenger that quiesces the heap clears every slot first
 * (heap.c, step 2): a free that began before and stored after the clear, and
 * was done by the time the scavenger looked at tls.busy, left a slot naming
 * a page, and the owner's next malloc popped from that page while the
 * scavenger collected it. The ring runs on fast paths alone, so its heap
 * looks idle (no slow path for a while); a few cross-thread frees through
 * shared slots give the scavenger a reason to visit. heap.c now looks for
 * changed slots before it takes the heap (heap_direct_cleared): a copy of
 * this loop run alone with EBB_PURGE_DELAY=1, reporting each time that test
 * found one, did so in 2 runs of 8 (of some 40 visits each). The window is
 * narrow: neither this case nor its ThreadSanitizer run (run_tests.sh, with
 * EBB_PURGE_DELAY=2) failed in 6 runs without the test, so it is coverage
 * of the path more than a trap for the race. */
#define HOT_RING 64
#define HOT_SHARED 8
static _Atomic(uint8_t *) hot_shared[HOT_SHARED];
static atomic_long hot_failures;
static long hot_steps;

static void *hot_ring_worker(void *argp)
{
    (void)argp;
    uint8_t *ring[HOT_RING];
    for (int i = 0; i < HOT_RING; i++) {
        ring[i] = A(malloc)(4096);
        if (ring[i] == NULL) {
            atomic_fetch_add(&hot_failures, 1);
            return NULL;
        }
        ring[i][0] = (uint8_t)(i - HOT_RING);
    }
    for (long it = 0; it < hot_steps; it++) {
        uint8_t *p = A(malloc)(it % 3 ? 4096 : 16384);
        if (p == NULL) {
            atomic_fetch_add(&hot_failures, 1);
            break;
        }
        p[0] = (uint8_t)it;
        uint8_t *old = ring[it % HOT_RING];
        if (old[0] != (uint8_t)(it - HOT_RING))
            atomic_fetch_add(&hot_failures, 1);
        A(free)(old);
        ring[it % HOT_RING] = p;
        if (it % 500 == 0) { /* a cross-thread free now and then */
            uint8_t *q = A(malloc)(4096);
            if (q != NULL)
                q[0] = 0xA5;
            q = atomic_exchange(&hot_shared[(it / 500) % HOT_SHARED], q);
            if (q != NULL && q[0] != 0xA5)
                atomic_fetch_add(&hot_failures, 1);
            A(free)(q);
        }
    }
    for (int i = 0; i < HOT_RING; i++)
        A(free)(ring[i]);
    return NULL;
}

static void fifo_rings_above_1_kib_while_the_scavenger_visits(void)
{
    const char *debug = getenv("EBB_DEBUG");
    hot_steps = debug && strcmp(debug, "0") != 0 ? 100000 : 1000000;
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        int e = pthread_create(&th[i], NULL, hot_ring_worker, NULL);
        REQUIRE(e == 0, "pthread_create: %s", strerror(e));
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < HOT_SHARED; i++) {
        uint8_t *q = atomic_exchange(&hot_shared[i], NULL);
        if (q != NULL && q[0] != 0xA5)
            atomic_fetch_add(&hot_failures, 1);
        A(free)(q);
    }
    CHECK(atomic_load(&hot_failures) == 0,
          "%ld blocks failed to allocate or came back changed", atomic_load(&hot_failures));
}

/* Review findings: glibc runs pthread key destructors in at most
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds, ebb's (made at the first malloc)
 * first in each. A destructor that allocates after ebb's in the last round
 * (or whose thread never allocated before) makes a heap no destructor hands
 * back, its busy flag in the dead thread's TLS: on a stack the program then
 * unmapped, the scavenger and a forced collection crashed reading it. And
 * allocations in later destructors must keep using one heap, not map a
 * segment every few dozen. Each thread runs on a stack of our own, unmapped
 * after the join. */
enum { DTOR_EVERY_ROUND, DTOR_LAST_ROUND_ONLY, DTOR_MANY };
static pthread_key_t dtor_key;
static atomic_int dtor_calls;
static int dtor_mode;

static void allocating_destructor(void *value)
{
    long round = (long)value;
    atomic_fetch_add(&dtor_calls, 1);
    if (dtor_mode == DTOR_MANY) {
        for (int i = 0; i < 5000; i++) {
            void *kept = A(malloc)(64); /* freed by nobody */
            (void)kept;
        }
        return;
    }
    if (dtor_mode == DTOR_EVERY_ROUND || round >= PTHREAD_DESTRUCTOR_ITERATIONS) {
        void *p = A(malloc)(100 + (size_t)round * 1000);
        if (p)
            memset(p, 1, 100);
        A(free)(p);
        void *kept = A(malloc)(64); /* freed by nobody: lies in a dead thread's heap */
        (void)kept;
    }
    if (round < PTHREAD_DESTRUCTOR_ITERATIONS + 2)
        pthread_setspecific(dtor_key, (void *)(round + 1));
}

static void *arm_destructor(void *unused)
{
    (void)unused;
    if (dtor_mode != DTOR_LAST_ROUND_ONLY) /* else this thread never allocates before */
        A(free)(A(malloc)(32));
    pthread_setspecific(dtor_key, (void *)1);
    return NULL;
}

static void run_on_stack(void *stack, size_t size, void *(*fn)(void *))
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, stack, size);
    pthread_t t;
    REQUIRE(pthread_create(&t, &attr, fn, NULL) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
}

static void run_on_own_stacks(int threads)
{
    size_t stack_size = 256 * KiB;
    for (int i = 0; i < threads; i++) {
        void *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(stack != MAP_FAILED, "mmap of a thread stack failed");
        run_on_stack(stack, stack_size, arm_destructor);
        munmap(stack, stack_size); /* its TLS goes with it */
    }
}

/* The same stack for a thread whose last-round destructor leaves a block in
 * a heap nobody hands back, then for one whose first call frees that block:
 * it has the dead thread's id, and its free used to treat the page as one of
 * the shared heap_empty's (review finding). */
static void *_Atomic leftover_block;

static void leave_a_block(void *value)
{
    long round = (long)value;
    if (round >= PTHREAD_DESTRUCTOR_ITERATIONS) {
        /* A size no other live block here has: alone in its page, so the
         * free below empties the page and takes the slow path, the one that
         * used heap_empty (64 bytes shares a page with the 64-byte blocks the
         * cases above keep, once a new heap reclaims their segment). */
        atomic_store(&leftover_block, A(malloc)(20000));
        return;
    }
    pthread_setspecific(dtor_key, (void *)(round + 1));
}

static void *arm_leave_a_block(void *unused)
{
    (void)unused;
    pthread_setspecific(dtor_key, (void *)1);
    return NULL;
}

static void *free_the_leftover(void *unused)
{
    (void)unused;
    A(free)(atomic_exchange(&leftover_block, NULL));
    return NULL;
}

static void key_destructors_that_allocate_leave_no_heap_behind(void)
{
    enum { THREADS = 8 };
#if THREAD_SANITIZED
    /* ThreadSanitizer ends a thread's state from a key destructor of its
     * own that re-arms itself into the last round; our destructor, running
     * after it there, crashes in the sanitizer's runtime (SEGV at 0xd0). */
    SKIP_CHECK("ThreadSanitizer cannot run code in the last key destructor round");
    return;
#endif
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    A(free)(A(malloc)(32)); /* ebb's key exists before ours */
    REQUIRE(pthread_key_create(&dtor_key, allocating_destructor) == 0, "pthread_key_create failed");
    static const char *const names[] = {"allocating in every round", "allocating in the last round only"};
    for (int mode = DTOR_EVERY_ROUND; mode <= DTOR_LAST_ROUND_ONLY; mode++) {
        dtor_mode = mode;
        atomic_store(&dtor_calls, 0);
        A(malloc_trim)(0);
        REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
        uint64_t alive0 = st.heaps_alive;
        run_on_own_stacks(THREADS);
        REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
        uint64_t alive1 = st.heaps_alive;
        /* A forced pass visits every heap: it must not read the dead TLS. */
        ebb_collect(true);
        usleep(200 * 1000);
        ebb_collect(true);
        REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
        printf("    info: %s: %d destructor calls in %d threads; heaps alive %llu before, %llu "
               "after the joins, %llu after a forced collection\n", names[mode],
               atomic_load(&dtor_calls), THREADS, (unsigned long long)alive0,
               (unsigned long long)alive1, (unsigned long long)st.heaps_alive);
        CHECK(atomic_load(&dtor_calls) >= THREADS * PTHREAD_DESTRUCTOR_ITERATIONS,
              "%s: the destructor should run %d times a thread; it ran %d times in all", names[mode],
              PTHREAD_DESTRUCTOR_ITERATIONS, atomic_load(&dtor_calls));
        CHECK(alive1 <= alive0 + 1, "%s: a thread that gets a dead thread's stack should hand "
              "back that thread's heap: %llu alive after %d threads, %llu before", names[mode],
              (unsigned long long)alive1, THREADS, (unsigned long long)alive0);
        CHECK(st.heaps_alive == alive0, "%s: a forced collection should hand back the heaps of "
              "dead threads: %llu alive, %llu before", names[mode],
              (unsigned long long)st.heaps_alive, (unsigned long long)alive0);
    }
    /* A dead thread's heap, then a thread on its stack whose first call is
     * a free into it. */
    pthread_key_t other;
    REQUIRE(pthread_key_create(&other, leave_a_block) == 0, "pthread_key_create failed");
    pthread_key_t saved = dtor_key;
    dtor_key = other;
    A(malloc_trim)(0);
    REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
    uint64_t alive0 = st.heaps_alive;
    size_t stack_size = 256 * KiB;
    void *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(stack != MAP_FAILED, "mmap of a thread stack failed");
    run_on_stack(stack, stack_size, arm_leave_a_block);
    REQUIRE(atomic_load(&leftover_block) != NULL, "the last-round destructor should have allocated");
    run_on_stack(stack, stack_size, free_the_leftover);
    munmap(stack, stack_size);
    REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
    if (st.debug_mode) { /* a debug free does not go by the thread id: the scavenger's turn */
        ebb_collect(true);
        REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
    }
    printf("    info: a free into a dead thread's heap by the next thread on its stack: heaps alive "
           "%llu (before: %llu)\n", (unsigned long long)st.heaps_alive, (unsigned long long)alive0);
    CHECK(st.heaps_alive == alive0, "the free should hand the dead thread's heap back: %llu alive, "
          "%llu before", (unsigned long long)st.heaps_alive, (unsigned long long)alive0);
    pthread_key_delete(other);
    dtor_key = saved;
    /* 5000 allocations in a later destructor: one heap, a segment or two. */
    dtor_mode = DTOR_MANY;
    A(malloc_trim)(0);
    REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
    uint64_t segments0 = st.segments;
    run_on_own_stacks(1);
    REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
    printf("    info: 5000 x malloc(64) in a later destructor: segments %llu -> %llu\n",
           (unsigned long long)segments0, (unsigned long long)st.segments);
    CHECK(st.segments <= segments0 + 2, "5000 x malloc(64) in a destructor after ebb's should "
          "fit in a segment or two; segments went from %llu to %llu",
          (unsigned long long)segments0, (unsigned long long)st.segments);
    pthread_key_delete(dtor_key);
}

/* ------------------------------------------------------------------------
 * A real-time thread waiting for one of ebb's locks lets the holder run.
 * ebb's locks spun and then called sched_yield in a loop; a SCHED_FIFO
 * thread that yields gives its CPU only to real-time threads, so an
 * ordinary thread holding the lock on the same CPU ran only when the
 * kernel's real-time throttling let it (50 ms a second by default; never,
 * with throttling off): measured, a real-time malloc waited 968-1000 ms
 * for a lock held 100 ms. Waiters now sleep in the kernel (futex). The lock
 * is held here by a heap walk whose callback runs 100 ms (the walk visits
 * huge blocks under the huge-block lock; include/ebb.h: its callbacks must
 * not allocate, and this one does not); the real-time thread then mallocs
 * a huge block. Both are on CPU 0, in a child process: its scheduling
 * changes stay there. Not under a sanitizer, whose own threads and locks
 * are not part of what is checked.
 * ------------------------------------------------------------------------ */
static void *rt_huge_block;
static atomic_int rt_in_callback;

static double rt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void rt_hold_in_callback(void *block, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    if (block != rt_huge_block)
        return;
    atomic_store(&rt_in_callback, 1);
    double t0 = rt_now();
    while (rt_now() - t0 < 0.1)
        ; /* runnable throughout: the kernel decides who runs */
}

static bool rt_pin_to_cpu0(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0;
}

static void *rt_walker(void *arg)
{
    (void)arg;
    rt_pin_to_cpu0();
    ebb_heap_walk(NULL, rt_hold_in_callback, NULL);
    return NULL;
}

/* The child: 0 passed, 1 failed, 3 cannot run here (no real-time priority). */
static int rt_child(void)
{
    if (!rt_pin_to_cpu0())
        return 3;
    rt_huge_block = A(malloc)(3 << 20);
    void *cached = A(malloc)(5 << 20);
    if (rt_huge_block == NULL || cached == NULL)
        return 1;
    memset(rt_huge_block, 1, 4096);
    A(free)(cached); /* the real-time malloc takes it from the huge cache, under the lock */
    struct sched_param rt = {.sched_priority = 10}, normal = {.sched_priority = 0};
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt) != 0)
        return 3;
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
    pthread_t w;
    if (pthread_create(&w, NULL, rt_walker, NULL) != 0)
        return 1;
    while (!atomic_load(&rt_in_callback))
        sched_yield();
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt);
    double t0 = rt_now();
    void *p = A(malloc)(5 << 20);
    double waited = rt_now() - t0;
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
    pthread_join(w, NULL);
    printf("    info: a SCHED_FIFO malloc waited %.0f ms for a lock held 100 ms by an ordinary "
           "thread on its CPU\n", waited * 1000);
    A(free)(p);
    return p != NULL && waited < 0.5 ? 0 : 1;
}

static void a_real_time_thread_waiting_for_a_lock_lets_its_holder_run(void)
{
    if (SANITIZED) {
        SKIP_CHECK("under a sanitizer: its threads and locks are not what this checks");
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork failed: %s", strerror(errno));
    if (pid == 0)
        _exit(rt_child());
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
        SKIP_CHECK("no SCHED_FIFO or CPU affinity here (not root, or a container that refuses it)");
        return;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a real-time thread waiting for a lock held by an ordinary thread on its CPU should get "
          "it once the holder is done (100 ms), not when real-time throttling lets the holder run: "
          "status %d (the wait is above)", status);
}

/* A segment an exited thread left (abandoned) holds a large block L and a
 * small one; another thread reclaims it for a small malloc, uses it, and
 * goes to sleep. When main then frees L, the segment is entirely free, and
 * its sleeping owner must let it go: the free has to tell the owner's heap.
 * (Review finding: the reclaim named the new owner in the small pages only,
 * so the large page's free told no one, and the segment stayed in use for
 * as long as the reclaimer slept.) */
static void *reclaim_large, *reclaim_small;
static atomic_int reclaim_phase;

static void *leave_a_large_block(void *unused)
{
    (void)unused;
    reclaim_large = A(malloc)(300000);
    memset(reclaim_large, 1, 4096);
    reclaim_small = A(malloc)(100);
    return NULL;
}

static void *reclaim_then_sleep(void *unused)
{
    (void)unused;
    void *x = A(malloc)(100);       /* reclaims the abandoned segment: its page has room */
    void *a = A(malloc)(2000000);   /* fits beside the large block */
    void *b = A(malloc)(2000000);   /* does not: a second segment */
    A(free)(a);
    A(free)(x);
    atomic_store(&reclaim_phase, 1);
    while (atomic_load(&reclaim_phase) < 2)
        usleep(10 * 1000);
    A(free)(b);
    return NULL;
}

static void a_reclaimed_segment_is_released_when_another_thread_frees_its_large_block(void)
{
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
    if (st.debug_mode) {
        SKIP_CHECK("debug mode's quarantine holds the frees this sequence relies on");
        return;
    }
    A(free)(A(malloc)(1));
    A(malloc_trim)(0);
    pthread_t owner, reclaimer;
    REQUIRE(pthread_create(&owner, NULL, leave_a_large_block, NULL) == 0, "pthread_create failed");
    pthread_join(owner, NULL);
    atomic_store(&reclaim_phase, 0);
    REQUIRE(pthread_create(&reclaimer, NULL, reclaim_then_sleep, NULL) == 0, "pthread_create failed");
    while (atomic_load(&reclaim_phase) < 1)
        usleep(1000);
    A(free)(reclaim_small);
    usleep(300 * 1000);
    REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
    uint64_t in_use0 = st.segments - st.segments_cached, abandoned0 = st.segments_abandoned;
    A(free)(reclaim_large); /* the reclaimed segment is entirely free now */
    uint64_t in_use = in_use0;
    for (int waited = 0; waited < 3000 && in_use >= in_use0; waited += 20) {
        usleep(20 * 1000);
        REQUIRE(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
        in_use = st.segments - st.segments_cached;
    }
    printf("    info: segments in use (not cached) %llu before the free, %llu after; %llu "
           "abandoned before\n", (unsigned long long)in_use0, (unsigned long long)in_use,
           (unsigned long long)abandoned0);
    CHECK(abandoned0 == 0, "the sleeping thread should have reclaimed the abandoned segment; "
          "%llu are still abandoned", (unsigned long long)abandoned0);
    CHECK(in_use < in_use0, "the entirely free segment of a sleeping owner should be released "
          "within 3 s of the free of its last (large) block: %llu segments in use before, %llu "
          "after", (unsigned long long)in_use0, (unsigned long long)in_use);
    atomic_store(&reclaim_phase, 2);
    pthread_join(reclaimer, NULL);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rss_at_start = check_anon_rss();
    /* First: which segment the sleeping thread reclaims depends on what
     * the other cases left abandoned. */
    RUN_CASE(a_reclaimed_segment_is_released_when_another_thread_frees_its_large_block);
    RUN_CASE(stress_2_threads_random_sizes_cross_thread_frees);
    RUN_CASE(stress_8_threads_random_sizes_cross_thread_frees);
    RUN_CASE(malloc_trim_after_threads_exit_returns_their_memory);
    RUN_CASE(malloc_trim_returns_pages_freed_remotely_while_their_owner_sleeps);
    RUN_CASE(malloc_trim_returns_pages_freed_after_their_owner_exited);
    RUN_CASE(producer_consumer_pair_reuses_memory_freed_by_the_consumer);
    RUN_CASE(thread_that_only_frees_blocks_allocated_by_main);
    RUN_CASE(threads_exit_holding_blocks_that_others_free_later);
    RUN_CASE(bursts_with_idle_gaps_while_the_scavenger_visits);
    RUN_CASE(fifo_rings_above_1_kib_while_the_scavenger_visits);
    RUN_CASE(key_destructors_that_allocate_leave_no_heap_behind);
    RUN_CASE(a_real_time_thread_waiting_for_a_lock_lets_its_holder_run);
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    if (ebb_stats_get(&st) == 0 && st.debug_mode)
        RUN_CASE(verify_beside_the_stress); /* ebb_debug_verify does nothing in release mode */
    return check_finish();
}
