/*
 * test_unwind.c — debug mode's fast unwinder (src/trace.c) gives the same
 * stack traces as libgcc's unwinder, or gives up and leaves the trace to it.
 *
 * Each case builds a call chain and, at its leaf, asks trace_crosscheck for
 * the trace above the leaf both ways: the fast walk (rules worked out from the
 * FDEs and kept by pc) and _Unwind_Backtrace. The chains cover what changes a
 * frame's rule: frames without a frame pointer (this file is built with -O2,
 * which omits it on x86-64), frames with one, frames whose CFA is rbp-based
 * because of alloca, deep recursion, libc's frames (qsort's callback), a
 * second thread, and a signal handler's frame, where the fast walk must give
 * up rather than guess; and a library unloaded and replaced at its address
 * by one whose frames differ (tests/unwind_plugin.c), whose pcs must not
 * keep the rules worked out for the first.
 *
 * Linked with build/obj/libebb-internal.a (trace_crosscheck is internal); run with
 * EBB_DEBUG=1, which sets the unwinder up. Elsewhere than on x86-64 there is
 * no fast unwinder: the chains then check libgcc's traces alone, and say so.
 */
#include "check.h"

#include <alloca.h>
#include <dlfcn.h>
#include <link.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "ebb.h"

#define MAX_FRAMES 32

/* src/trace.c (internal to the library; reachable from the archive). */
int trace_crosscheck(uintptr_t mark, int max, uintptr_t *fast, uintptr_t *slow, int *n_slow);

typedef struct {
    int fast_n, slow_n;
    uintptr_t fast[MAX_FRAMES], slow[MAX_FRAMES];
} both_t;

/* The leaf: its canonical frame address is the mark (it keeps a frame
 * pointer, as debug.c's entry functions do); the traces start at its
 * caller. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void probe(both_t *b)
{
    uintptr_t mark = (uintptr_t)__builtin_frame_address(0) + 2 * sizeof(void *);
    b->fast_n = trace_crosscheck(mark, MAX_FRAMES, b->fast, b->slow, &b->slow_n);
    __asm__ volatile("" ::: "memory"); /* not a tail call: the frame must stay */
}

static void expect_same(const both_t *b, const char *chain)
{
#if !defined(__x86_64__)
    /* No fast unwinder here (src/trace.c builds its rule table on x86-64
     * only): libgcc takes every trace, and there is nothing to compare. */
    static const char *said_for;
    if (said_for != check_case_name) {
        said_for = check_case_name;
        SKIP_CHECK("no fast unwinder on this architecture (x86-64 only): libgcc's traces are "
                   "checked, not compared with it");
    }
    CHECK(b->fast_n == -1, "%s: there is no fast walk here, yet it returned %d frames", chain,
          b->fast_n);
    CHECK(b->slow_n >= 3, "%s: libgcc found only %d frames", chain, b->slow_n);
    return;
#endif
    REQUIRE(b->fast_n >= 0, "%s: the fast walk gave up; it should follow this chain", chain);
    CHECK(b->slow_n >= 3, "%s: libgcc found only %d frames", chain, b->slow_n);
    CHECK(b->fast_n == b->slow_n, "%s: the fast walk found %d frames, libgcc %d", chain, b->fast_n,
          b->slow_n);
    int n = b->fast_n < b->slow_n ? b->fast_n : b->slow_n;
    for (int i = 0; i < n; i++)
        CHECK(b->fast[i] == b->slow[i], "%s: frame %d is %#lx by the fast walk, %#lx by libgcc", chain,
              i, (unsigned long)b->fast[i], (unsigned long)b->slow[i]);
}

/* ------------------------------------------------------------------ chains */

static volatile int sink;

__attribute__((noinline)) static int recurse(both_t *b, int depth)
{
    if (depth == 0) {
        probe(b);
        return 0;
    }
    int r = recurse(b, depth - 1) + depth;
    sink = r;
    return r;
}

/* alloca makes the CFA rbp-based in this frame and moves rsp by a size only
 * known at run time: an rsp-based guess would be wrong. */
__attribute__((noinline)) static int with_alloca(both_t *b, size_t n)
{
    volatile char *buf = alloca(n);
    buf[0] = 1;
    buf[n - 1] = 2;
    probe(b);
    return buf[0] + buf[n - 1];
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static int with_frame_pointer(both_t *b,
                                                                                           int depth)
{
    volatile int local = depth;
    int r = recurse(b, depth);
    return r + local;
}

__attribute__((noinline)) static int alloca_then_recurse(both_t *b, size_t n, int depth)
{
    volatile char *buf = alloca(n);
    buf[0] = (char)depth;
    int r = depth > 0 ? alloca_then_recurse(b, n + 48, depth - 1) : with_alloca(b, n);
    return r + buf[0];
}

static both_t *qsort_target;

static int compare_and_probe(const void *a, const void *b)
{
    if (qsort_target != NULL) {
        probe(qsort_target);
        qsort_target = NULL;
    }
    return *(const int *)a - *(const int *)b;
}

/* ------------------------------------------------------------------ cases */

static void rsp_based_frames_and_recursion_match(void)
{
    static const int depths[] = {0, 1, 2, 5, 17, 40};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        both_t b = {0};
        recurse(&b, depths[i]);
        char chain[64];
        snprintf(chain, sizeof chain, "recursion %d deep", depths[i]);
        expect_same(&b, chain);
    }
}

static void alloca_frames_match(void)
{
    static const size_t sizes[] = {8, 100, 4096, 70000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        both_t b = {0};
        sink = with_alloca(&b, sizes[i]);
        expect_same(&b, "an alloca frame");
    }
    both_t b = {0};
    sink = alloca_then_recurse(&b, 24, 6);
    expect_same(&b, "six alloca frames in a row");
}

static void frame_pointer_frames_match(void)
{
    both_t b = {0};
    sink = with_frame_pointer(&b, 3);
    expect_same(&b, "a frame-pointer frame above rsp-based ones");
}

static void libc_frames_match(void)
{
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 37) % 64;
    both_t b = {0};
    qsort_target = &b;
    qsort(v, 64, sizeof v[0], compare_and_probe);
    expect_same(&b, "qsort's callback");
}

static void *thread_main(void *arg)
{
    recurse(arg, 4);
    return NULL;
}

static void another_thread_matches(void)
{
    both_t b = {0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, thread_main, &b) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    expect_same(&b, "a second thread (down to clone)");
}

static both_t in_handler;

static void handler(int sig)
{
    (void)sig;
    probe(&in_handler);
}

static void a_signal_frame_makes_the_fast_walk_give_up(void)
{
    struct sigaction sa = {.sa_handler = handler};
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction failed");
    raise(SIGUSR1);
    signal(SIGUSR1, SIG_DFL);
    CHECK(in_handler.fast_n == -1,
          "through a signal frame the fast walk should give up (libgcc then takes the trace); "
          "it returned %d frames", in_handler.fast_n);
    CHECK(in_handler.slow_n >= 4, "libgcc should unwind through the signal frame; it found %d frames",
          in_handler.slow_n);
}

#if defined(__x86_64__)
/* Review finding: DW_CFA_register (a register saved in another register, as
 * in glibc's longjmp and hand-written assembly) was read as remember_state,
 * its operands then run as opcodes, and the fast walk returned 2 frames
 * where libgcc found 6. It must give up instead. keep_rbp_in_rbx(cb, arg)
 * keeps the caller's rbp in rbx, uses rbp as scratch, and calls cb(arg). */
void keep_rbp_in_rbx(void (*cb)(both_t *), both_t *arg);
__asm__(".text\n.globl keep_rbp_in_rbx\n.type keep_rbp_in_rbx,@function\nkeep_rbp_in_rbx:\n"
        ".cfi_startproc\n"
        "push %rbx\n.cfi_adjust_cfa_offset 8\n.cfi_offset %rbx, -16\n"
        "mov %rbp, %rbx\n.cfi_register %rbp, %rbx\n"
        "lea 32(%rsp), %rbp\n"
        "mov %rdi, %rax\nmov %rsi, %rdi\ncall *%rax\n"
        "mov %rbx, %rbp\n.cfi_restore %rbp\n"
        "pop %rbx\n.cfi_adjust_cfa_offset -8\nret\n.cfi_endproc\n"
        ".size keep_rbp_in_rbx,.-keep_rbp_in_rbx\n");

/* A frame-pointer caller: its CFA is rbp + 16, so the walk needs its rbp. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static int rbp_in_rbx_caller(both_t *b)
{
    volatile char pad[200];
    pad[0] = 1;
    keep_rbp_in_rbx(probe, b);
    return pad[0];
}

static void a_register_saved_in_a_register_makes_the_fast_walk_give_up(void)
{
    static both_t b;
    sink += rbp_in_rbx_caller(&b);
    CHECK(b.fast_n == -1,
          "through a frame with DW_CFA_register the fast walk should give up (libgcc then takes "
          "the trace); it returned %d frames (libgcc: %d)", b.fast_n, b.slow_n);
    CHECK(b.slow_n >= 4, "libgcc should unwind through it; it found %d frames", b.slow_n);
}

typedef void (*plugin_call_fn)(void (*cb)(void *), void *arg);

static void probe_cb(void *arg)
{
    probe(arg);
}

/* dlopen the plugin build `name` from this program's directory into *h. */
static void plugin_open(const char *name, void **h, plugin_call_fn *call)
{
    char exe[4096], path[4096 + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    REQUIRE(n > 0, "readlink /proc/self/exe");
    exe[n] = '\0';
    snprintf(path, sizeof path, "%s/%s", dirname(exe), name);
    *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(*h != NULL, "dlopen %s: %s", path, dlerror());
    *(void **)call = dlsym(*h, "plugin_call");
    REQUIRE(*call != NULL, "dlsym plugin_call in %s", path);
}

static void a_library_replaced_at_its_address_is_unwound_by_its_own_rules(void)
{
    plugin_call_fn big = NULL, small = NULL;
    void *h = NULL;
    plugin_open("libunwind_plugin_big.so", &h, &big);
    REQUIRE(big != NULL, "the first library");
    both_t b = {0};
    big(probe_cb, &b);
    expect_same(&b, "through the first library (an 8 KiB frame)");
    REQUIRE(dlclose(h) == 0, "dlclose: %s", dlerror());
    plugin_open("libunwind_plugin_small.so", &h, &small);
    REQUIRE(small != NULL, "the second library");
    /* Same size, same layout: the loader puts it where the first one was, so
     * the return address into plugin_call is a pc the fast walk has seen. */
    REQUIRE((void *)small == (void *)big, "the second library should load at the first one's "
            "address (%p); it is at %p, so this case cannot check anything",
            (void *)big, (void *)small);
    both_t c = {0};
    small(probe_cb, &c);
    expect_same(&c, "through the library loaded in its place (no frame)");
    dlclose(h);
}

/* dlclose frees (so captures) while it holds the loader's list lock, and the
 * unload check takes that lock through dl_iterate_phdr, as does a callback of
 * it that allocates. A thread whose allocations keep missing the capture
 * cache (each below a frame of a new size) runs beside one that loads and
 * unloads a library and lists the modules with a callback that allocates.
 * With the check run under an ebb lock (eb59bee) this deadlocked within a
 * second; alarm() turns a hang into a failure. */
static atomic_int stop_churn;

__attribute__((noinline)) static void *alloc_below_frame(uint64_t x)
{
    volatile char *pad = alloca(16 + x % 65536);
    pad[0] = 0;
    void *p = malloc(16 + (x >> 20) % 512);
    __asm__ volatile("" ::: "memory"); /* keep the frame: no tail call */
    return p;
}

static void *alloc_churn(void *arg)
{
    uint64_t x = (uint64_t)(uintptr_t)arg;
    long n = 0;
    while (!atomic_load_explicit(&stop_churn, memory_order_relaxed)) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        free(alloc_below_frame(x));
        n++;
    }
    return (void *)n;
}

static int allocating_callback(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info, (void)size;
    free(malloc(32 + (size_t)(uintptr_t)arg));
    return 0;
}

static void dlclose_and_module_listing_beside_allocations_do_not_deadlock(void)
{
    alarm(60);
    atomic_store(&stop_churn, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, alloc_churn, (void *)(uintptr_t)88172645463325252ull) == 0,
            "pthread_create");
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long rounds = 0;
    do {
        plugin_call_fn call = NULL;
        void *h = NULL;
        plugin_open("libunwind_plugin_small.so", &h, &call);
        if (h == NULL)
            break;
        dlclose(h);
        dl_iterate_phdr(allocating_callback, (void *)(uintptr_t)rounds);
        rounds++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < 1500);
    atomic_store(&stop_churn, 1);
    void *allocs;
    pthread_join(t, &allocs);
    alarm(0);
    printf("    info: %ld load/unload rounds beside %ld allocations\n", rounds, (long)allocs);
    CHECK(rounds > 10 && (long)allocs > 1000, "expected both threads to make progress: %ld rounds, "
          "%ld allocations", rounds, (long)allocs);
}
#endif

/* Review finding: a child forked while another thread of the parent was
 * inside dl_iterate_phdr inherits the loader's lock held by no one, and its
 * first capture that missed the cache listed modules (the unload check) and
 * hung: 49 children of 50. Each child here allocates from a call path the
 * cache has not seen, then exits; none may hang. */
static atomic_int stop_listing;

static int count_modules(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    for (int k = 0; k < 2000; k++)
        *(volatile unsigned long *)arg += info->dlpi_phnum + (unsigned)k;
    return 0;
}

static void *list_modules(void *arg)
{
    (void)arg;
    unsigned long sum = 0;
    while (!atomic_load(&stop_listing))
        dl_iterate_phdr(count_modules, &sum);
    return NULL;
}

__attribute__((noinline)) static void child_allocates(int depth)
{
    if (depth > 0) {
        child_allocates(depth - 1);
        sink++;
        return;
    }
    void *volatile p = malloc(100);
    free(p);
}

static void a_child_forked_beside_a_module_listing_can_allocate(void)
{
    enum { CHILDREN = 30 };
    atomic_store(&stop_listing, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, list_modules, NULL) == 0, "pthread_create");
    int hung = 0, failed = 0;
    for (int i = 0; i < CHILDREN; i++) {
        pid_t pid = fork();
        REQUIRE(pid >= 0, "fork failed");
        if (pid == 0) {
            child_allocates(i % 7 + 1);
            _exit(0);
        }
        int status = 0;
        pid_t got = 0;
        for (int ms = 0; ms < 2000 && got == 0; ms += 10) {
            got = waitpid(pid, &status, WNOHANG);
            if (got == 0)
                usleep(10000);
        }
        if (got == 0) {
            hung++;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed++;
        }
    }
    atomic_store(&stop_listing, 1);
    pthread_join(t, NULL);
    CHECK(hung == 0, "%d of %d children forked beside a dl_iterate_phdr loop hung in malloc (2 s)",
          hung, CHILDREN);
    CHECK(failed == 0, "%d of %d children did not exit 0", failed, CHILDREN);
}

int main(void)
{
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    if (ebb_stats_get(&st) != 0 || !st.debug_mode) {
        fprintf(stderr, "test_unwind: run with EBB_DEBUG=1\n");
        return 1;
    }
    RUN_CASE(rsp_based_frames_and_recursion_match);
    RUN_CASE(alloca_frames_match);
    RUN_CASE(frame_pointer_frames_match);
    RUN_CASE(libc_frames_match);
    RUN_CASE(another_thread_matches);
    RUN_CASE(a_signal_frame_makes_the_fast_walk_give_up);
    RUN_CASE(a_child_forked_beside_a_module_listing_can_allocate);
#if defined(__x86_64__)
    RUN_CASE(a_register_saved_in_a_register_makes_the_fast_walk_give_up);
#endif
#if defined(__x86_64__)
    RUN_CASE(a_library_replaced_at_its_address_is_unwound_by_its_own_rules);
    RUN_CASE(dlclose_and_module_listing_beside_allocations_do_not_deadlock);
#endif
    return check_finish();
}
