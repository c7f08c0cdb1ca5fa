/*
 * test_fork.c — fork() while other threads are inside malloc and free.
 *
 * Each child checks and frees blocks the parent allocated before the fork,
 * allocates and frees, starts 4 threads that allocate and free, joins them and
 * exits 0. The parent waits with a timeout, so a lock left held across fork
 * (a deadlock in the child) fails the test instead of hanging it.
 */
#include "check.h"

#include <alloca.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <malloc.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebb.h"

#define FORKS 100
#define CHILD_TIMEOUT_S 10.0

static uint64_t xs(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t mixed_size(uint64_t *s)
{
    uint64_t x = xs(s);
    switch (x % 64) {
    case 0: return 3 * MiB + x % 4096;      /* huge */
    case 1: case 2: return 200 * KiB + x % 65536; /* large */
    default: return (x >> 8) % 2048;         /* small */
    }
}

/* Allocate/free loop over `slots` blocks with patterns; returns the number of
 * problems (NULL results, broken patterns). Used by every thread here. */
#define LOOP_SLOTS 64
struct loop_state {
    void *p[LOOP_SLOTS];
    size_t n[LOOP_SLOTS];
    uint64_t rng;
};

static int loop_step(struct loop_state *st)
{
    int bad = 0;
    size_t j = xs(&st->rng) % LOOP_SLOTS;
    if (st->p[j]) {
        size_t len = st->n[j] < 256 ? st->n[j] : 256;
        if (check_verify(st->p[j], len, (uintptr_t)st->p[j]) != len)
            bad++;
        free(st->p[j]);
        st->p[j] = NULL;
    } else {
        size_t n = mixed_size(&st->rng);
        void *p = (xs(&st->rng) & 3) == 0 ? calloc(1, n) : malloc(n);
        if (!p)
            return 1;
        st->p[j] = p;
        st->n[j] = n;
        check_fill(p, n < 256 ? n : 256, (uintptr_t)p);
    }
    return bad;
}

static int loop_finish(struct loop_state *st)
{
    int bad = 0;
    for (int j = 0; j < LOOP_SLOTS; j++) {
        if (!st->p[j])
            continue;
        size_t len = st->n[j] < 256 ? st->n[j] : 256;
        if (check_verify(st->p[j], len, (uintptr_t)st->p[j]) != len)
            bad++;
        free(st->p[j]);
        st->p[j] = NULL;
    }
    return bad;
}

/* Background threads of the parent: allocate and free until told to stop,
 * spending as much of their time as possible inside the allocator (little
 * work per block, many size classes, large and huge blocks, blocks passed
 * between the threads through shared slots, and in debug mode call chains
 * the trace capture has not seen), so that a fork often lands while one of
 * them holds an allocator lock. */
/* malloc or calloc below a frame of varying size. In debug mode that makes
 * nearly every allocation's call chain sit at a stack address not seen
 * before: each misses the capture cache, walks, and stores a new entry under
 * the cache's lock, so the trace code's locks are busy when the fork comes. */
__attribute__((noinline)) static void *alloc_from_varying_stack(uint64_t x, size_t n, bool zero)
{
    volatile char *pad = alloca(16 + (x >> 40) % 65536);
    pad[0] = 0;
    void *p = zero ? calloc(1, n) : malloc(n);
    __asm__ volatile("" ::: "memory"); /* keep the frame: no tail call */
    return p;
}

static atomic_int stop_bg;
/* Set while a child runs: the background threads matter at the fork only,
 * and on two cores their spinning left a child a quarter of a CPU (this test
 * took 40 s in release, 70 s in debug mode). */
static atomic_int pause_bg;
static atomic_long bg_bad, bg_ops;
#define BG_SHARED 4096
static _Atomic(uint64_t *) bg_shared[BG_SHARED];

static void *bg_thread(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    while (!atomic_load_explicit(&stop_bg, memory_order_relaxed)) {
        if (atomic_load_explicit(&pause_bg, memory_order_relaxed)) {
            usleep(1000);
            continue;
        }
        uint64_t x = xs(&rng);
        size_t n;
        switch (x % 512) {
        case 0: n = 3 * MiB; break;                        /* huge */
        case 1: case 2: case 3: case 4: n = 150 * KiB + (x >> 20) % (300 * KiB); break; /* large */
        default: n = 16 + (x >> 20) % (x & 512 ? 4096 : 256); break;
        }
        uint64_t *p = alloc_from_varying_stack(x, n, x & 0x100000);
        if (!p) {
            atomic_fetch_add_explicit(&bg_bad, 1, memory_order_relaxed);
            continue;
        }
        p[0] = (uint64_t)(uintptr_t)p ^ n;
        p[1] = n;
        uint64_t *old = atomic_exchange_explicit(&bg_shared[(x >> 9) % BG_SHARED], p,
                                                 memory_order_acq_rel);
        if (old) {
            if ((old[0] ^ old[1]) != (uint64_t)(uintptr_t)old)
                atomic_fetch_add_explicit(&bg_bad, 1, memory_order_relaxed);
            free(old); /* often allocated by another background thread */
        }
        atomic_fetch_add_explicit(&bg_ops, 1, memory_order_relaxed);
    }
    return NULL;
}

static void bg_drain(void)
{
    for (int i = 0; i < BG_SHARED; i++)
        free(atomic_exchange(&bg_shared[i], NULL));
}

/* Blocks the parent holds across the fork; the child checks and frees them. */
#define PARENT_BLOCKS 256
static void *parent_block[PARENT_BLOCKS];
static size_t parent_n[PARENT_BLOCKS];

static void *child_worker(void *arg)
{
    struct loop_state st = {.rng = (uint64_t)(uintptr_t)arg + 12345};
    long bad = 0;
    for (int i = 0; i < 3000; i++)
        bad += loop_step(&st);
    bad += loop_finish(&st);
    return (void *)bad;
}

/* The child: returns its exit status (0 = all good). No stdio here. */
static int child_main(void)
{
    for (int i = 0; i < PARENT_BLOCKS; i++) {
        size_t len = parent_n[i] < 512 ? parent_n[i] : 512;
        if (check_verify(parent_block[i], len, (uintptr_t)i * 31) != len)
            return 2;
        free(parent_block[i]);
    }
    struct loop_state st = {.rng = 99};
    int bad = 0;
    for (int i = 0; i < 2000; i++)
        bad += loop_step(&st);
    bad += loop_finish(&st);
    if (bad)
        return 3;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, child_worker, (void *)(uintptr_t)(i + 1)) != 0)
            return 4;
    long tbad = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        tbad += (long)r;
    }
    if (tbad)
        return 5;
    void *big = malloc(8 * MiB); /* and a huge mapping works too */
    if (!big)
        return 6;
    memset(big, 1, 8 * MiB);
    free(big);
    return 0;
}

static const char *child_status_meaning(int code)
{
    switch (code) {
    case 2: return "the parent's blocks were corrupted in the child";
    case 3: return "allocation failed or a pattern broke in the child's main thread";
    case 4: return "pthread_create failed in the child";
    case 5: return "allocation failed or a pattern broke in a child thread";
    case 6: return "malloc(8 MiB) failed in the child";
    default: return "unexpected exit status";
    }
}

/* Fork, run child_main in the child, wait for it with a timeout. Returns 0 if
 * the child exited 0; otherwise reports and returns -1. */
static int fork_and_check(int round)
{
    for (int i = 0; i < PARENT_BLOCKS; i++) {
        parent_n[i] = 1 + (size_t)(i * 977) % (i % 50 == 0 ? 300000 : 3000);
        parent_block[i] = malloc(parent_n[i]);
        if (!parent_block[i])
            return -1;
        check_fill(parent_block[i], parent_n[i] < 512 ? parent_n[i] : 512, (uintptr_t)i * 31);
    }
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_main());
    atomic_store(&pause_bg, 1);
    for (int i = 0; i < PARENT_BLOCKS; i++)
        free(parent_block[i]);
    CHECK(pid > 0, "fork #%d: expected a child, got %d (%s)", round, (int)pid, strerror(errno));
    if (pid < 0) {
        atomic_store(&pause_bg, 0);
        return -1;
    }
    int status = 0;
    bool exited = check_wait_child(pid, &status, CHILD_TIMEOUT_S);
    atomic_store(&pause_bg, 0);
    if (!exited) {
        CHECK(0, "fork #%d: expected the child to exit within %.0f s, it hung (a lock held "
              "across fork?) and was killed", round, CHILD_TIMEOUT_S);
        return -1;
    }
    if (WIFSIGNALED(status)) {
        CHECK(0, "fork #%d: expected the child to exit 0, it was killed by signal %d (%s)", round,
              WTERMSIG(status), strsignal(WTERMSIG(status)));
        return -1;
    }
    int code = WEXITSTATUS(status);
    CHECK(code == 0, "fork #%d: expected the child to exit 0, got %d: %s", round, code,
          child_status_meaning(code));
    return code == 0 ? 0 : -1;
}

static void start_bg(pthread_t *t, int n)
{
    atomic_store(&stop_bg, 0);
    atomic_store(&bg_bad, 0);
    atomic_store(&bg_ops, 0);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, bg_thread, (void *)(uintptr_t)(i + 1)) != 0)
            CHECK(0, "pthread_create of background thread %d failed", i);
}

static void stop_bg_threads(pthread_t *t, int n)
{
    atomic_store(&stop_bg, 1);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    bg_drain();
    CHECK(atomic_load(&bg_bad) == 0, "background threads saw %ld broken blocks or failed "
          "allocations", atomic_load(&bg_bad));
}

static void fork_while_threads_allocate_child_allocates_and_starts_threads(void)
{
    pthread_t bg[3];
    start_bg(bg, 3);
    int failures = 0;
    for (int round = 0; round < FORKS && failures < 3; round++) {
        /* Let the background threads get into malloc/free. */
        long ops0 = atomic_load(&bg_ops);
        while (atomic_load(&bg_ops) < ops0 + 1000)
            sched_yield();
        if (fork_and_check(round) != 0)
            failures++;
    }
    printf("    background threads did %ld operations\n", atomic_load(&bg_ops));
    stop_bg_threads(bg, 3);
}

/* The same, with the fork done by a secondary thread while main also allocates. */
static atomic_int forker_done;
static void *forker(void *unused)
{
    (void)unused;
    int failures = 0;
    for (int round = 0; round < FORKS / 2 && failures < 3; round++)
        if (fork_and_check(round) != 0)
            failures++;
    atomic_store(&forker_done, 1);
    return NULL;
}

static void fork_from_a_secondary_thread_while_main_allocates(void)
{
    pthread_t bg[3], f;
    start_bg(bg, 3);
    atomic_store(&forker_done, 0);
    REQUIRE(pthread_create(&f, NULL, forker, NULL) == 0, "pthread_create forker");
    struct loop_state st = {.rng = 4242};
    long bad = 0;
    while (!atomic_load(&forker_done))
        bad += loop_step(&st);
    bad += loop_finish(&st);
    pthread_join(f, NULL);
    stop_bg_threads(bg, 3);
    CHECK(bad == 0, "main thread saw %ld broken blocks or failed allocations", bad);
}

/* Review finding: a child made by _Fork (no fork handlers run) kept the
 * parent's kernel thread id on its heap; a forced collection asked the
 * kernel about that id in the child, found no such thread, and handed back
 * the heap the child's main thread was using.
 *
 * Without fork handlers, a lock that another thread holds at the fork stays
 * held in the child for good, so the _Fork must come from a process with no
 * other thread: a fresh copy of this program with EBB_BACKGROUND=0 (no
 * scavenger thread), which runs fork_without_handlers below. Done in
 * this process, the scavenger was sometimes mid-pass at the _Fork and the
 * child's collection waited forever for its lock. */
static int fork_without_handlers(void)
{
    free(malloc(100)); /* this thread has a heap */
    pid_t pid = _Fork();
    if (pid < 0)
        return 10;
    if (pid == 0) {
        void *p = malloc(100);
        ebb_collect(true);
        struct ebb_stats st = {.version = EBB_STATS_VERSION};
        int bad = p == NULL || ebb_stats_get(&st) != 0 || st.heaps_alive < 1;
        void *q = malloc(100);
        bad |= q == NULL || q == p; /* a heap handed back would hand p out again */
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return 11;
    if (!WIFEXITED(status))
        return 12;
    return WEXITSTATUS(status); /* 0 or the child's 1 */
}

/* ---------------------------------------------------------------------------
 * A pending cancel. malloc and free are not cancellation points, so a
 * thread may call them with a deferred cancel pending; ebb's slow paths must
 * not act on it (review findings, 2026-12-05): a thread whose allocation
 * started the scavenger was unwound inside it (in an open() of /proc),
 * leaving the scavenger "starting" for good and nothing purged again; and a
 * free that unmapped a segment was unwound in the sleep that waits out a
 * purge pass, holding its heap's lock, so that its own exit, and every
 * later fork, waited for ever.
 * ------------------------------------------------------------------------- */
static void *cancel_sleeper(void *arg)
{
    for (;;)
        pause();
    return arg;
}

/* Runs with a cancel pending: only allocator calls until it returns. */
static void *allocate_with_cancel_pending(void *arg)
{
    (void)arg;
    pthread_cancel(pthread_self()); /* deferred: pending until a cancellation point */
    void *big = malloc(8 << 20);    /* purgeable once freed: the child's scavenger starts */
    free(big);
    for (int i = 0; i < 100000; i++)
        free(malloc(16 + (size_t)(i % 4000) * 16));
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    return (void *)1;
}

/* In a forked child, where the scavenger starts on the first purgeable
 * memory: the thread that starts it has a cancel pending. Exit 0 if that
 * thread returned and the child's freed memory was purged in time. */
static int cancel_at_scavenger_start_child(void)
{
    pthread_t t;
    void *ret = NULL;
    if (pthread_create(&t, NULL, allocate_with_cancel_pending, NULL) != 0 ||
        pthread_join(t, &ret) != 0)
        return 10;
    if (ret == PTHREAD_CANCELED)
        return 1;
    enum { N = 128 };
    static void *blocks[N];
    long before = check_anon_rss();
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(1 << 20);
        if (blocks[i] == NULL)
            return 11;
        memset(blocks[i], 1, 1 << 20);
    }
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    for (int waited_ms = 0; waited_ms < 3000; waited_ms += 20) {
        if (check_anon_rss() - before < 8 * 1024 * 1024)
            return 0;
        usleep(20 * 1000);
    }
    return 2;
}

static atomic_int cancel_go, cancel_stop, cancelled_in_allocator;
static int churn_rounds; /* set before the threads start */

static void note_cancelled(void *arg)
{
    (void)arg;
    atomic_fetch_add(&cancelled_in_allocator, 1);
}

static void *trim_until_stopped(void *arg)
{
    (void)arg;
    while (!atomic_load(&cancel_stop))
        malloc_trim(0);
    return NULL;
}

/* 1 MiB blocks and growing reallocs with a cancel pending, while another
 * thread forces purge passes: frees that unmap a segment wait out a pass. */
static void *churn_with_cancel_pending(void *arg)
{
    (void)arg;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_cleanup_push(note_cancelled, NULL);
    while (!atomic_load(&cancel_go))
        sched_yield();
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL); /* the cancel is pending now */
    void *b[40];
    for (int round = 0; round < churn_rounds; round++) {
        for (int i = 0; i < 40; i++) {
            b[i] = malloc((1u << 20) + 4096 * (unsigned)(round % 7));
            if (b[i] != NULL)
                memset(b[i], 1, 64);
        }
        for (int i = 0; i < 40; i++)
            free(b[i]);
        void *r = NULL;
        for (int i = 0; i < 50; i++)
            r = realloc(r, (size_t)(i + 1) * 3000);
        free(r);
    }
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_cleanup_pop(0);
    return NULL;
}

static int cancel_during_frees_child(void)
{
    /* Debug mode fills and checks each 1 MiB block whole: 400 rounds took
     * 26 s a run there, and a CI machine loaded by other work passed the
     * 60 s limit (a "hang" that was none). 100 rounds in debug mode. */
    const char *debug = getenv("EBB_DEBUG");
    churn_rounds = debug && *debug && strcmp(debug, "0") != 0 ? 100 : 400;
    enum { WORKERS = 4 };
    pthread_t w[WORKERS], trimmer;
    for (int i = 0; i < WORKERS; i++)
        if (pthread_create(&w[i], NULL, churn_with_cancel_pending, NULL) != 0)
            return 10;
    for (int i = 0; i < WORKERS; i++)
        pthread_cancel(w[i]);
    if (pthread_create(&trimmer, NULL, trim_until_stopped, NULL) != 0)
        return 10;
    atomic_store(&cancel_go, 1);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(w[i], NULL);
    atomic_store(&cancel_stop, 1);
    pthread_join(trimmer, NULL);
    pid_t pid = fork(); /* takes every heap's lock */
    if (pid == 0)
        _exit(0);
    if (pid < 0 || waitpid(pid, NULL, 0) != pid)
        return 11;
    return atomic_load(&cancelled_in_allocator) ? 1 : 0;
}

/* Run fn in a forked child with a time limit: its exit status, or -1 if it
 * was killed (a hang). */
static int run_child_limited(int (*fn)(void), unsigned seconds)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(seconds);
        _exit(fn());
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -2;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void a_pending_cancel_never_acts_inside_the_allocator(void)
{
    /* glibc loads its unwinder for cancellation at the first cancel; done
     * here, so that the children's cancels do not allocate for it. */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, cancel_sleeper, NULL) == 0, "pthread_create failed");
    pthread_cancel(t);
    pthread_join(t, NULL);
    malloc_trim(0);
    int rc = run_child_limited(cancel_at_scavenger_start_child, 30);
    CHECK(rc == 0, "a thread with a cancel pending that starts a child's scavenger: expected it "
          "to return and the child's 128 MiB freed to be purged within 3 s; got %s (%d)",
          rc == 1 ? "the thread was cancelled inside an allocator call"
          : rc == 2 ? "the freed memory stayed resident" : rc == -1 ? "killed (a hang)" : "a failure",
          rc);
    for (int run = 0; run < 3; run++) {
        rc = run_child_limited(cancel_during_frees_child, 60);
        CHECK(rc == 0, "run %d: 4 threads with a cancel pending, freeing 1 MiB blocks while "
              "another forces purge passes: expected every thread to finish and a fork after; "
              "got %s (%d)", run,
              rc == 1 ? "a thread cancelled inside an allocator call" : rc == -1 ? "killed (a hang)"
              : "a failure", rc);
    }
}

static void a_child_of_fork_without_handlers_keeps_its_heap(void)
{
    char *argv[] = {"test_fork", "--fork-without-handlers", NULL};
    char *envp[64];
    size_t n = 0;
    extern char **environ;
    for (char **e = environ; *e && n < 62; e++)
        if (strncmp(*e, "EBB_BACKGROUND=", 15) != 0)
            envp[n++] = *e;
    envp[n++] = "EBB_BACKGROUND=0";
    envp[n] = NULL;
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork failed");
    if (pid == 0) {
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    int status = 0;
    if (!check_wait_child(pid, &status, CHILD_TIMEOUT_S)) {
        CHECK(0, "the copy of this program that calls _Fork hung and was killed");
        return;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the _Fork child should keep its heap through a forced collection (status %#x: 1 = "
          "it lost its heap, 127 = exec failed, 10-12 = _Fork or waitpid failed)", status);
}

/* The process ends when the last of its own threads does (glibc: the last
 * thread to finish calls exit(0)), whatever ebb's scavenger thread is doing:
 * it takes itself out of the C library's count as it starts (purge.c, "Not
 * one of the program's threads"). A sweep of real programs found both cases
 * below hanging for good, with the scavenger the one thread left: CPython's
 * test_threading forks from a thread. Each child first makes ebb start its
 * scavenger (a huge block freed, then allocations until the thread shows up
 * in /proc/self/status), and exits 7 if it never does, which fails the case
 * (it would check nothing). Its atexit handler writes to a pipe: the child
 * must end through exit(0), not be killed. */
static int exit_pipe[2];

static void exit_marker(void)
{
    char c = 'x';
    if (write(exit_pipe[1], &c, 1) != 1)
        _exit(9);
}

/* In a child with one thread: true once ebb's scavenger runs beside it. */
static bool scavenger_started(void)
{
    free(malloc(3 * MiB)); /* a huge block: the process wants the thread */
    for (int i = 0; i < 1000; i++) {
        if (check_thread_count() >= 2)
            return true;
        free(malloc(200 * KiB)); /* an allocation slow path starts it */
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

static void *last_thread_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++)
        free(malloc(64 * KiB));
    return NULL;
}

/* The parent's side: the child ends, by exit(0), within CHILD_TIMEOUT_S. */
static void expect_child_exits_0(pid_t pid, const char *how)
{
    close(exit_pipe[1]);
    int status = 0;
    bool ended = check_wait_child(pid, &status, CHILD_TIMEOUT_S);
    char c = 0;
    bool marked = read(exit_pipe[0], &c, 1) == 1 && c == 'x';
    close(exit_pipe[0]);
    if (!ended) {
        CHECK(0, "%s: the process should end when its last thread does; it was still running "
              "after %.0f s and was killed", how, CHILD_TIMEOUT_S);
        return;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "%s: expected exit status 0, got %#x (7: ebb's scavenger never started, so nothing "
          "was checked)", how, status);
    CHECK(marked, "%s: the process ended without running its atexit handlers (exit(0) was "
          "not called)", how);
}

static void the_process_ends_when_main_called_pthread_exit_and_its_last_thread_returns(void)
{
    REQUIRE(pipe(exit_pipe) == 0, "pipe failed");
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork failed");
    if (pid == 0) {
        close(exit_pipe[0]);
        atexit(exit_marker);
        if (!scavenger_started())
            _exit(7);
        pthread_t t;
        if (pthread_create(&t, NULL, last_thread_main, NULL) != 0)
            _exit(8);
        pthread_exit(NULL);
    }
    expect_child_exits_0(pid, "main called pthread_exit, then its one other thread returned");
}

static void *fork_then_return_main(void *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        close(exit_pipe[0]);
        atexit(exit_marker);
        if (!scavenger_started())
            _exit(7);
        return NULL; /* the child's only thread of its own returns */
    }
    *(pid_t *)arg = pid;
    return NULL;
}

static void a_child_forked_from_a_thread_ends_when_that_thread_returns(void)
{
    REQUIRE(pipe(exit_pipe) == 0, "pipe failed");
    pid_t pid = -1;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, fork_then_return_main, &pid) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    REQUIRE(pid > 0, "fork failed");
    expect_child_exits_0(pid, "forked from a secondary thread, which then returned in the child");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--fork-without-handlers") == 0)
        return fork_without_handlers();
    setvbuf(stdout, NULL, _IOLBF, 0);
    RUN_CASE(fork_while_threads_allocate_child_allocates_and_starts_threads);
    RUN_CASE(fork_from_a_secondary_thread_while_main_allocates);
    RUN_CASE(a_child_of_fork_without_handlers_keeps_its_heap);
    RUN_CASE(a_pending_cancel_never_acts_inside_the_allocator);
    RUN_CASE(the_process_ends_when_main_called_pthread_exit_and_its_last_thread_returns);
    RUN_CASE(a_child_forked_from_a_thread_ends_when_that_thread_returns);
    return check_finish();
}
