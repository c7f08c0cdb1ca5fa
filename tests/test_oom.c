/*
 * test_oom.c — the failure contract when memory runs out (SPEC.md, "Failure
 * contract"). Linked with build/libebb.a so it can reach the OS layer's test
 * hooks (hidden symbols, resolvable in a static link):
 *
 *   os_inject_failures(skip, count): after `skip` more successful OS memory
 *       requests (mmap/mremap), fail the next `count` (< 0: all) with ENOMEM;
 *       (0, 0) turns injection off.
 *   os_map_calls(): OS memory requests made so far.
 *
 * Checks: with the OS refusing, small, large and huge allocations (and every
 * other allocating function) return NULL with ENOMEM; a failed realloc leaves
 * the old block intact; allocation works again afterwards; size overflows fail
 * with ENOMEM without any OS request; and under a real RLIMIT_AS (ulimit -v)
 * allocating until NULL gives NULL+ENOMEM, not a crash, and after freeing
 * everything allocation succeeds again.
 */
#include "check.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>

#include "ebb.h"

extern void os_inject_failures(long skip, long count);
extern unsigned long os_map_calls(void);

static void inject_forever(void)
{
    os_inject_failures(0, -1);
}

static void inject_off(void)
{
    os_inject_failures(0, 0);
}

/* Pointer storage that does not come from the allocator under test. */
#define PTR_CAP ((size_t)8 << 20)
static void **ptrs;

static void setup_ptrs(void)
{
    if (!ptrs) {
        ptrs = mmap(NULL, PTR_CAP * sizeof(void *), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (ptrs == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
    }
}

/* ------------------------------------------------------------------------ */

static void os_map_calls_counts_os_requests(void)
{
    ebb_free(ebb_malloc(100));
    unsigned long c0 = os_map_calls();
    void *p = ebb_malloc(64 * MiB);
    unsigned long c1 = os_map_calls();
    REQUIRE(p != NULL, "ebb_malloc(64 MiB): expected a block");
    ebb_free(p);
    CHECK(c1 > c0, "expected ebb_malloc(64 MiB) to make an OS request (os_map_calls %lu -> %lu); "
          "without that the no-request checks below prove nothing", c0, c1);
}

static void overflowing_requests_fail_with_ENOMEM_before_any_os_request(void)
{
    void *keep = ebb_malloc(100); /* warm: the thread's heap exists */
    REQUIRE(keep, "ebb_malloc(100): expected a block");
    memset(keep, 0x3c, 100);
    const size_t big = (size_t)1 << 32;
#define OVERFLOW_CASE(expr)                                                               \
    do {                                                                                  \
        unsigned long c0_ = os_map_calls();                                               \
        errno = 0;                                                                        \
        void *r_ = (expr);                                                                \
        int e_ = errno;                                                                   \
        unsigned long c1_ = os_map_calls();                                               \
        CHECK(r_ == NULL && e_ == ENOMEM, "%s: expected NULL with ENOMEM, got %p with errno " \
              "%d (%s)", #expr, r_, e_, strerror(e_));                                    \
        CHECK(c1_ == c0_, "%s: expected no OS memory request, os_map_calls went %lu -> %lu", \
              #expr, c0_, c1_);                                                           \
        if (r_)                                                                           \
            ebb_free(r_);                                                                 \
    } while (0)
    OVERFLOW_CASE(ebb_calloc(SIZE_MAX / 2, 3));
    OVERFLOW_CASE(ebb_calloc(SIZE_MAX, SIZE_MAX));
    OVERFLOW_CASE(ebb_calloc(big, big));
    OVERFLOW_CASE(ebb_calloc(SIZE_MAX / 16 + 1, 16));
    OVERFLOW_CASE(ebb_reallocarray(keep, SIZE_MAX / 2, 3));
    OVERFLOW_CASE(ebb_reallocarray(keep, big, big));
    OVERFLOW_CASE(ebb_reallocarray(NULL, SIZE_MAX / 2, 3));
    OVERFLOW_CASE(ebb_aligned_alloc(4096, SIZE_MAX - 100));
    OVERFLOW_CASE(ebb_aligned_alloc(MiB, SIZE_MAX - MiB / 2));
    OVERFLOW_CASE(ebb_aligned_alloc(64, SIZE_MAX));
    OVERFLOW_CASE(ebb_aligned_alloc((size_t)1 << 63, 1));
    OVERFLOW_CASE(ebb_memalign(4096, SIZE_MAX - 100));
    OVERFLOW_CASE(ebb_valloc(SIZE_MAX - 100));
    OVERFLOW_CASE(ebb_pvalloc(SIZE_MAX - 100));
    OVERFLOW_CASE(ebb_malloc(SIZE_MAX));
    OVERFLOW_CASE(ebb_malloc(SIZE_MAX - 4095));
    OVERFLOW_CASE(ebb_malloc((size_t)PTRDIFF_MAX + 1));
    OVERFLOW_CASE(ebb_calloc(1, (size_t)PTRDIFF_MAX + 1));
    OVERFLOW_CASE(ebb_realloc(keep, SIZE_MAX));
    OVERFLOW_CASE(ebb_realloc(keep, (size_t)PTRDIFF_MAX + 1));
#undef OVERFLOW_CASE
    unsigned long c0 = os_map_calls();
    void *q = (void *)(uintptr_t)0x77;
    errno = EDOM;
    int r = ebb_posix_memalign(&q, 4096, SIZE_MAX - 100);
    CHECK(r == ENOMEM, "ebb_posix_memalign(4096, SIZE_MAX - 100): expected ENOMEM, got %d", r);
    CHECK(q == (void *)(uintptr_t)0x77, "ebb_posix_memalign failure: expected *p untouched");
    CHECK(errno == EDOM, "ebb_posix_memalign failure: expected errno unchanged, got %d", errno);
    CHECK(os_map_calls() == c0, "ebb_posix_memalign(4096, SIZE_MAX - 100): expected no OS "
          "request, os_map_calls went %lu -> %lu", c0, os_map_calls());
    CHECK(check_all_bytes(keep, 100, 0x3c) == 100, "expected the block passed to the failed "
          "reallocs intact");
    ebb_free(keep);
}

/* Allocate `size` until NULL (at most `max` blocks) with the OS refusing.
 * Returns the number allocated before the failure; *failed says whether a
 * NULL came, *err its errno. Frees everything (after turning injection off). */
static size_t exhaust(size_t size, size_t max, bool *failed, int *err, bool touch_all)
{
    setup_ptrs();
    size_t n = 0;
    *failed = false;
    *err = 0;
    inject_forever();
    while (n < max && n < PTR_CAP) {
        errno = 0;
        void *p = ebb_malloc(size);
        if (!p) {
            *failed = true;
            *err = errno;
            break;
        }
        if (touch_all)
            memset(p, 0x11, size);
        else
            *(volatile char *)p = 1;
        ptrs[n++] = p;
    }
    inject_off();
    for (size_t i = 0; i < n; i++)
        ebb_free(ptrs[i]);
    return n;
}

struct small_oom_result {
    size_t count;
    bool failed;
    int err;
    void *first;      /* first malloc of a fresh thread under injection */
    int first_errno;
    bool first_ok;    /* that block (if any) was usable */
};

static void *small_oom_thread(void *argp)
{
    struct small_oom_result *r = argp;
    /* A fresh thread's very first allocation while the OS refuses: it may be
     * served (pooled heaps, reclaimed pages) or fail with ENOMEM, never crash. */
    inject_forever();
    errno = 0;
    r->first = ebb_malloc(48);
    r->first_errno = errno;
    inject_off();
    if (r->first) {
        memset(r->first, 0x22, 48);
        r->first_ok = ebb_malloc_usable_size(r->first) >= 48;
        ebb_free(r->first);
    }
    /* With the OS answering, the thread gets its heap and first pages. */
    void *warm = ebb_malloc(256);
    if (warm)
        memset(warm, 0x23, 256);
    /* Now exhaust what this thread's heap and the caches hold, so that the
     * allocator must ask the OS. 512 MiB of 256-byte blocks at most: a
     * segment is a few MiB. */
    r->count = exhaust(256, 512 * MiB / 256, &r->failed, &r->err, true);
    ebb_free(warm);
    return NULL;
}

static void small_allocation_fails_with_ENOMEM_when_the_os_refuses(void)
{
    struct small_oom_result r = {0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, small_oom_thread, &r) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(r.first != NULL || r.first_errno == ENOMEM, "a fresh thread's first ebb_malloc(48) "
          "with the OS refusing: expected a block or NULL with ENOMEM, got NULL with errno %d",
          r.first_errno);
    CHECK(r.first == NULL || r.first_ok, "a fresh thread's first block: usable size too small");
    printf("    %zu x 256 bytes served from memory already mapped, then %s\n", r.count,
           r.failed ? "NULL" : "no failure");
    CHECK(r.failed, "ebb_malloc(256) with every OS request failing: expected NULL once the "
          "mapped memory is used up, got %zu blocks (128 MiB) without a failure", r.count);
    CHECK(!r.failed || r.err == ENOMEM, "ebb_malloc(256) failure: expected errno ENOMEM, got %d "
          "(%s)", r.err, strerror(r.err));
    /* Same in the main thread, whose heap is older. */
    bool failed;
    int err;
    size_t n = exhaust(100, 512 * MiB / 100, &failed, &err, true);
    printf("    main thread: %zu x 100 bytes served from memory already mapped, then %s\n", n,
           failed ? "NULL" : "no failure");
    CHECK(failed && err == ENOMEM, "main thread, ebb_malloc(100) until NULL with the OS refusing: "
          "expected NULL with ENOMEM, got %s after %zu blocks (errno %d)",
          failed ? "NULL" : "no failure", n, err);
    void *p = ebb_malloc(100);
    CHECK(p != NULL, "ebb_malloc(100) after injection ended: expected a block, got NULL");
    ebb_free(p);
}

static void large_allocation_fails_with_ENOMEM_when_the_os_refuses(void)
{
    bool failed;
    int err;
    size_t n = exhaust(MiB, 2048, &failed, &err, false);
    printf("    %zu x 1 MiB served before the failure\n", n);
    CHECK(failed && err == ENOMEM, "ebb_malloc(1 MiB) until NULL with the OS refusing: expected "
          "NULL with ENOMEM, got %s after %zu blocks (errno %d)", failed ? "NULL" : "no failure",
          n, err);
    void *p = ebb_malloc(MiB);
    CHECK(p != NULL, "ebb_malloc(1 MiB) after injection ended: expected a block");
    ebb_free(p);
}

static void huge_allocation_fails_with_ENOMEM_when_the_os_refuses(void)
{
    bool failed;
    int err;
    size_t n = exhaust(64 * MiB, 64, &failed, &err, false);
    CHECK(failed && err == ENOMEM, "ebb_malloc(64 MiB) with the OS refusing: expected NULL with "
          "ENOMEM, got %s after %zu blocks (errno %d)", failed ? "NULL" : "no failure", n, err);
    void *p = ebb_malloc(64 * MiB);
    CHECK(p != NULL, "ebb_malloc(64 MiB) after injection ended: expected a block");
    ebb_free(p);
}

static void every_allocating_function_fails_with_ENOMEM_when_the_os_refuses(void)
{
    const size_t big = 96 * MiB; /* more than anything mapped or cached */
    inject_forever();
#define INJECTED_CASE(expr)                                                               \
    do {                                                                                  \
        errno = 0;                                                                        \
        void *r_ = (expr);                                                                \
        int e_ = errno;                                                                   \
        CHECK(r_ == NULL && e_ == ENOMEM, "%s with the OS refusing: expected NULL with "  \
              "ENOMEM, got %p with errno %d (%s)", #expr, r_, e_, strerror(e_));          \
        if (r_)                                                                           \
            ebb_free(r_);                                                                 \
    } while (0)
    INJECTED_CASE(ebb_malloc(big));
    INJECTED_CASE(ebb_calloc(1, big));
    INJECTED_CASE(ebb_calloc(big / 16, 16));
    INJECTED_CASE(ebb_realloc(NULL, big));
    INJECTED_CASE(ebb_reallocarray(NULL, big / 8, 8));
    INJECTED_CASE(ebb_aligned_alloc(4096, big));
    INJECTED_CASE(ebb_aligned_alloc(16 * MiB, big));
    INJECTED_CASE(ebb_memalign(MiB, big));
    INJECTED_CASE(ebb_valloc(big));
    INJECTED_CASE(ebb_pvalloc(big));
#undef INJECTED_CASE
    void *q = (void *)(uintptr_t)0x55;
    errno = EDOM;
    int r = ebb_posix_memalign(&q, 4096, big);
    int e = errno;
    inject_off();
    CHECK(r == ENOMEM, "ebb_posix_memalign(4096, 96 MiB) with the OS refusing: expected ENOMEM, "
          "got %d", r);
    CHECK(q == (void *)(uintptr_t)0x55, "ebb_posix_memalign failure: expected *p untouched, got "
          "%p", q);
    CHECK(e == EDOM, "ebb_posix_memalign failure: expected errno unchanged (EDOM), got %d (%s)", e,
          strerror(e));
}

static void failed_realloc_keeps_the_old_block(void)
{
    const size_t from[] = {1000, 500 * KiB, 8 * MiB};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++) {
        size_t s = from[i];
        uint8_t *p = ebb_malloc(s);
        REQUIRE(p, "ebb_malloc(%zu): expected a block", s);
        check_fill(p, s, s);
        size_t u = ebb_malloc_usable_size(p);
        inject_forever();
        errno = 0;
        void *q = ebb_realloc(p, 300 * MiB);
        int e = errno;
        void *q2 = ebb_reallocarray(p, 300, MiB);
        int e2 = errno;
        inject_off();
        CHECK(q == NULL && e == ENOMEM, "ebb_realloc(%zu-byte block, 300 MiB) with the OS "
              "refusing: expected NULL with ENOMEM, got %p with errno %d", s, q, e);
        CHECK(q2 == NULL && e2 == ENOMEM, "ebb_reallocarray(%zu-byte block, 300, 1 MiB) with the "
              "OS refusing: expected NULL with ENOMEM, got %p with errno %d", s, q2, e2);
        if (q || q2) {
            ebb_free(q ? q : q2);
            continue;
        }
        size_t bad = check_verify(p, s, s);
        CHECK(bad == s, "failed ebb_realloc of a %zu-byte block: expected it intact, byte %zu "
              "changed", s, bad);
        CHECK(ebb_malloc_usable_size(p) == u, "failed ebb_realloc: expected usable size %zu "
              "unchanged, got %zu", u, ebb_malloc_usable_size(p));
        /* Injection over: the same realloc now succeeds and keeps the data. */
        uint8_t *r = ebb_realloc(p, 300 * MiB);
        REQUIRE(r, "ebb_realloc(%zu-byte block, 300 MiB) after injection: expected a block", s);
        bad = check_verify(r, s, s);
        CHECK(bad == s, "ebb_realloc to 300 MiB: expected the %zu bytes kept, byte %zu changed",
              s, bad);
        r[300 * MiB - 1] = 1;
        ebb_free(r);
    }
}

static void allocation_works_again_after_injection_ends(void)
{
    inject_forever();
    void *x = ebb_malloc(700 * MiB);
    int e = errno;
    inject_off();
    CHECK(x == NULL && e == ENOMEM, "ebb_malloc(700 MiB) with the OS refusing: expected NULL "
          "with ENOMEM, got %p (errno %d)", x, e);
    ebb_free(x);
    const size_t sizes[] = {1, 100, 4096, 100 * KiB, MiB, 3 * MiB, 200 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *p = ebb_calloc(1, sizes[i]);
        CHECK(p != NULL, "ebb_calloc(1, %zu) after injection: expected a block", sizes[i]);
        if (p) {
            CHECK(p[0] == 0 && p[sizes[i] - 1] == 0, "ebb_calloc(1, %zu): expected zeroes",
                  sizes[i]);
            p[sizes[i] - 1] = 1;
        }
        ebb_free(p);
    }
    /* And from a new thread, whose heap comes after the failures. */
    pthread_t t;
    struct small_oom_result r = {0};
    REQUIRE(pthread_create(&t, NULL, small_oom_thread, &r) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(r.failed && r.err == ENOMEM, "second fresh thread: expected the same ENOMEM behaviour");
}

/* ------------------------------------------------------------------------
 * Under a real address-space limit (ulimit -v)
 * ---------------------------------------------------------------------- */


/* In the child: allocate `size` until NULL; 0 if that went as it should. */
static int child_fill_until_null(size_t size, const char *label)
{
    size_t n = 0;
    int err = 0;
    for (;;) {
        if (n == PTR_CAP) {
            fprintf(stderr, "    child: %s: %zu blocks and no NULL under RLIMIT_AS\n", label, n);
            return 1;
        }
        errno = 0;
        uint8_t *p = ebb_malloc(size);
        if (!p) {
            err = errno;
            break;
        }
        if (size <= 4096)
            memset(p, 0x44, size);
        else
            p[0] = p[size - 1] = 0x44;
        ptrs[n++] = p;
    }
    fprintf(stderr, "    child: %s: NULL after %zu blocks (%zu MiB), errno %d\n", label, n,
            n * size / MiB, err);
    for (size_t i = 0; i < n; i++)
        ebb_free(ptrs[i]);
    if (err != ENOMEM) {
        fprintf(stderr, "    child: %s: expected errno ENOMEM, got %d (%s)\n", label, err,
                strerror(err));
        return 1;
    }
    if (n == 0) {
        fprintf(stderr, "    child: %s: not even one block fitted\n", label);
        return 1;
    }
    /* After freeing everything, a good share of it is available again. */
    size_t want = 96 * MiB / size + 1, got = 0;
    for (; got < want; got++) {
        ptrs[got] = ebb_malloc(size);
        if (!ptrs[got])
            break;
        *(volatile uint8_t *)ptrs[got] = 1;
    }
    for (size_t i = 0; i < got; i++)
        ebb_free(ptrs[i]);
    if (got < want) {
        fprintf(stderr, "    child: %s: after freeing everything, only %zu of %zu blocks (96 "
                "MiB) could be allocated again (errno %d)\n", label, got, want, errno);
        return 1;
    }
    return 0;
}

static int rlimit_child(void)
{
    long vm = check_vm_size();
    if (vm <= 0) {
        fprintf(stderr, "    child: cannot read VmSize\n");
        return 1;
    }
    struct rlimit rl = {(rlim_t)vm + 256 * MiB, (rlim_t)vm + 256 * MiB};
    if (setrlimit(RLIMIT_AS, &rl) != 0) {
        perror("setrlimit");
        return 1;
    }
    int bad = 0;
    bad |= child_fill_until_null(100, "100-byte blocks");
    bad |= child_fill_until_null(64 * KiB, "64 KiB blocks");
    bad |= child_fill_until_null(MiB, "1 MiB blocks");
    bad |= child_fill_until_null(16 * MiB, "16 MiB blocks");
    bad |= child_fill_until_null(100, "100-byte blocks again");
    /* Finally a mix that needs most of the limit: 2 x 64 MiB + 48 x 1 MiB. */
    void *h1 = ebb_malloc(64 * MiB), *h2 = ebb_malloc(64 * MiB);
    if (!h1 || !h2) {
        fprintf(stderr, "    child: 2 x 64 MiB after all phases: got %p %p\n", h1, h2);
        bad = 1;
    }
    for (int i = 0; i < 48 && !bad; i++) {
        ptrs[i] = ebb_malloc(MiB);
        if (!ptrs[i]) {
            fprintf(stderr, "    child: 1 MiB block %d of 48 after all phases: NULL\n", i);
            bad = 1;
        }
    }
    return bad;
}

/* Run fn in a forked child and wait up to timeout_s for it: false (with a
 * failed check) if it could not be forked or had to be killed, else true
 * with its wait status. */
static bool run_in_child(int (*fn)(void), double timeout_s, const char *what, int *status)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn());
    if (pid < 0) {
        CHECK(0, "fork: %s", strerror(errno));
        return false;
    }
    *status = 0;
    if (!check_wait_child(pid, status, timeout_s)) {
        CHECK(0, "the %s child did not finish in %.0f s (killed)", what, timeout_s);
        return false;
    }
    return true;
}

static void rlimit_as_allocate_until_null_then_free_and_allocate_again(void)
{
    setup_ptrs();
    memset(ptrs, 0, 4096); /* fault in before the limit (mapping exists already) */
    int status;
    if (!run_in_child(rlimit_child, 120, "RLIMIT_AS", &status))
        return;
    CHECK(!WIFSIGNALED(status), "under RLIMIT_AS: expected NULL+ENOMEM, the child was killed by "
          "signal %d (%s)", WIFSIGNALED(status) ? WTERMSIG(status) : 0,
          WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "");
    CHECK(!WIFEXITED(status) || WEXITSTATUS(status) == 0, "under RLIMIT_AS: the child reported "
          "failures (exit %d, messages above)", WEXITSTATUS(status));
}

/* In a child: limit its address space (RLIMIT_AS) to what is mapped now
 * plus `extra_mib`; the VmSize it started from (KiB), or -1 with a message. */
static long limit_address_space(long extra_mib)
{
    long vm = check_vm_size();
    if (vm > 0)
        vm /= 1024; /* KiB */
    if (vm <= 0) {
        fprintf(stderr, "    child: cannot read VmSize\n");
        return -1;
    }
    struct rlimit rl = {(rlim_t)(vm + extra_mib * 1024) * 1024, RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &rl) != 0) {
        fprintf(stderr, "    child: setrlimit: %s\n", strerror(errno));
        return -1;
    }
    return vm;
}

/* Run fn in a child (run_in_child) and check that it exited with 0. */
static void expect_child_ok(int (*fn)(void), double timeout_s, const char *what, const char *expected)
{
    setup_ptrs();
    memset(ptrs, 0, 4096); /* fault in before the limit (the mapping exists already) */
    int status;
    if (!run_in_child(fn, timeout_s, what, &status))
        return;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (messages above): status %d",
          expected, status);
}

/* A new huge mapping asks for address space to grow into after it (large.c,
 * huge_room), but only as a wish: under an address-space limit that leaves
 * room for the block and not for the wish, the block is still mapped (review
 * finding: malloc returned NULL with ENOMEM). The blocker makes the request
 * miss its hint (os.c, map_hint) and take the over-mapping path. */
static int room_child(void)
{
    void *volatile first = malloc(100);
    void *blocker = mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (first == NULL || blocker == MAP_FAILED) {
        fprintf(stderr, "    child: setup failed\n");
        return 2;
    }
    if (limit_address_space(48) < 0)
        return 2;
    errno = 0;
    unsigned char *volatile p = malloc((size_t)30 << 20);
    if (p == NULL) {
        fprintf(stderr, "    child: malloc(30 MiB) with 48 MiB of address space left: NULL (%s)\n",
                strerror(errno));
        return 1;
    }
    memset(p, 1, (size_t)30 << 20);
    free(p);
    return 0;
}

static void huge_block_fits_a_limit_that_leaves_it_no_room_to_grow(void)
{
    expect_child_ok(room_child, 60, "RLIMIT_AS",
                    "malloc(30 MiB) should succeed with 48 MiB of address space left");
}

/* SPEC ("when the OS refuses memory, ebb first gives back its own caches and
 * standby memory and retries"): freed huge blocks wait in the huge cache,
 * mapped, for up to the unmap delay (1 s by default). Under an address-space
 * limit that they fill, small and large requests must still be served: the
 * refused request unmaps the cache and retries. Before, only the segment
 * cache (and, for huge requests, the spares) was given back, and 1 MiB blocks
 * failed with 60 MiB of free huge mappings held. The suite runs this case
 * once more with EBB_UNMAP_DELAY=3600000 (run_tests.sh, oom_huge_cache), so
 * that no purge pass can unmap the cache first. */
static int huge_cache_child(void)
{
    enum { HUGE = 3, SMALL = 75 };
    void *volatile first = malloc(100);
    if (first == NULL) {
        fprintf(stderr, "    child: setup failed\n");
        return 2;
    }
    /* 120 MiB: the 3 x 20 MiB huge blocks, or the 75 x 1 MiB blocks (about
     * 100 MiB of segments, three 1 MiB blocks to a 4 MiB segment), not both. */
    if (limit_address_space(120) < 0)
        return 2;
    void *huge[HUGE];
    for (int i = 0; i < HUGE; i++) {
        huge[i] = malloc((size_t)20 << 20);
        if (huge[i] == NULL) {
            fprintf(stderr, "    child: malloc(20 MiB) #%d under the limit: NULL (%s)\n", i,
                    strerror(errno));
            return 2;
        }
        memset(huge[i], 1, 4096);
    }
    for (int i = 0; i < HUGE; i++)
        free(huge[i]); /* into the huge cache: 60 MiB of address space */
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    ebb_stats_get(&st);
    if (st.huge_cached != HUGE) {
        fprintf(stderr, "    child: expected the %d freed mappings in the huge cache, it holds %llu\n",
                HUGE, (unsigned long long)st.huge_cached);
        return 2;
    }
    static void *small[SMALL];
    int bad = 0;
    for (int i = 0; i < SMALL && !bad; i++) {
        small[i] = malloc((size_t)1 << 20);
        if (small[i] == NULL) {
            fprintf(stderr, "    child: malloc(1 MiB) #%d of %d with %d x 20 MiB freed into the "
                    "huge cache: NULL (%s)\n", i, SMALL, HUGE, strerror(errno));
            bad = 1;
        } else {
            memset(small[i], 2, 4096);
        }
    }
    for (int i = 0; i < SMALL; i++)
        free(small[i]);
    return bad;
}

static void refused_requests_unmap_the_huge_cache_and_retry(void)
{
    expect_child_ok(huge_cache_child, 60, "RLIMIT_AS huge cache",
                    "75 x malloc(1 MiB) should succeed under RLIMIT_AS once the 60 MiB of freed "
                    "huge mappings are given back");
}

/* A request the OS refuses is often retried another way: a smaller segment
 * region, a huge mapping without room to grow, the same request after the
 * caches are given back. A malloc that then succeeds returns with errno as
 * the caller left it, as glibc's does (review finding: under RLIMIT_AS,
 * "malloc(1 MiB) #45 succeeded with errno 12", because the first refusal's
 * ENOMEM stayed). Programs that read errno after a call that returned a
 * block, or that check `errno == 0` after a sequence of calls, saw a failure
 * that did not happen. */
static int errno_child(void)
{
    static const size_t sizes[] = {MiB, 64 * KiB, 100, 20 * MiB};
    if (limit_address_space(120) < 0)
        return 2;
    /* Three freed huge mappings in the cache, within the limit, so that
     * some refusals are followed by a retry after purge_release_caches. */
    void *huge[3];
    for (int i = 0; i < 3; i++)
        huge[i] = ebb_malloc(20 * MiB);
    for (int i = 0; i < 3; i++)
        ebb_free(huge[i]);
    int bad = 0;
    size_t successes = 0, refusals = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = 0;
        for (; n < PTR_CAP; n++) {
            errno = EDOM;
            void *p = ebb_malloc(sizes[k]);
            int e = errno;
            if (p == NULL) {
                refusals++;
                if (e != ENOMEM) {
                    fprintf(stderr, "    child: malloc(%zu) #%zu: NULL with errno %d, expected "
                            "ENOMEM\n", sizes[k], n, e);
                    bad = 1;
                }
                break;
            }
            successes++;
            memset(p, 3, sizes[k] < 4096 ? sizes[k] : 4096);
            ptrs[n] = p;
            if (e != EDOM) {
                fprintf(stderr, "    child: malloc(%zu) #%zu succeeded with errno %d (%s); "
                        "expected it unchanged (EDOM)\n", sizes[k], n, e, strerror(e));
                bad = 1;
                break;
            }
        }
        for (size_t i = 0; i < n; i++)
            ebb_free(ptrs[i]);
        if (bad)
            break;
    }
    if (!bad && (refusals == 0 || successes < 100)) {
        fprintf(stderr, "    child: %zu blocks and %zu refusals: the limit did not bite\n",
                successes, refusals);
        bad = 2;
    }
    return bad;
}

static void a_block_served_after_a_refused_request_leaves_errno_alone(void)
{
    expect_child_ok(errno_child, 120, "RLIMIT_AS errno",
                    "under RLIMIT_AS every malloc that succeeds should leave errno unchanged and "
                    "every one that fails should set ENOMEM");
    /* The same with the injector: one refused request at each point of a
     * sequence of allocations of every kind, whatever fallback follows it. */
    static const size_t sizes[] = {100, 3000, 64 * KiB, 600 * KiB, MiB, 3 * MiB, 40 * MiB};
    size_t nsizes = sizeof sizes / sizeof sizes[0];
    int wrong = 0;
    for (long skip = 0; skip < 12 && !wrong; skip++) {
        void *held[sizeof sizes / sizeof sizes[0]] = {0};
        os_inject_failures(skip, 1);
        for (size_t k = 0; k < nsizes; k++) {
            errno = EDOM;
            held[k] = ebb_malloc(sizes[k]);
            int e = errno;
            if (held[k] != NULL && e != EDOM) {
                CHECK(0, "with the OS refusing request %ld: ebb_malloc(%zu) succeeded with errno "
                      "%d (%s), expected it unchanged (EDOM)", skip, sizes[k], e, strerror(e));
                wrong = 1;
            } else if (held[k] == NULL && e != ENOMEM) {
                CHECK(0, "with the OS refusing request %ld: ebb_malloc(%zu) failed with errno "
                      "%d, expected ENOMEM", skip, sizes[k], e);
                wrong = 1;
            }
        }
        inject_off();
        for (size_t k = 0; k < nsizes; k++)
            ebb_free(held[k]);
    }
}

/* A request that no mapping can serve, like a program probing how much it
 * can get with malloc(1 << 47) (here 1 << 62, above the address space of
 * every 64-bit target), fails at once and leaves the huge cache as
 * it was (review finding: each such probe took the biggest cached mapping,
 * failed to grow it, and the failure path then unmapped it with the rest of
 * the cache; 200 probes cost a million page faults instead of ten thousand,
 * as every later block faulted its pages in afresh). The same for a request
 * above an address-space limit: giving the cache back cannot make it fit.
 * Requests that do fit still get the cache given back (the case above). */
static void probe_huge_cache(size_t probe, int probes, const char *what, int *bad)
{
    enum { HUGE = 3 };
    void *huge[HUGE];
    for (int i = 0; i < HUGE; i++) {
        huge[i] = ebb_malloc(20 * MiB);
        if (huge[i] == NULL) {
            fprintf(stderr, "    %s: malloc(20 MiB): NULL\n", what);
            *bad = 1;
            return;
        }
        memset(huge[i], 1, 4096);
    }
    for (int i = 0; i < HUGE; i++)
        ebb_free(huge[i]);
    struct ebb_stats before = {.version = EBB_STATS_VERSION}, after = before;
    ebb_stats_get(&before);
    unsigned long calls = os_map_calls();
    double t0 = check_now();
    int wrong = 0;
    for (int i = 0; i < probes; i++) {
        errno = 0;
        void *p = ebb_malloc(probe);
        if (p != NULL || errno != ENOMEM)
            wrong++;
        ebb_free(p);
    }
    double took_ms = (check_now() - t0) * 1000;
    ebb_stats_get(&after);
    if (wrong) {
        fprintf(stderr, "    %s: %d of %d x malloc(%zu) did not fail with ENOMEM\n", what, wrong,
                probes, probe);
        *bad = 1;
    }
    /* A pass could unmap the cache only after the unmap delay (1 s by
     * default; an hour in the suite's second run, oom_huge_cache). */
    if (after.huge_cached != before.huge_cached || after.huge_cached_bytes != before.huge_cached_bytes) {
        fprintf(stderr, "    %s: %d x malloc(%zu) changed the huge cache from %llu mappings "
                "(%llu bytes) to %llu (%llu bytes), in %.0f ms\n", what, probes, probe,
                (unsigned long long)before.huge_cached, (unsigned long long)before.huge_cached_bytes,
                (unsigned long long)after.huge_cached, (unsigned long long)after.huge_cached_bytes,
                took_ms);
        *bad = 1;
    }
    if (before.huge_cached < HUGE) { /* more: earlier cases' blocks, in debug mode */
        fprintf(stderr, "    %s: expected the %d freed mappings in the huge cache, it holds %llu\n",
                what, HUGE, (unsigned long long)before.huge_cached);
        *bad = 1;
    }
    if (probe > (size_t)1 << 60 && os_map_calls() != calls) {
        fprintf(stderr, "    %s: %d x malloc(%zu) made %lu OS memory requests, expected none\n",
                what, probes, probe, os_map_calls() - calls);
        *bad = 1;
    }
}

static int limit_probe_child(void)
{
    long vm = limit_address_space(120);
    if (vm < 0)
        return 2;
    int bad = 0;
    probe_huge_cache((size_t)(vm + 200 * 1024) * 1024, 20, "above RLIMIT_AS", &bad);
    return bad;
}

static void a_request_that_can_never_fit_keeps_the_huge_cache(void)
{
    int bad = 0;
    probe_huge_cache((size_t)1 << 62, 200, "malloc(1 << 62)", &bad);
    CHECK(!bad, "malloc(1 << 62), larger than any address space, should fail with ENOMEM at once "
          "and leave the huge cache as it was (messages above)");
    expect_child_ok(limit_probe_child, 60, "RLIMIT_AS probe",
                    "a request larger than RLIMIT_AS should fail with ENOMEM and leave the huge "
                    "cache as it was");
}

/* Linux's default policy (vm.overcommit_memory = 0, heuristic) refuses one
 * mapping bigger than RAM and swap together, and glibc's malloc then returns
 * NULL with ENOMEM; ebb maps with MAP_NORESERVE, which skips that test, so it
 * makes the test itself (os.c, "The kernel's overcommit heuristic"). Review
 * finding: malloc(64 GiB) on a machine of 23 GiB returned a block, which the
 * program could never fill. A request that fits is still served, and so is a
 * small block with an alignment bigger than RAM (its mapping is sparse). */
static void blocks_bigger_than_ram_and_swap_are_refused_under_heuristic_overcommit(void)
{
    char mode[8] = "";
    int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY);
    ssize_t got = fd >= 0 ? read(fd, mode, sizeof mode - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (got < 1 || mode[0] != '0') {
        SKIP_CHECK("vm.overcommit_memory is \"%.1s\", not 0 (heuristic): the kernel decides itself",
                   got < 1 ? "?" : mode);
        return;
    }
    struct sysinfo si;
    REQUIRE(sysinfo(&si) == 0, "sysinfo failed: errno %d", errno);
    size_t ram_swap = ((size_t)si.totalram + si.totalswap) * (si.mem_unit ? si.mem_unit : 1);
    size_t big = ram_swap + ram_swap / 2;
    REQUIRE(big > ram_swap && big < (size_t)1 << 46, "RAM and swap: %zu bytes, an unusual machine", ram_swap);

    errno = 0;
    void *p = ebb_malloc(big);
    CHECK(p == NULL && errno == ENOMEM, "malloc(%zu), 1.5 x RAM and swap: %p, errno %d; expected NULL, "
          "ENOMEM", big, p, errno);
    ebb_free(p);
    errno = 0;
    p = ebb_calloc(1, big);
    CHECK(p == NULL && errno == ENOMEM, "calloc(1, %zu): %p, errno %d; expected NULL, ENOMEM", big, p,
          errno);
    ebb_free(p);
    p = NULL;
    int r = ebb_posix_memalign(&p, (size_t)1 << 21, big);
    CHECK(r == ENOMEM && p == NULL, "posix_memalign(2 MiB, %zu): %d, %p; expected ENOMEM", big, r, p);
    /* Alignments above a segment too: the padding is not tested, the block
     * is (review finding: these were served). */
    size_t big_aligns[] = {8 * MiB, (size_t)1 << 30};
    for (size_t k = 0; k < sizeof big_aligns / sizeof big_aligns[0]; k++) {
        p = NULL;
        r = ebb_posix_memalign(&p, big_aligns[k], big);
        CHECK(r == ENOMEM && p == NULL, "posix_memalign(%zu MiB, %zu): %d, %p; expected ENOMEM",
              big_aligns[k] / MiB, big, r, p);
        ebb_free(p);
        errno = 0;
        p = ebb_aligned_alloc(big_aligns[k], big);
        CHECK(p == NULL && errno == ENOMEM, "aligned_alloc(%zu MiB, %zu): %p, errno %d; expected NULL, "
              "ENOMEM", big_aligns[k] / MiB, big, p, errno);
        ebb_free(p);
    }

    /* realloc to it fails and keeps the block, small or huge. */
    size_t sizes[] = {100, 8 * MiB};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned char *q = ebb_malloc(sizes[k]);
        REQUIRE(q != NULL, "malloc(%zu) failed", sizes[k]);
        memset(q, 'q', sizes[k]);
        errno = 0;
        void *grown = ebb_realloc(q, big);
        CHECK(grown == NULL && errno == ENOMEM, "realloc(%zu-byte block, %zu): %p, errno %d; "
              "expected NULL, ENOMEM", sizes[k], big, grown, errno);
        size_t changed = 0;
        for (size_t i = 0; i < sizes[k]; i++)
            changed += q[i] != 'q';
        CHECK(changed == 0, "the %zu-byte block changed in %zu bytes after the refused realloc",
              sizes[k], changed);
        ebb_free(grown ? grown : q);
    }

    /* What fits is served: a quarter of it (never touched), and 4 KiB aligned
     * to 32 GiB. */
    p = ebb_malloc(ram_swap / 4);
    CHECK(p != NULL, "malloc(%zu), a quarter of RAM and swap: NULL, errno %d", ram_swap / 4, errno);
    ebb_free(p);
    size_t align = (size_t)1 << 35;
    p = ebb_aligned_alloc(align, 4096);
    CHECK(p != NULL && ((uintptr_t)p & (align - 1)) == 0, "aligned_alloc(32 GiB, 4096): %p, errno %d; "
          "expected an aligned block", p, errno);
    ebb_free(p);

    int bad = 0;
    probe_huge_cache(big, 20, "above RAM and swap", &bad);
    CHECK(!bad, "a request above RAM and swap should fail with ENOMEM and leave the huge cache as it "
          "was (messages above)");
}

/* Blocks just freed are memory ebb holds for reuse, and a request the OS
 * refuses must get them first (SPEC, failure contract). In debug mode they
 * wait in the quarantine (16 MiB by default) and the reuse cache, checked
 * and released only when pushed out or after EBB_DEBUG_QUARANTINE_IDLE
 * (1 s): under a limit the program had filled, freeing everything and
 * allocating the same again failed 16 MiB short. The suite runs this file
 * in debug mode too (run_tests.sh, debug_oom). */
/* Allocate `size` bytes until NULL or `cap` blocks, each written; how many.
 * Called from one call site for both passes: in debug mode a new allocation
 * stack could make the trace registry map a chunk of its own, under the same
 * limit. */
static size_t fill_blocks(size_t size, size_t cap, int fill_byte)
{
    size_t n = 0;
    while (n < cap && (ptrs[n] = ebb_malloc(size)) != NULL) {
        memset(ptrs[n], fill_byte, size);
        n++;
    }
    return n;
}

/* realloc growing a huge block under RLIMIT_AS, with the room it needs held
 * by the huge cache: growing where it is needs 30 MiB more, a copy 60 MiB.
 * The cache goes back before the growth is refused (review finding: the
 * first realloc failed, an identical second one succeeded). Debug mode's
 * realloc always copies a block it cannot fit, which this limit cannot
 * hold: there the old block must stay intact, with ENOMEM. */
static int huge_realloc_child(void)
{
    unsigned char *a = ebb_malloc(30 * MiB), *b = ebb_malloc(30 * MiB);
    if (a == NULL || b == NULL)
        return 2;
    memset(a, 'A', 30 * MiB);
    memset(b, 'B', 30 * MiB);
    ebb_free(b); /* 30 MiB waits in the huge cache */
    if (limit_address_space(10) < 0)
        return 2;
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    ebb_stats_get(&st);
    errno = EDOM;
    unsigned char *q = ebb_realloc(a, 60 * MiB);
    int e = errno;
    fprintf(stderr, "    child: realloc(30 MiB -> 60 MiB) under VmSize + 10 MiB: %s, errno %d\n",
            q ? "served" : "NULL", e);
    unsigned char *now = q ? q : a;
    for (size_t i = 0; i < 30 * MiB; i += 4096) {
        if (now[i] != 'A') {
            fprintf(stderr, "    child: byte %zu of the block changed\n", i);
            return 1;
        }
    }
    if (q == NULL && (!st.debug_mode || e != ENOMEM)) {
        fprintf(stderr, "    child: expected the growth to succeed once the huge cache went "
                "back (or, in debug mode, NULL with ENOMEM)\n");
        return 1;
    }
    if (q != NULL && e != EDOM) {
        fprintf(stderr, "    child: a realloc that succeeded changed errno to %d\n", e);
        return 1;
    }
    return 0;
}

static void a_huge_realloc_gets_the_caches_back_before_it_fails(void)
{
    expect_child_ok(huge_realloc_child, 60, "RLIMIT_AS huge realloc",
                    "realloc growing a huge block should get the huge cache's room back first");
}

static int refill_child(void)
{
    if (limit_address_space(120) < 0)
        return 2;
    static const size_t sizes[] = {MiB, 100 * KiB, 2000};
    int bad = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && !bad; k++) {
        size_t size = sizes[k], got[2] = {0, 0};
        int err = 0;
        for (int pass = 0; pass < 2; pass++) {
            errno = 0;
            got[pass] = fill_blocks(size, pass == 0 ? PTR_CAP : got[0], 5 + pass);
            err = errno;
            for (size_t i = 0; i < got[pass]; i++)
                ebb_free(ptrs[i]);
        }
        size_t first = got[0], again = got[1];
        fprintf(stderr, "    child: %zu-byte blocks: %zu fitted, %zu again after freeing them\n",
                size, first, again);
        /* As many again, give or take a slice's worth: the pages of the
         * second pass may lie differently (a page in a segment's first
         * slice holds fewer blocks). The quarantine alone is 16 MiB. */
        size_t slack = 64 * KiB / size > 1 ? 64 * KiB / size : 1;
        if (first * size < 64 * MiB || again + slack < first) {
            fprintf(stderr, "    child: %zu-byte blocks: expected at least 64 MiB to fit and "
                    "as many again after freeing them all, %zu fewer at most (errno %d)\n",
                    size, slack, err);
            bad = 1;
        }
    }
    return bad;
}

static void freed_blocks_are_given_back_before_a_request_fails(void)
{
    expect_child_ok(refill_child, 120, "RLIMIT_AS refill",
                    "under RLIMIT_AS, after freeing every block, as many should fit again");
}

/* The same when another thread freed the blocks: they wait in the owner's
 * pages until it collects them, which it does for a class only when it
 * needs a page of that class. A refused request for another size collects
 * every page first, so that their runs can serve it. */
static size_t remote_count;
static size_t remote_then_size; /* what the child asks for afterwards */

static void *free_all_remotely(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < remote_count; i++)
        ebb_free(ptrs[i]);
    return NULL;
}

static int remote_refill_child(void)
{
    if (limit_address_space(120) < 0)
        return 2;
    remote_count = fill_blocks(2000, PTR_CAP, 7);
    size_t small_bytes = remote_count * 2000;
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY}; /* room for the thread's stack */
    setrlimit(RLIMIT_AS, &rl);
    pthread_t t;
    if (pthread_create(&t, NULL, free_all_remotely, NULL) != 0) {
        fprintf(stderr, "    child: pthread_create failed\n");
        return 2;
    }
    pthread_join(t, NULL);
    if (limit_address_space(0) < 0) /* then the limit again, at what is mapped */
        return 2;
    /* Nothing more may be mapped: the blocks must come from the runs the
     * 2000-byte pages held (huge ones: from their segments' address space). */
    size_t size = remote_then_size;
    size_t big = fill_blocks(size, PTR_CAP, 8);
    int err = errno;
    for (size_t i = 0; i < big; i++)
        ebb_free(ptrs[i]);
    fprintf(stderr, "    child: %zu x 2000 bytes freed by another thread, then %zu x %zu bytes\n",
            remote_count, big, size);
    if (small_bytes < 64 * MiB || big * size < small_bytes / 2) {
        fprintf(stderr, "    child: expected at least 64 MiB of 2000-byte blocks and half as many "
                "bytes of %zu-byte blocks after another thread freed them (errno %d)\n", size, err);
        return 1;
    }
    return 0;
}

static void blocks_freed_by_another_thread_are_collected_before_a_request_fails(void)
{
    remote_then_size = 100 * KiB;
    expect_child_ok(remote_refill_child, 120, "RLIMIT_AS remote refill",
                    "under RLIMIT_AS, blocks another thread freed should serve a request of "
                    "another size");
    /* A huge request too (review finding: only small and large ones
     * collected the heap's pages; 0 x 4 MiB fitted). */
    remote_then_size = 4 * MiB;
    expect_child_ok(remote_refill_child, 120, "RLIMIT_AS remote refill, huge",
                    "under RLIMIT_AS, the segments of blocks another thread freed should serve "
                    "huge blocks");
}

/* Review finding (B1, oom_remote.c): the blocks of a thread that allocated
 * and then went idle, or exited, all freed by another thread, did not serve
 * that thread's request when the OS refused it: malloc(200 MiB) failed
 * under RLIMIT_AS where glibc's succeeded, and succeeded after
 * malloc_trim(0). A refused request gave back the caches and its own heap's
 * pages only; the freed blocks sat in the idle (or dead) owner's pages. The
 * owner thread exists before the limit is set (its stack), allocates 20,000-
 * byte blocks until none fits, and then sleeps (`owner_exits` 0) or exits
 * (1); main frees them all and asks for most of that address space in one
 * block, and again in 100 KiB blocks. */
static int owner_exits;
static atomic_int owner_state; /* 0 wait, 1 allocate, 2 allocated, 3 may exit */
static size_t owner_count;

static void *allocate_then_idle(void *arg)
{
    (void)arg;
    while (atomic_load(&owner_state) != 1)
        usleep(1000);
    owner_count = fill_blocks(20000, PTR_CAP, 11);
    atomic_store(&owner_state, 2);
    if (owner_exits)
        return NULL;
    while (atomic_load(&owner_state) != 3)
        usleep(1000); /* alive, and no allocator call: its heap is idle */
    return NULL;
}

static int idle_owner_child(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, allocate_then_idle, NULL) != 0) {
        fprintf(stderr, "    child: pthread_create failed\n");
        return 2;
    }
    if (limit_address_space(300) < 0)
        return 2;
    atomic_store(&owner_state, 1);
    while (atomic_load(&owner_state) != 2)
        usleep(1000);
    if (owner_exits)
        pthread_join(t, NULL);
    size_t owned = owner_count * 20000;
    for (size_t i = 0; i < owner_count; i++)
        ebb_free(ptrs[i]);
    size_t want = owned / 4 * 3;
    errno = 0;
    void *big = ebb_malloc(want);
    int err = errno;
    int bad = 0;
    if (owned < 200 * MiB) {
        fprintf(stderr, "    child: the owner fitted only %zu bytes under the limit\n", owned);
        bad = 2;
    } else if (big == NULL || err != 0) {
        fprintf(stderr, "    child: %s owner's %zu x 20000 bytes freed by main, then malloc(%zu): "
                "%p, errno %d; expected a block with errno untouched\n",
                owner_exits ? "an exited" : "an idle", owner_count, want, big, err);
        bad = 1;
    }
    ebb_free(big);
    size_t again = bad ? 0 : fill_blocks(100 * KiB, PTR_CAP, 12);
    if (!bad && again * 100 * KiB < owned / 2) {
        fprintf(stderr, "    child: then %zu x 100 KiB: expected at least half the owner's %zu "
                "bytes\n", again, owned);
        bad = 1;
    }
    for (size_t i = 0; i < again; i++)
        ebb_free(ptrs[i]);
    if (!owner_exits) {
        atomic_store(&owner_state, 3);
        pthread_join(t, NULL);
    }
    return bad;
}

static void blocks_of_an_idle_or_exited_owner_freed_elsewhere_serve_a_refused_request(void)
{
    owner_exits = 0;
    expect_child_ok(idle_owner_child, 120, "RLIMIT_AS idle owner",
                    "blocks freed into an idle thread's pages should serve a request the OS "
                    "refused");
    owner_exits = 1;
    expect_child_ok(idle_owner_child, 120, "RLIMIT_AS exited owner",
                    "blocks freed into an exited thread's pages should serve a request the OS "
                    "refused");
}

/* realloc to a smaller size needs no memory: with none left, the block is
 * shrunk where it is, not refused (review finding B2, shrink_oom2.c: under
 * RLIMIT_AS, realloc of a 64 MiB block to 1 MiB and to 100 bytes returned
 * NULL with ENOMEM, where glibc shrinks in place). Small, large and huge
 * blocks, each shrunk to a size whose own allocation fails just before (the
 * child allocates blocks of that size until NULL), keep their pointer and
 * their bytes up to the new size, leave errno alone, and free cleanly; in
 * debug mode malloc_usable_size is the new size and free_sized takes it. */
typedef struct {
    size_t from, to;
    const char *what;
} shrink_case_t;

static size_t shrink_fill_count;

/* Allocate blocks of `size` until NULL: the next malloc(size) fails too. */
static void shrink_exhaust(size_t size)
{
    while (shrink_fill_count < PTR_CAP && (ptrs[shrink_fill_count] = ebb_malloc(size)) != NULL) {
        *(volatile char *)ptrs[shrink_fill_count] = 1;
        shrink_fill_count++;
    }
}

static int shrink_child(void)
{
    static const shrink_case_t cases[] = {
        {3000, 100, "small"},           {1536 * KiB, 100 * KiB, "large"},
        {1536 * KiB, 100, "large"},     {64 * MiB, MiB, "huge"},
        {64 * MiB, 100, "huge"},        {64 * MiB, 20 * MiB, "huge"},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    uint8_t *blocks[N];
    size_t sizes[N]; /* each block's size now, for free_sized */
    for (size_t i = 0; i < N; i++) {
        blocks[i] = ebb_malloc(cases[i].from);
        if (blocks[i] == NULL) {
            fprintf(stderr, "    child: setup: malloc(%zu) failed\n", cases[i].from);
            return 2;
        }
        check_fill(blocks[i], cases[i].from, 40 + i);
        sizes[i] = cases[i].from;
    }
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    ebb_stats_get(&st);
    if (limit_address_space(64) < 0)
        return 2;
    shrink_fill_count = 0;
    shrink_exhaust(MiB);
    shrink_exhaust(64 * KiB);
    int bad = 0;
    for (size_t i = 0; i < N; i++) {
        size_t from = cases[i].from, to = cases[i].to;
        shrink_exhaust(to);
        errno = 0;
        void *probe = ebb_malloc(to);
        if (probe != NULL || errno != ENOMEM) {
            fprintf(stderr, "    child: malloc(%zu) after allocating it until NULL: %p, errno %d; "
                    "the limit did not bite\n", to, probe, errno);
            return 2;
        }
        long vm_before = check_vm_size();
        errno = EDOM;
        uint8_t *q = ebb_realloc(blocks[i], to);
        int e = errno;
        long vm_after = check_vm_size();
        if (q != blocks[i] || e != EDOM) {
            fprintf(stderr, "    child: realloc(%s %zu-byte block, %zu) with no memory left: "
                    "expected the same pointer %p with errno unchanged (EDOM), got %p with errno "
                    "%d (%s)\n", cases[i].what, from, to, (void *)blocks[i], (void *)q, e,
                    strerror(e));
            bad = 1;
            continue; /* a NULL left the block as it was, to be freed below */
        }
        size_t kept = check_verify(q, to, 40 + i);
        if (kept != to) {
            fprintf(stderr, "    child: realloc(%s %zu-byte block, %zu) in place: expected its "
                    "first %zu bytes kept, byte %zu changed\n", cases[i].what, from, to, to, kept);
            bad = 1;
        }
        size_t usable = ebb_malloc_usable_size(q);
        if (st.debug_mode ? usable != to : usable < to) {
            fprintf(stderr, "    child: realloc(%s %zu-byte block, %zu) in place: usable size %zu, "
                    "expected %s %zu\n", cases[i].what, from, to, usable,
                    st.debug_mode ? "exactly" : "at least", to);
            bad = 1;
        }
        /* A large block's slices past the new size go back to its segment. */
        if (!st.debug_mode && cases[i].what[0] == 'l' && usable >= from) {
            fprintf(stderr, "    child: realloc(large %zu-byte block, %zu) in place: usable size "
                    "%zu, expected the slices past %zu given back\n", from, to, usable, to);
            bad = 1;
        }
        /* A huge block's tail goes back to the OS: its address space is what
         * a program short of memory needs. */
        if (from == 64 * MiB && vm_before - vm_after < (long)(from - to - MiB)) {
            fprintf(stderr, "    child: realloc(huge %zu-byte block, %zu) in place: VmSize "
                    "went from %ld to %ld KiB, expected %zu KiB less\n", from, to,
                    vm_before / 1024, vm_after / 1024, (from - to - MiB) / 1024);
            bad = 1;
        }
        memset(q, 0x5a, to); /* the new size is the block's: writing it all is sound */
        blocks[i] = q;
        sizes[i] = to;
    }
    /* Freed with the new size: debug mode checks free_sized against the
     * size recorded, and the canary moved down with the block's end. */
    for (size_t i = 0; i < N; i++)
        ebb_free_sized(blocks[i], sizes[i]);
    for (size_t i = 0; i < shrink_fill_count; i++)
        ebb_free(ptrs[i]);
    return bad;
}

static void shrinking_realloc_with_no_memory_left_shrinks_in_place(void)
{
    expect_child_ok(shrink_child, 120, "RLIMIT_AS shrinking realloc",
                    "realloc to a smaller size with no memory left should shrink the block in "
                    "place and return it");
}

/* ---------------------------------------------------------------------------
 * Review finding: the first malloc of a process under `ulimit -v 20000`
 * returned NULL where glibc's succeeded. Its segment (4 MiB, aligned to
 * 4 MiB) was first mapped where the kernel chose; that mapping, not aligned,
 * was unmapped and 8 MiB over-mapped to cut an aligned segment from, which
 * the limit refused. Here a fresh process (this program, run again with
 * FIRST_SEGMENT_ARG) makes the kernel's first choice unaligned, leaves itself
 * address space for 1.5 segments, and allocates: the segment must fit.
 * ------------------------------------------------------------------------- */
#define FIRST_SEGMENT_ARG "--first-segment-child"
#define SEGMENT_BYTES ((size_t)4 << 20)

static void child_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void child_say(const char *fmt, ...)
{
    char buf[512]; /* vsnprintf and write: stdio would allocate */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0 && write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1) < 0)
        return; /* nowhere to say it */
}

static void *map_anon(void *at, size_t size, int flags)
{
    void *p = mmap(at, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Nothing in this process has called malloc yet. Linux places mappings
 * top-down: a dry run of ebb's first two requests (its 64 KiB of metadata,
 * then the segment) shows where the segment would go; if that is aligned,
 * 2 MiB mapped at its top move the kernel's choice 2 MiB lower (kernels that
 * align large anonymous mappings do so to 2 MiB), so it is not. */
static int first_segment_child(void)
{
    void *meta = map_anon(NULL, 64 << 10, MAP_NORESERVE);
    uint8_t *probe = map_anon(NULL, SEGMENT_BYTES, MAP_NORESERVE);
    if (meta == NULL || probe == NULL) {
        child_say("    child: the dry run could not map\n");
        return 2;
    }
    munmap(probe, SEGMENT_BYTES);
    munmap(meta, 64 << 10);
    bool aligned = ((uintptr_t)probe & (SEGMENT_BYTES - 1)) == 0;
    if (aligned) {
        void *shift = map_anon(probe + SEGMENT_BYTES / 2, SEGMENT_BYTES / 2, MAP_FIXED_NOREPLACE);
        if (shift != probe + SEGMENT_BYTES / 2) {
            child_say("    child: could not map 2 MiB at %p\n", (void *)(probe + SEGMENT_BYTES / 2));
            return 2;
        }
    }
    if (limit_address_space(6) < 0) /* 1.5 segments */
        return 2;
    errno = 0;
    void *volatile p = malloc(100);
    if (p == NULL) {
        child_say("    child: the first malloc(100), with 6 MiB of address space left and the "
                  "kernel's first choice for its segment unaligned (dry run at %p%s): NULL (%s)\n",
                  (void *)probe, aligned ? ", moved 2 MiB down" : "", strerror(errno));
        return 1;
    }
    free(p);
    return 0;
}

static int first_segment_exec(void)
{
    char *argv[] = {"test_oom", FIRST_SEGMENT_ARG, NULL};
    execv("/proc/self/exe", argv);
    fprintf(stderr, "    child: execv(/proc/self/exe): %s\n", strerror(errno));
    return 2;
}

static void first_segment_fits_in_one_and_a_half_segments_of_address_space(void)
{
    expect_child_ok(first_segment_exec, 60, "RLIMIT_AS first segment",
                    "the first malloc should succeed with 6 MiB of address space left");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], FIRST_SEGMENT_ARG) == 0)
        return first_segment_child(); /* before anything here allocates */
    setvbuf(stdout, NULL, _IOLBF, 0);
    RUN_CASE(os_map_calls_counts_os_requests);
    RUN_CASE(overflowing_requests_fail_with_ENOMEM_before_any_os_request);
    RUN_CASE(small_allocation_fails_with_ENOMEM_when_the_os_refuses);
    RUN_CASE(large_allocation_fails_with_ENOMEM_when_the_os_refuses);
    RUN_CASE(huge_allocation_fails_with_ENOMEM_when_the_os_refuses);
    RUN_CASE(every_allocating_function_fails_with_ENOMEM_when_the_os_refuses);
    RUN_CASE(failed_realloc_keeps_the_old_block);
    RUN_CASE(allocation_works_again_after_injection_ends);
    RUN_CASE(rlimit_as_allocate_until_null_then_free_and_allocate_again);
    RUN_CASE(huge_block_fits_a_limit_that_leaves_it_no_room_to_grow);
    RUN_CASE(first_segment_fits_in_one_and_a_half_segments_of_address_space);
    RUN_CASE(refused_requests_unmap_the_huge_cache_and_retry);
    RUN_CASE(a_block_served_after_a_refused_request_leaves_errno_alone);
    RUN_CASE(a_request_that_can_never_fit_keeps_the_huge_cache);
    RUN_CASE(blocks_bigger_than_ram_and_swap_are_refused_under_heuristic_overcommit);
    RUN_CASE(freed_blocks_are_given_back_before_a_request_fails);
    RUN_CASE(a_huge_realloc_gets_the_caches_back_before_it_fails);
    RUN_CASE(blocks_freed_by_another_thread_are_collected_before_a_request_fails);
    RUN_CASE(shrinking_realloc_with_no_memory_left_shrinks_in_place);
    RUN_CASE(blocks_of_an_idle_or_exited_owner_freed_elsewhere_serve_a_refused_request);
    return check_finish();
}
