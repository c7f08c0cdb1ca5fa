/*
 * test_first_call.c — ebb initializes itself from whichever function a process
 * calls first (SPEC.md: "correct from the first call of the process").
 *
 * For each entry point, a fresh process (this program re-executed with the
 * scenario's name) makes that call before anything else, checks the result,
 * then allocates a mix of sizes and starts threads that allocate; the driver
 * checks its exit status. Also: the first call made by a new thread while
 * main has never allocated.
 */
#include "check.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include "ebb.h"

extern char **environ;

/* ----- in the child ----- */

static int after_first_call(void)
{
    /* A mix of sizes in this thread... */
    void *p[64];
    for (int i = 0; i < 64; i++) {
        size_t n = (size_t)1 << (i % 23);
        p[i] = malloc(n);
        if (!p[i])
            return 10;
        memset(p[i], i, n);
    }
    for (int i = 0; i < 64; i++)
        free(p[i]);
    return 0;
}

static void *thread_mix(void *unused)
{
    (void)unused;
    return (void *)(intptr_t)after_first_call();
}

static int threads_too(void)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        if (pthread_create(&t[i], NULL, thread_mix, NULL) != 0)
            return 11;
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (r)
            bad = 12;
    }
    return bad;
}

static int block_ok(void *p, size_t n, size_t align)
{
    if (!p)
        return 2;
    if ((uintptr_t)p % 16 || (align && (uintptr_t)p % align))
        return 3;
    if (ebb_malloc_usable_size(p) < n)
        return 4;
    memset(p, 0xab, n);
    return 0;
}

static void *first_thread(void *arg)
{
    size_t n = (size_t)(uintptr_t)arg;
    void *p = malloc(n);
    int r = block_ok(p, n, 0);
    free(p);
    return (void *)(intptr_t)r;
}

static int scenario(const char *s)
{
    int r = 0;
    void *p = NULL;
    long ps = sysconf(_SC_PAGESIZE);
    if (!strcmp(s, "malloc")) {
        p = malloc(100);
        r = block_ok(p, 100, 0);
    } else if (!strcmp(s, "malloc_zero")) {
        p = malloc(0);
        r = p ? 0 : 2;
    } else if (!strcmp(s, "calloc")) {
        p = calloc(10, 10);
        if (!p)
            r = 2;
        else if (check_all_bytes(p, 100, 0) != 100)
            r = 5;
        else
            r = block_ok(p, 100, 0);
    } else if (!strcmp(s, "calloc_huge")) {
        p = calloc(1, 64 * MiB);
        if (!p)
            r = 2;
        else if (check_all_bytes(p, 64 * MiB, 0) != 64 * MiB)
            r = 5;
        else
            r = block_ok(p, 64 * MiB, 0);
    } else if (!strcmp(s, "realloc_null")) {
        p = realloc(NULL, 5000);
        r = block_ok(p, 5000, 0);
    } else if (!strcmp(s, "posix_memalign")) {
        r = posix_memalign(&p, 4096, 100) ? 2 : block_ok(p, 100, 4096);
    } else if (!strcmp(s, "aligned_alloc")) {
        p = aligned_alloc(64, 64);
        r = block_ok(p, 64, 64);
    } else if (!strcmp(s, "aligned_alloc_huge_alignment")) {
        p = aligned_alloc(4 * MiB, 1);
        r = block_ok(p, 1, 4 * MiB);
    } else if (!strcmp(s, "memalign")) {
        p = memalign(256, 1000);
        r = block_ok(p, 1000, 256);
    } else if (!strcmp(s, "valloc")) {
        p = valloc(10);
        r = block_ok(p, 10, (size_t)ps);
    } else if (!strcmp(s, "pvalloc")) {
        p = pvalloc(10);
        r = block_ok(p, (size_t)ps, (size_t)ps);
    } else if (!strcmp(s, "free_null")) {
        free(NULL);
        p = malloc(10);
        r = block_ok(p, 10, 0);
    } else if (!strcmp(s, "malloc_usable_size_null")) {
        r = malloc_usable_size(NULL) == 0 ? 0 : 6;
    } else if (!strcmp(s, "malloc_trim")) {
        int t = malloc_trim(0);
        r = (t == 0 || t == 1) ? 0 : 6;
    } else if (!strcmp(s, "mallopt")) {
        r = mallopt(M_ARENA_MAX, 1) == 1 ? 0 : 6;
    } else if (!strcmp(s, "ebb_malloc")) {
        p = ebb_malloc(100);
        r = block_ok(p, 100, 0);
    } else if (!strcmp(s, "ebb_version")) {
        r = strcmp(ebb_version(), "0.1.0") ? 6 : 0;
    } else if (!strcmp(s, "secondary_thread")) {
        pthread_t t;
        void *tr;
        if (pthread_create(&t, NULL, first_thread, (void *)(uintptr_t)300) != 0)
            return 11;
        pthread_join(t, &tr);
        r = (int)(intptr_t)tr;
    } else {
        return 99;
    }
    free(p);
    if (r)
        return r;
    r = after_first_call();
    return r ? r : threads_too();
}

/* ----- the driver ----- */

static const char *scenarios[] = {
    "malloc", "malloc_zero", "calloc", "calloc_huge", "realloc_null", "posix_memalign",
    "aligned_alloc", "aligned_alloc_huge_alignment", "memalign", "valloc", "pvalloc",
    "free_null", "malloc_usable_size_null", "malloc_trim", "mallopt", "ebb_malloc",
    "ebb_version", "secondary_thread"};
static const char *current;

static const char *meaning(int code)
{
    switch (code) {
    case 2: return "the first call returned NULL";
    case 3: return "the first block was misaligned";
    case 4: return "ebb_malloc_usable_size of the first block was too small";
    case 5: return "the first calloc'd block was not zeroed";
    case 6: return "the first call returned a wrong value";
    case 10: return "a later malloc failed";
    case 11: return "pthread_create failed";
    case 12: return "a thread's allocations failed";
    case 99: return "unknown scenario";
    default: return "unexpected exit status";
    }
}

static void run_current(void)
{
    char *argv[] = {"test_first_call", (char *)current, NULL};
    pid_t pid;
    int e = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ);
    REQUIRE(e == 0, "posix_spawn: %s", strerror(e));
    double t0 = check_now();
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (check_now() - t0 > 20) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            CHECK(0, "%s first: the process hung for 20 s and was killed", current);
            return;
        }
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (WIFSIGNALED(status)) {
        CHECK(0, "%s as the process's first allocator call: expected exit 0, killed by signal "
              "%d (%s)", current, WTERMSIG(status), strsignal(WTERMSIG(status)));
        return;
    }
    int code = WEXITSTATUS(status);
    CHECK(code == 0, "%s as the process's first allocator call: expected exit 0, got %d (%s)",
          current, code, meaning(code));
}

int main(int argc, char **argv)
{
    if (argc == 2)
        return scenario(argv[1]); /* the child: nothing allocated before this */
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "first_call_%s", scenarios[i]);
        current = scenarios[i];
        check_run_case(name, run_current);
    }
    return check_finish();
}
