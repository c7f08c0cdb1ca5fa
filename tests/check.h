/*
 * check.h — the tiny test framework shared by every C test of ebb.
 *
 *   CHECK(cond, fmt, ...)    record a failure (with a message that says what was
 *                            expected and what happened) and carry on
 *   REQUIRE(cond, fmt, ...)  the same, then return from the current case
 *                            (for failures that make the rest meaningless)
 *   RUN_CASE(fn)             run one case: `static void fn(void)`
 *   check_finish()           print the summary; the value to return from main
 *
 * A case is named for the behaviour it checks. CHECK is thread-safe (worker
 * threads may use it). At most CHECK_MAX_REPORTS failures are printed per case
 * so a loop over 4096 sizes cannot flood the log; the count is still exact.
 * Set CHECK_ONLY=name to run the cases whose name contains `name`, and
 * CHECK_SKIP to leave cases out, one a line, "name: why" (exact names;
 * tests/test_qemu_aarch64.sh names what an emulator cannot run): each is
 * reported as a SKIPPED CHECK with its reason, never as passed.
 *
 * Also here: helpers the tests share (anonymous RSS, monotonic time, a barrier
 * that keeps a result alive, byte patterns).
 */
#ifndef EBB_TEST_CHECK_H
#define EBB_TEST_CHECK_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_MAX_REPORTS 25

static const char *check_case_name = "(setup)";
static atomic_long check_case_failures;
static int check_cases_run, check_cases_failed;

__attribute__((format(printf, 4, 5), noinline, cold, unused))
static void check_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    long n = atomic_fetch_add(&check_case_failures, 1) + 1;
    if (n > CHECK_MAX_REPORTS) {
        if (n == CHECK_MAX_REPORTS + 1)
            fprintf(stderr, "    [%s] ... further failures of this case not printed\n",
                    check_case_name);
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "    FAILED %s:%d [%s]\n      check: %s\n      %s\n", file, line,
            check_case_name, expr, msg);
    fflush(stderr);
}

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (__builtin_expect(!(cond), 0))                                    \
            check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);              \
    } while (0)

#define REQUIRE(cond, ...)                                                   \
    do {                                                                     \
        if (__builtin_expect(!(cond), 0)) {                                  \
            check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);              \
            return;                                                          \
        }                                                                    \
    } while (0)

/* A check that cannot be made where the test runs (a kernel feature is off,
 * or a sanitizer cannot run it): it is reported, and tests/run_tests.sh counts these lines in the log of a
 * test that passed, so a skipped check is never read as a passed one. */
#define SKIP_CHECK(...)                                                      \
    do {                                                                     \
        printf("    SKIPPED CHECK [%s]: ", check_case_name);                 \
        printf(__VA_ARGS__);                                                 \
        printf("\n");                                                        \
        fflush(stdout);                                                      \
    } while (0)

/* Monotonic time in seconds. */
static inline double check_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef void (*check_case_fn)(void);

/* The reason CHECK_SKIP gives for case `name` (up to the end of its line),
 * its length in *len; NULL if it names no such case. */
static inline const char *check_skip_reason(const char *name, int *len)
{
    const char *list = getenv("CHECK_SKIP");
    size_t n = strlen(name);
    for (const char *line = list; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        if (end == NULL)
            end = line + strlen(line);
        while (*line == ' ')
            line++;
        if ((size_t)(end - line) > n && strncmp(line, name, n) == 0 && line[n] == ':') {
            const char *why = line + n + 1;
            while (*why == ' ')
                why++;
            *len = (int)(end - why);
            return why;
        }
        line = *end ? end + 1 : end;
    }
    return NULL;
}

static inline void check_run_case(const char *name, check_case_fn fn)
{
    const char *only = getenv("CHECK_ONLY");
    if (only && *only && !strstr(name, only))
        return;
    int why_len = 0;
    const char *why = check_skip_reason(name, &why_len);
    if (why != NULL) {
        printf("[ SKIP ] %s\n    SKIPPED CHECK [%s]: not run here: %.*s\n", name, name, why_len, why);
        fflush(stdout);
        return;
    }
    check_case_name = name;
    atomic_store(&check_case_failures, 0);
    printf("[ RUN  ] %s\n", name);
    fflush(stdout);
    double t0 = check_now();
    fn();
    double dt = check_now() - t0;
    long f = atomic_load(&check_case_failures);
    check_cases_run++;
    if (f) {
        check_cases_failed++;
        printf("[ FAIL ] %s (%ld failed check%s, %.2f s)\n", name, f, f == 1 ? "" : "s", dt);
    } else {
        printf("[  OK  ] %s (%.2f s)\n", name, dt);
    }
    fflush(stdout);
    check_case_name = "(between cases)";
}

#define RUN_CASE(fn) check_run_case(#fn, fn)

static inline int check_finish(void)
{
    printf("%d case%s, %d failed\n", check_cases_run, check_cases_run == 1 ? "" : "s",
           check_cases_failed);
    fflush(stdout);
    return check_cases_failed ? 1 : 0;
}

/* Everything `fd` gives until its end (or cap - 1 bytes), into buf as a
 * string; its length. */
static inline size_t check_read_all(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t r;
    while (len < cap - 1 && (r = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)r;
    buf[len] = '\0';
    return len;
}

/* Keep `p` (and what it points to) alive: the compiler must assume the asm
 * reads the memory, so stores before it cannot be deleted. */
static inline void check_keep(const void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* The threads of this process, from the "Threads:" line of /proc/self/status
 * (-1 if it cannot be read). */
static inline long check_thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %ld", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* Wait for child `pid` for at most `timeout_s` seconds, polling every 2 ms.
 * True with *status set if it ended in time; else it is killed with SIGKILL,
 * reaped (*status is then the kill's) and the result is false. */
static inline bool check_wait_child(pid_t pid, int *status, double timeout_s)
{
    double t0 = check_now();
    for (;;) {
        if (waitpid(pid, status, WNOHANG) == pid)
            return true;
        if (check_now() - t0 > timeout_s) {
            kill(pid, SIGKILL);
            waitpid(pid, status, 0);
            return false;
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Anonymous resident memory of this process in bytes: "Anonymous:" of
 * /proc/self/smaps_rollup, or (older kernels) resident - shared of statm. */
static inline long check_anon_rss(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (f) {
        char line[256];
        long kb = -1;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "Anonymous: %ld kB", &kb) == 1)
                break;
        }
        fclose(f);
        if (kb >= 0)
            return kb * 1024;
    }
    f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    long size = 0, resident = 0, shared = 0;
    int n = fscanf(f, "%ld %ld %ld", &size, &resident, &shared);
    fclose(f);
    if (n != 3)
        return -1;
    return (resident - shared) * sysconf(_SC_PAGESIZE);
}

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

static inline int check_is_pow2(size_t x)
{
    return x && !(x & (x - 1));
}

/* A byte pattern that depends on a seed (an address, a size, an index) and the
 * position, so blocks that overlap or get mixed up show different bytes. */
static inline uint8_t check_pattern(uintptr_t seed, size_t i)
{
    uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0x2545F4914F6CDD1Dull;
    return (uint8_t)(x >> 56) ^ (uint8_t)i;
}

static inline void check_fill(void *p, size_t n, uintptr_t seed)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = check_pattern(seed, i);
}

/* Index of the first byte that differs from the pattern, or n if none. */
static inline size_t check_verify(const void *p, size_t n, uintptr_t seed)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != check_pattern(seed, i))
            return i;
    return n;
}

/* Index of the first byte that is not `v`, or n if none. */
static inline size_t check_all_bytes(const void *p, size_t n, uint8_t v)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != v)
            return i;
    return n;
}

/* The process's address space (VmSize) in bytes, or -1. */
/* The kB figure after `key` in a small /proc file, in bytes; -1 if absent.
 * open/read, not stdio, which would allocate (and could start ebb's
 * scavenger in a case that counts threads or limits the address space). */
static inline long check_proc_kb(const char *path, const char *key)
{
    char buf[8192];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *at = strstr(buf, key);
    return at ? strtol(at + strlen(key), NULL, 10) * 1024 : -1;
}

static inline long check_vm_size(void)
{
    return check_proc_kb("/proc/self/status", "VmSize:");
}

#endif /* EBB_TEST_CHECK_H */
