/*
 * test_static.c — ebb linked statically (build/libebb.a on the link line, no
 * -lebb): the standard names in the executable must be ebb's, for this
 * program's calls and for libc's internal ones (strdup, stdio), with threads.
 * Built twice (tests.mk): against the shared libc, and fully -static
 * (-DFULLY_STATIC) where libc.a is installed. The suite runs the fully static
 * one again with EBB_DEBUG=1, where a fault report must carry traces.
 */
#include "check.h"

#include <fcntl.h>
#include <grp.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebb.h"

static void malloc_in_a_static_link_is_ebb(void)
{
    const size_t sizes[] = {0, 1, 100, 5000, 200000, 5 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = malloc(sizes[i]);
        REQUIRE(p, "malloc(%zu): expected a block", sizes[i]);
        size_t u = ebb_malloc_usable_size(p);
        CHECK(u >= sizes[i], "malloc(%zu): expected ebb to know the block "
              "(ebb_malloc_usable_size >= %zu), got %zu", sizes[i], sizes[i], u);
        CHECK(u == malloc_usable_size(p), "malloc(%zu): ebb_malloc_usable_size %zu != "
              "malloc_usable_size %zu", sizes[i], u, malloc_usable_size(p));
        memset(p, 1, sizes[i]);
        ebb_free(p);
    }
    void *a = aligned_alloc(4096, 100), *c = calloc(10, 10);
    CHECK(a && (uintptr_t)a % 4096 == 0, "aligned_alloc(4096): got %p", a);
    CHECK(a && ebb_malloc_usable_size(a) >= 100, "aligned_alloc: not an ebb block");
    CHECK(c && ebb_malloc_usable_size(c) >= 100, "calloc: not an ebb block");
    free(a);
    ebb_free(c);
}

/* glibc's public __libc_mallopt and __libc_mallinfo are ebb's too: a fully
 * static program that called one linked libc.a's malloc beside ebb's
 * (multiple definitions of malloc), and under LD_PRELOAD they reported
 * glibc's empty arena (review finding). */
extern int __libc_mallopt(int param, int value);
extern struct mallinfo __libc_mallinfo(void);

static void glibc_reporting_names_are_ebbs(void)
{
    void *p = malloc(3 * MiB);
    REQUIRE(p, "malloc(3 MiB)");
    memset(p, 1, 3 * MiB);
    struct mallinfo mi = __libc_mallinfo();
    CHECK((size_t)mi.hblkhd + (size_t)mi.uordblks >= 3 * MiB, "__libc_mallinfo with a live "
          "3 MiB block: expected uordblks + hblkhd >= 3 MiB, got %d + %d", mi.uordblks, mi.hblkhd);
    CHECK(__libc_mallopt(M_TRIM_THRESHOLD, 1 << 20) == 1, "__libc_mallopt: expected 1 (accepted)");
    free(p);
}

/* Names ebb uses inside, defined by the program: the archive keeps its own
 * local, so the program links and its names stay its own (review finding:
 * "multiple definition of lock_acquire", and a global `tls` clashed with
 * ebb's thread-local block). */
int tls = 7;
static int program_locks;
void lock_acquire(void *lock);
void lock_acquire(void *lock)
{
    (void)lock;
    program_locks++;
}
void stats_init(void);
void stats_init(void)
{
    program_locks += 100;
}

static void the_programs_own_names_are_its_own(void)
{
    lock_acquire(NULL);
    stats_init();
    void *p = malloc(100000); /* ebb takes its own locks meanwhile */
    free(p);
    CHECK(program_locks == 101 && tls == 7, "expected the program's lock_acquire, stats_init "
          "and tls, got %d calls and tls %d", program_locks, tls);
}

static void libc_internal_allocations_use_ebb(void)
{
    char *s = strdup("static linking");
    REQUIRE(s, "strdup: expected a string");
    CHECK(ebb_malloc_usable_size(s) >= sizeof "static linking", "strdup: expected libc's "
          "malloc call to reach ebb (ebb_malloc_usable_size >= %zu), got %zu",
          sizeof "static linking", ebb_malloc_usable_size(s));
    free(s);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f, "open_memstream");
    for (int i = 0; i < 5000; i++)
        fprintf(f, "%d,", i);
    fclose(f);
    CHECK(buf && ebb_malloc_usable_size(buf) > len, "open_memstream's buffer (%zu bytes): "
          "expected an ebb block, usable %zu", len, buf ? ebb_malloc_usable_size(buf) : 0);
    free(buf);
}

#define SLOTS 1024
static _Atomic(uint8_t *) slot[SLOTS];
static atomic_long thread_bad;

static void *worker(void *arg)
{
    uint64_t s = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < 100000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        size_t n = 8 + (size_t)(s >> 40) % (s % 50 == 0 ? 300000 : 2000);
        uint8_t *p = malloc(n);
        if (!p) {
            atomic_fetch_add(&thread_bad, 1);
            continue;
        }
        /* First 8 bytes: the size; then a byte pattern of the address. */
        memcpy(p, &n, sizeof n);
        memset(p + 8, (int)((uintptr_t)p >> 4) & 0xff, n - 8 < 64 ? n - 8 : 64);
        uint8_t *old = atomic_exchange(&slot[(s >> 20) % SLOTS], p);
        if (old) {
            size_t on;
            memcpy(&on, old, sizeof on);
            size_t m = on - 8 < 64 ? on - 8 : 64;
            if (check_all_bytes(old + 8, m, (uint8_t)(((uintptr_t)old >> 4) & 0xff)) != m ||
                ebb_malloc_usable_size(old) < on)
                atomic_fetch_add(&thread_bad, 1);
            free(old); /* usually allocated by another thread */
        }
    }
    return NULL;
}

static void threads_allocate_and_free_across_each_other(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0, "create");
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < SLOTS; i++)
        free(atomic_exchange(&slot[i], NULL));
    CHECK(atomic_load(&thread_bad) == 0, "expected every block intact and known to ebb, %ld "
          "were not", atomic_load(&thread_bad));
}

__attribute__((noinline)) static char *allocate_in_static_link(size_t n)
{
    char *p = malloc(n);
    __asm__ volatile("" ::: "memory"); /* keep this frame: no tail call */
    return p;
}

/* Debug mode only: in a static link ebb's unwinder is the program's own
 * (trace.c, "Capture"); a double free must still be reported with the
 * allocation's trace, symbolized from the executable. */
static void debug_report_in_a_static_link_names_the_allocator(void)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe");
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        dup2(fds[1], 2);
        char *p = allocate_in_static_link(40);
        free(p);
        free(p);
        _exit(0);
    }
    close(fds[1]);
    static char report[16384];
    check_read_all(fds[0], report, sizeof report);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "expected the double free to "
          "abort the child, status %#x", status);
    const char *alloc = strstr(report, "allocated at:");
    CHECK(strstr(report, "==ebb== ERROR: double free of ") != NULL, "expected a double free "
          "report, got:\n%s", report);
    CHECK(alloc && strstr(alloc, " in allocate_in_static_link"), "expected the allocation "
          "trace to name allocate_in_static_link, got:\n%s", report);
}

/* The process ends when its last thread of its own does, also linked
 * statically: ebb's scavenger takes itself out of glibc's count of threads
 * (purge.c, "Not one of the program's threads"), found by dlvsym with a
 * shared libc and in the executable's own symbol table in a fully static
 * one (os.c). The child makes ebb start its scavenger, then main starts a
 * thread and calls pthread_exit; the child must end by exit(0) (its atexit
 * handler writes to a pipe) within 10 s, where before it ran on for good
 * with the scavenger alone. */
static int exit_pipe[2];

static void exit_marker(void)
{
    char c = 'x';
    if (write(exit_pipe[1], &c, 1) != 1)
        _exit(9);
}

static void *last_thread_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++)
        free(malloc(64 * KiB));
    return NULL;
}

static void the_process_ends_when_main_called_pthread_exit_and_its_last_thread_returns(void)
{
    REQUIRE(pipe(exit_pipe) == 0, "pipe failed");
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork failed");
    if (pid == 0) {
        close(exit_pipe[0]);
        atexit(exit_marker);
        free(malloc(3 * MiB)); /* a huge block: the process wants its scavenger */
        for (int i = 0; i < 1000 && check_thread_count() < 2; i++) {
            free(malloc(200 * KiB)); /* an allocation slow path starts it */
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (check_thread_count() < 2)
            _exit(7); /* no scavenger: nothing would be checked */
        pthread_t t;
        if (pthread_create(&t, NULL, last_thread_main, NULL) != 0)
            _exit(8);
        pthread_exit(NULL);
    }
    close(exit_pipe[1]);
    int status = 0;
    bool ended = check_wait_child(pid, &status, 10.0);
    char c = 0;
    bool marked = read(exit_pipe[0], &c, 1) == 1 && c == 'x';
    close(exit_pipe[0]);
    REQUIRE(ended, "the process should end when its last thread does; it was still running "
            "after 10 s and was killed");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "expected exit status 0, got %#x (7: "
          "ebb's scavenger never started, so nothing was checked)", status);
    CHECK(marked, "the process ended without running its atexit handlers (exit(0) was not "
          "called)");
}

/* A program with raised privileges ignores every EBB_* variable
 * (options.c, options_report_ignored): its environment comes from a less
 * privileged user, who must not make it append ebb's reports to a file only
 * the program could write, nor change its exit status. The test builds a
 * set-user-ID root copy of itself, runs it as root (the variables apply:
 * the control) and then as nobody (they must not), each time with a stats
 * file and a debug log in a directory only root may write, and a leak that
 * EBB_DEBUG_LEAK_EXITCODE would turn into exit status 3. Needs root. */
#define PRIVILEGED_CHILD "privileged"

__attribute__((noinline)) static void lose_a_block(void)
{
    void *volatile p = malloc(4000);
    memset((void *)p, 1, 4000);
    p = NULL;
}

__attribute__((noinline)) static void scrub_the_stack(void)
{
    volatile char junk[16384];
    memset((char *)junk, 0, sizeof junk);
}

static int privileged_child(void)
{
    /* First, perhaps the process's first allocator call: setenv's realloc of
     * environ. Taking the EBB_* entries out inside it put the new variable
     * past environ's end (review finding); it must read back. */
    setenv("SET_BY_THE_PROGRAM", "yes", 1);
    const char *set = getenv("SET_BY_THE_PROGRAM");
    printf("setenv=%s\n", set && strcmp(set, "yes") == 0 ? "kept" : "lost");
    printf("raised=%lu\n", getauxval(AT_SECURE));
    /* What a program it runs would inherit (review finding: a set-user-ID
     * program that set its real uid to 0 passed them to a helper with ebb,
     * which honoured them). */
    printf("inherited=%d\n", getenv("EBB_STATS_FILE") != NULL || getenv("EBB_DEBUG") != NULL);
    fflush(stdout);
    lose_a_block();
    scrub_the_stack();
    void *keep = malloc(300000);
    check_keep(keep);
    free(keep);
    return 0;
}

/* Run `prog --child privileged` with env, as uid (-1: as we are), its
 * stdout and stderr into out (cap bytes). Returns the wait status, or -1. */
static int run_privileged_child(const char *prog, char *const env[], int uid, char *out,
                                size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        if (uid >= 0 && (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
                         setresuid(uid, uid, uid) != 0))
            _exit(120);
        char *argv[] = {(char *)prog, "--child", PRIVILEGED_CHILD, NULL};
        execve(prog, argv, env);
        _exit(121);
    }
    close(fds[1]);
    check_read_all(fds[0], out, cap);
    close(fds[0]);
    int status = -1;
    if (!check_wait_child(pid, &status, 30.0))
        return -1;
    return status;
}

static bool copy_file(const char *from, const char *to, mode_t mode)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    bool ok = in >= 0 && out >= 0;
    static char buf[65536];
    ssize_t r;
    while (ok && (r = read(in, buf, sizeof buf)) > 0)
        ok = write(out, buf, (size_t)r) == r;
    if (in >= 0)
        close(in);
    if (out >= 0)
        ok = close(out) == 0 && ok;
    return ok && chmod(to, mode) == 0;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void a_program_with_raised_privileges_ignores_ebb_variables(void)
{
    if (geteuid() != 0) {
        SKIP_CHECK("needs root: a set-user-ID root program run by another user");
        return;
    }
    char dir[] = "/tmp/ebb-privileged.XXXXXX";
    REQUIRE(mkdtemp(dir) && chmod(dir, 0755) == 0, "mkdtemp in /tmp");
    char prog[128], outdir[128], stats[160], log[160], stats_env[200], log_env[200];
    snprintf(prog, sizeof prog, "%s/prog", dir);
    snprintf(outdir, sizeof outdir, "%s/root-only", dir);
    snprintf(stats, sizeof stats, "%s/stats", outdir);
    snprintf(log, sizeof log, "%s/log", outdir);
    snprintf(stats_env, sizeof stats_env, "EBB_STATS_FILE=%s", stats);
    snprintf(log_env, sizeof log_env, "EBB_DEBUG_LOG=%s", log);
    char *env[] = {"EBB_STATS=1", stats_env, "EBB_DEBUG=1", log_env,
                   "EBB_DEBUG_LEAK_EXITCODE=3", NULL};
    static char out[16384];
    REQUIRE(mkdir(outdir, 0755) == 0, "mkdir %s", outdir);
    REQUIRE(copy_file("/proc/self/exe", prog, 04755), "copying the test program to %s", prog);

    /* The control: run by root, the variables apply. */
    int status = run_privileged_child(prog, env, -1, out, sizeof out);
    CHECK(strstr(out, "raised=0"), "as root the program has no raised privileges; its "
          "output:\n%s", out);
    CHECK(file_exists(stats) && file_exists(log), "as root, expected the stats report in %s "
          "and the leak report in %s (the variables apply); output:\n%s", stats, log, out);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3, "as root, expected exit status 3 "
          "(EBB_DEBUG_LEAK_EXITCODE, a lost block), got %#x; output:\n%s", status, out);
    CHECK(strstr(out, "inherited=1"), "as root, the variables stay in the environment; "
          "output:\n%s", out);
    unlink(stats);
    unlink(log);

    /* Set-user-ID root, run by nobody: the variables are the caller's. */
    status = run_privileged_child(prog, env, 65534, out, sizeof out);
    if (strstr(out, "raised=0")) {
        SKIP_CHECK("%s runs without raised privileges: /tmp is mounted nosuid", prog);
    } else {
        CHECK(strstr(out, "raised=1"), "expected the set-user-ID program to start with "
              "AT_SECURE set; its output:\n%s", out);
        CHECK(!file_exists(stats) && !file_exists(log), "expected no file written for "
              "another user's EBB_STATS_FILE and EBB_DEBUG_LOG; stats %s, log %s",
              file_exists(stats) ? "written" : "absent", file_exists(log) ? "written" : "absent");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "expected exit status 0 "
              "(EBB_DEBUG_LEAK_EXITCODE ignored), got %#x; output:\n%s", status, out);
        CHECK(strstr(out, "inherited=0"), "expected the EBB_* variables taken out of the "
              "environment, for the programs it runs; output:\n%s", out);
        CHECK(strstr(out, "setenv=kept"), "a variable the program sets must stay set; "
              "output:\n%s", out);
        const char *said = strstr(out, "its EBB_* variables are ignored");
        CHECK(said && !strstr(said + 1, "its EBB_* variables are ignored"), "expected one "
              "line saying the EBB_* variables are ignored; output:\n%s", out);
    }
    unlink(stats);
    unlink(log);
    unlink(prog);
    rmdir(outdir);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0 && strcmp(argv[2], PRIVILEGED_CHILD) == 0)
        return privileged_child();
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef FULLY_STATIC
    printf("fully static build\n");
#endif
    RUN_CASE(malloc_in_a_static_link_is_ebb);
    RUN_CASE(libc_internal_allocations_use_ebb);
    RUN_CASE(glibc_reporting_names_are_ebbs);
    RUN_CASE(the_programs_own_names_are_its_own);
    RUN_CASE(threads_allocate_and_free_across_each_other);
    RUN_CASE(the_process_ends_when_main_called_pthread_exit_and_its_last_thread_returns);
    RUN_CASE(a_program_with_raised_privileges_ignores_ebb_variables);
    const char *debug = getenv("EBB_DEBUG");
    if (debug && strcmp(debug, "1") == 0)
        RUN_CASE(debug_report_in_a_static_link_names_the_allocator);
    return check_finish();
}
