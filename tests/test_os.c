/*
 * test_os.c — the OS layer's readers of /proc-style files (src/os.c):
 * os_for_each_record, which the leak report (/proc/self/maps), the
 * symbolizer and the early options reader (/proc/self/environ) use to read
 * files of any length through a small buffer, and os_maps_line_parse.
 *
 * And os_other_threads_registers, with which the leak report reads the
 * registers of threads still running: a value only a register holds arrives,
 * and the threads it cannot ask are counted, but for one it is told to skip.
 *
 * Linked with build/obj/libebb-internal.a (all are internal to the library).
 */
#include "check.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The OS layer's readers are internal to the library (reachable from the
 * archive): their declarations come from its own header, so that a change
 * there (a struct's size) cannot leave this test reading another layout. */
#include "../src/internal.h"

#define MAX_RECORDS 20000

typedef struct seen_s {
    size_t count;
    size_t len[MAX_RECORDS];
    char first[MAX_RECORDS]; /* each record's first byte */
    bool intact[MAX_RECORDS]; /* its bytes are what the writer wrote */
} seen_t;

static seen_t seen;

/* Record i is `len_of(i)` bytes of the letter 'a' + i % 26. */
static size_t len_of(size_t i)
{
    return 1 + (i * 7919) % 300;
}

static void note(const char *rec, size_t len, void *arg)
{
    seen_t *s = arg;
    if (s->count == MAX_RECORDS)
        return;
    size_t i = s->count++;
    s->len[i] = len;
    s->first[i] = len ? rec[0] : 0;
    bool same = true;
    for (size_t k = 1; k < len; k++)
        same &= rec[k] == rec[0];
    s->intact[i] = same;
}

/* Write `n` records separated by `sep` (with a last separator or not) into
 * a temporary file; its path into `path`. */
static bool write_records(char *path, size_t n, char sep, bool last_sep)
{
    strcpy(path, "/tmp/ebb-test-os.XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return false;
    static char rec[512];
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        size_t len = len_of(i);
        memset(rec, 'a' + (int)(i % 26), len);
        rec[len] = sep;
        ok = write(fd, rec, len + (i + 1 < n || last_sep)) == (ssize_t)(len + (i + 1 < n || last_sep));
    }
    close(fd);
    return ok;
}

static void check_records(size_t n, const char *what)
{
    CHECK(seen.count == n, "%s: %zu records given, %zu written", what, seen.count, n);
    size_t bad = 0;
    for (size_t i = 0; i < seen.count && i < n; i++)
        bad += seen.len[i] != len_of(i) || seen.first[i] != 'a' + (int)(i % 26) || !seen.intact[i];
    CHECK(bad == 0, "%s: %zu records differ from what was written", what, bad);
}

/* Write n records, read them back through a buffer of cap bytes, compare. */
static void round_trip(size_t n, char sep, bool last_sep, size_t cap, const char *what)
{
    char path[64];
    REQUIRE(write_records(path, n, sep, last_sep), "%s: could not write the file", what);
    static char buf[4096];
    memset(&seen, 0, sizeof seen);
    bool ok = os_for_each_record(path, sep, buf, cap, note, &seen);
    unlink(path);
    CHECK(ok, "%s: reading the file should succeed", what);
    check_records(n, what);
}

static void lines_of_a_file_much_longer_than_the_buffer_all_arrive(void)
{
    round_trip(10000, '\n', true, 1024, "10,000 lines of 1..300 bytes through 1 KiB");
}

static void a_last_record_without_its_separator_is_given(void)
{
    round_trip(500, '\0', false, 700, "500 NUL-separated records, the last unterminated");
}

static void a_record_longer_than_the_buffer_is_given_once_cut(void)
{
    char path[64] = "/tmp/ebb-test-os.XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp failed");
    static char text[6000];
    memset(text, 'x', 5000);
    text[5000] = '\n';
    memcpy(text + 5001, "short\nlast\n", 11);
    bool written = write(fd, text, 5012) == 5012;
    close(fd);
    REQUIRE(written, "could not write the file");
    static char buf[1024];
    memset(&seen, 0, sizeof seen);
    bool ok = os_for_each_record(path, '\n', buf, sizeof buf, note, &seen);
    unlink(path);
    CHECK(ok, "reading the file should succeed");
    CHECK(seen.count == 3, "three records: the long one once, cut, then two; got %zu", seen.count);
    CHECK(seen.len[0] == sizeof buf && seen.first[0] == 'x' && seen.intact[0],
          "the long record comes cut to the buffer (%zu bytes of x); got %zu bytes of %c",
          sizeof buf, seen.len[0], seen.first[0]);
    CHECK(seen.len[1] == 5 && seen.first[1] == 's', "then \"short\"; got %zu bytes of %c", seen.len[1],
          seen.first[1]);
    CHECK(seen.len[2] == 4 && seen.first[2] == 'l', "then \"last\"; got %zu bytes of %c", seen.len[2],
          seen.first[2]);
}

static void a_missing_file_is_false_and_gives_nothing(void)
{
    static char buf[64];
    memset(&seen, 0, sizeof seen);
    errno = 1234;
    bool ok = os_for_each_record("/nonexistent/ebb-test", '\n', buf, sizeof buf, note, &seen);
    CHECK(!ok && seen.count == 0, "a missing file: false and no record (got %d, %zu)", ok, seen.count);
    CHECK(errno == 1234, "errno should be left as it was (1234); it is %d", errno);
}

static void maps_lines_parse_with_and_without_a_path(void)
{
    static const char with[] = "7f2b1c000000-7f2b1c021000 rw-p 00000000 00:00 0 \t  /usr/lib/x.so";
    static const char anon[] = "55d4c8a00000-55d4c8a21000 r--s 00001000 08:01 1234";
    static const char stack[] = "7ffd0e000000-7ffd0e021000 rw-p 00000000 00:00 0      [stack]";
    os_maps_line_t m;
    REQUIRE(os_maps_line_parse(with, strlen(with), &m), "a line with a path should parse");
    CHECK(m.start == 0x7f2b1c000000 && m.end == 0x7f2b1c021000, "addresses %#lx-%#lx",
          (unsigned long)m.start, (unsigned long)m.end);
    CHECK(strcmp(m.perms, "rw-p") == 0, "permissions \"%s\"", m.perms);
    CHECK(m.path && m.path_len == 13 && memcmp(m.path, "/usr/lib/x.so", 13) == 0,
          "path \"%.*s\"", (int)m.path_len, m.path ? m.path : "");
    REQUIRE(os_maps_line_parse(anon, strlen(anon), &m), "a line without a path should parse");
    CHECK(m.path == NULL && strcmp(m.perms, "r--s") == 0, "no path, permissions r--s (\"%s\")", m.perms);
    REQUIRE(os_maps_line_parse(stack, strlen(stack), &m), "the stack's line should parse");
    CHECK(m.path && m.path_len == 7 && memcmp(m.path, "[stack]", 7) == 0, "[stack] as its path");
    CHECK(!os_maps_line_parse("garbage", 7, &m), "garbage should not parse");
    CHECK(!os_maps_line_parse("7f00-", 5, &m), "a cut line should not parse");
    CHECK(!os_maps_line_parse(with, 20, &m), "a line cut inside its addresses should not parse");
}

/* ------------------------------------------------------ other threads' registers */
#define REGISTER_MAGIC ((uintptr_t)0x5EB0C0DE1234ABCDull)

static atomic_int spinning, stop_spinning;

/* Where the holder keeps the value: a general register, or (x86-64 and
 * aarch64) a part of a vector register, where a memcpy may carry a pointer. */
enum {
    HOLD_GENERAL,
    HOLD_XMM8,      /* x86-64: xmm8 (the legacy area of the signal frame) */
    HOLD_YMM8_HIGH, /* x86-64, AVX: the upper half of ymm8, its low half 0 */
    HOLD_ZMM8_HIGH, /* x86-64, AVX-512: the upper 256 bits of zmm8 */
    HOLD_ZMM24,     /* x86-64, AVX-512: zmm24 (one of zmm16-31) */
    HOLD_K5,        /* x86-64, AVX-512BW: the opmask register k5 */
    HOLD_V20_HIGH,  /* aarch64: the upper 64 bits of v20 */
};
static atomic_int hold_where;
static atomic_int holder_tid; /* the holder's thread id, once it runs */

/* Hold REGISTER_MAGIC in a register (hold_where), and nowhere in memory,
 * until told to stop. Each asm loads the value, clears the register it came
 * through, spins, then clears the holding register. */
#define HOLD_SPIN                                                                                  \
    "movl $1, (%0)\n"                                                                              \
    "1:\n\t"                                                                                       \
    "pause\n\t"                                                                                    \
    "cmpl $0, (%1)\n\t"                                                                            \
    "je 1b\n\t"
static void *hold_magic_in_a_register(void *arg)
{
    atomic_store(&holder_tid, gettid());
    int where = atomic_load(&hold_where);
#if defined(__x86_64__)
    if (where == HOLD_XMM8) {
        __asm__ volatile("movabs $0x5EB0C0DE1234ABCD, %%rax\n\t"
                         "movq %%rax, %%xmm8\n\t"
                         "xor %%eax, %%eax\n\t" HOLD_SPIN "pxor %%xmm8, %%xmm8"
                         :
                         : "r"(&spinning), "r"(&stop_spinning)
                         : "rax", "xmm8", "cc", "memory");
        return NULL;
    }
    if (where == HOLD_YMM8_HIGH) {
        __asm__ volatile("movabs $0x5EB0C0DE1234ABCD, %%rax\n\t"
                         "vmovq %%rax, %%xmm0\n\t"
                         "vpxor %%xmm8, %%xmm8, %%xmm8\n\t"
                         "vinsertf128 $1, %%xmm0, %%ymm8, %%ymm8\n\t"
                         "vpxor %%xmm0, %%xmm0, %%xmm0\n\t"
                         "xor %%eax, %%eax\n\t" HOLD_SPIN "vpxor %%xmm8, %%xmm8, %%xmm8\n\t"
                         "vzeroupper"
                         :
                         : "r"(&spinning), "r"(&stop_spinning)
                         : "rax", "xmm0", "xmm8", "cc", "memory");
        return NULL;
    }
    if (where == HOLD_ZMM8_HIGH || where == HOLD_ZMM24) {
        if (where == HOLD_ZMM8_HIGH)
            __asm__ volatile("movabs $0x5EB0C0DE1234ABCD, %%rax\n\t"
                             "vmovq %%rax, %%xmm0\n\t"
                             "vpxord %%zmm8, %%zmm8, %%zmm8\n\t"
                             "vinserti64x4 $1, %%ymm0, %%zmm8, %%zmm8\n\t"
                             "vpxor %%xmm0, %%xmm0, %%xmm0\n\t"
                             "xor %%eax, %%eax\n\t" HOLD_SPIN "vpxord %%zmm8, %%zmm8, %%zmm8\n\t"
                             "vzeroupper"
                             :
                             : "r"(&spinning), "r"(&stop_spinning)
                             : "rax", "xmm0", "xmm8", "cc", "memory");
        else
            __asm__ volatile("movabs $0x5EB0C0DE1234ABCD, %%rax\n\t"
                             "vmovq %%rax, %%xmm24\n\t"
                             "xor %%eax, %%eax\n\t" HOLD_SPIN "vpxord %%zmm24, %%zmm24, %%zmm24\n\t"
                             "vzeroupper"
                             :
                             : "r"(&spinning), "r"(&stop_spinning)
                             : "rax", "cc", "memory");
        return NULL;
    }
    if (where == HOLD_K5) {
        /* GCC may spill a general register into an opmask register
         * (-march=skylake-avx512 and later), so a pointer can sit there. */
        __asm__ volatile("movabs $0x5EB0C0DE1234ABCD, %%rax\n\t"
                         "kmovq %%rax, %%k5\n\t"
                         "xor %%eax, %%eax\n\t" HOLD_SPIN "kxorq %%k5, %%k5, %%k5"
                         :
                         : "r"(&spinning), "r"(&stop_spinning)
                         : "rax", "cc", "memory");
        return NULL;
    }
#elif defined(__aarch64__)
    if (where == HOLD_V20_HIGH) {
        __asm__ volatile("movz x9, #0xABCD\n\t"
                         "movk x9, #0x1234, lsl #16\n\t"
                         "movk x9, #0xC0DE, lsl #32\n\t"
                         "movk x9, #0x5EB0, lsl #48\n\t"
                         "movi v20.2d, #0\n\t"
                         "mov v20.d[1], x9\n\t"
                         "mov w9, #1\n\t"
                         "str w9, [%0]\n"
                         "1:\n\t"
                         "yield\n\t"
                         "ldr w9, [%1]\n\t"
                         "cbz w9, 1b\n\t"
                         "movi v20.2d, #0"
                         :
                         : "r"(&spinning), "r"(&stop_spinning)
                         : "x9", "v20", "memory");
        return NULL;
    }
#endif
    (void)where;
    if (arg != NULL) { /* "blocked": every signal blocked */
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
    }
#if defined(__x86_64__)
    __asm__ volatile("movabs $0x5EB0C0DE1234ABCD, %%r12\n\t" HOLD_SPIN "xor %%r12, %%r12"
                     :
                     : "r"(&spinning), "r"(&stop_spinning)
                     : "r12", "cc", "memory");
#elif defined(__aarch64__)
    __asm__ volatile("movz x19, #0xABCD\n\t"
                     "movk x19, #0x1234, lsl #16\n\t"
                     "movk x19, #0xC0DE, lsl #32\n\t"
                     "movk x19, #0x5EB0, lsl #48\n\t"
                     "mov w9, #1\n\t"
                     "str w9, [%0]\n"
                     "1:\n\t"
                     "yield\n\t"
                     "ldr w9, [%1]\n\t"
                     "cbz w9, 1b\n\t"
                     "mov x19, xzr"
                     :
                     : "r"(&spinning), "r"(&stop_spinning)
                     : "x9", "x19", "memory");
#endif
    return NULL;
}

static struct {
    int calls;
    bool magic;
} regs_seen;

static void note_registers(const os_registers_t *regs, void *arg)
{
    (void)arg;
    regs_seen.calls++;
    for (size_t i = 0; i < regs->count; i++)
        regs_seen.magic |= regs->words[i] == REGISTER_MAGIC;
}

static os_registers_t slots[OS_REGISTERS_BATCH];
static bool listed_whole; /* the last pass's: /proc/self/task listed to its end */

/* Threads this program did not start, there before main: none under a
 * kernel; qemu-user's own (its RCU thread, which blocks every signal and
 * which a pass counts as not asked, as it should). Each count of threads not
 * asked below expects these on top, and says so. */
static int foreign_threads;

/* The threads /proc/self/task lists but this one. */
static int other_threads_listed(void)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] >= '1' && e->d_name[0] <= '9' && atoi(e->d_name) != gettid();
    closedir(d);
    return n;
}

/* Say once per case that its count of threads not asked includes threads
 * not this program's. */
static void note_foreign_threads(void)
{
    if (foreign_threads > 0)
        SKIP_CHECK("%d thread%s not started by this program (an emulator's, as qemu-user's) "
                   "block%s signals: the count of threads not asked is checked with %s on top, "
                   "not for this program's threads alone",
                   foreign_threads, foreign_threads == 1 ? "" : "s",
                   foreign_threads == 1 ? "s" : "", foreign_threads == 1 ? "it" : "them");
}

/* Start the holder (signals blocked or not), ask, stop it. Missed count.
 * A holder that takes signals and did not answer is asked again, 5 times at
 * most: on a loaded machine it may not run within the pass's wait. */
static unsigned ask_a_holder_once(bool blocked, bool skip_by_id);

static unsigned ask_a_holder(bool blocked)
{
    unsigned missed = ask_a_holder_once(blocked, false);
    for (int k = 0; k < 4 && !blocked && missed == 1u + foreign_threads && regs_seen.calls == 0;
         k++) {
        printf("    info: the holder did not answer in time; asking again\n");
        missed = ask_a_holder_once(blocked, false);
    }
    return missed;
}

/* skip_by_id: the pass is told to skip the holder's thread id. */
static unsigned ask_a_holder_once(bool blocked, bool skip_by_id)
{
    atomic_store(&spinning, 0);
    atomic_store(&stop_spinning, 0);
    atomic_store(&holder_tid, 0);
    memset(&regs_seen, 0, sizeof regs_seen);
    pthread_t t;
    if (pthread_create(&t, NULL, hold_magic_in_a_register, blocked ? &t : NULL) != 0) {
        CHECK(false, "pthread_create failed");
        return UINT_MAX;
    }
    while (!atomic_load(&spinning) || atomic_load(&holder_tid) == 0)
        usleep(100);
    int skip = skip_by_id ? atomic_load(&holder_tid) : 0;
    unsigned missed = os_other_threads_registers(slots, skip, "no-such-name", note_registers, NULL,
                                                 &listed_whole);
    atomic_store(&stop_spinning, 1);
    pthread_join(t, NULL);
    return missed;
}

static void a_value_held_only_in_a_register_arrives(void)
{
#if !defined(__x86_64__) && !defined(__aarch64__)
    CHECK(false, "no register test for this architecture: write one");
    return;
#endif
    note_foreign_threads();
    unsigned missed = ask_a_holder(false) - foreign_threads;
    CHECK(missed == 0, "the one other thread takes signals: %u missed", missed);
    CHECK(regs_seen.calls == 1, "one thread's registers expected, got %d", regs_seen.calls);
    CHECK(regs_seen.magic, "the value only the thread's register held should be among its registers");
    CHECK(listed_whole, "/proc/self/task should have been listed to its end");
    struct sigaction now;
    sigaction(SIGRTMAX, NULL, &now);
    CHECK(now.sa_handler == SIG_DFL && !(now.sa_flags & SA_SIGINFO),
          "the signal's action should be the default again");
}

/* Ask a holder keeping the value in `where`; check it arrived. */
static void check_value_held_in(int where, const char *what)
{
    atomic_store(&hold_where, where);
    note_foreign_threads();
    unsigned missed = ask_a_holder(false) - foreign_threads;
    atomic_store(&hold_where, HOLD_GENERAL);
    CHECK(missed == 0 && regs_seen.calls == 1, "one thread's registers expected: %u missed, %d "
          "calls", missed, regs_seen.calls);
    CHECK(regs_seen.magic, "the value only %s held should be among the thread's registers", what);
}

#if defined(__x86_64__)
/* Review finding (stop 32's own): only general registers were read. */
static void a_value_held_only_in_an_xmm_register_arrives(void)
{
    check_value_held_in(HOLD_XMM8, "xmm8");
}

/* Only xmm0-15 were read (stop 32): not the upper parts of ymm and zmm,
 * nor zmm16-31, which the kernel saves in the frame's XSAVE area. */
static void a_value_held_only_in_a_ymm_upper_half_arrives(void)
{
    if (!__builtin_cpu_supports("avx")) {
        SKIP_CHECK("this CPU has no AVX: no ymm registers to hold a value in");
        return;
    }
    check_value_held_in(HOLD_YMM8_HIGH, "ymm8's upper half");
}

static void values_held_only_in_avx512_registers_arrive(void)
{
    if (!__builtin_cpu_supports("avx512f")) {
        SKIP_CHECK("this CPU has no AVX-512: no zmm registers to hold a value in");
        return;
    }
    check_value_held_in(HOLD_ZMM8_HIGH, "zmm8's upper 256 bits");
    check_value_held_in(HOLD_ZMM24, "zmm24");
}

/* The opmask registers k0-k7 were not read (stop 37): the kernel saves them
 * in the XSAVE area's component 5. */
static void a_value_held_only_in_an_opmask_register_arrives(void)
{
    if (!__builtin_cpu_supports("avx512bw")) {
        SKIP_CHECK("this CPU has no AVX-512BW: no 64-bit opmask registers to hold a value in");
        return;
    }
    check_value_held_in(HOLD_K5, "the opmask register k5");
}
#elif defined(__aarch64__)
static void a_value_held_only_in_a_vector_register_arrives(void)
{
    check_value_held_in(HOLD_V20_HIGH, "v20's upper half");
}
#endif

static void a_thread_with_signals_blocked_is_counted_not_waited_for(void)
{
    note_foreign_threads();
    unsigned missed = ask_a_holder(true) - foreign_threads;
    CHECK(missed == 1, "the thread blocks every signal: 1 missed expected, got %u", missed);
    CHECK(regs_seen.calls == 0 && !regs_seen.magic, "no registers from it (%d calls)",
          regs_seen.calls);
}

/* The leak report skips ebb's scavenger (which blocks every signal) by its
 * thread id, read from nowhere in /proc: such a thread is neither asked nor
 * counted (before 2026-12-06 it was known by the name in its status only,
 * and counted where that could not be read; tests/test_debug.sh has that
 * case, one file descriptor left). */
static void a_thread_skipped_by_its_id_is_neither_asked_nor_counted(void)
{
    note_foreign_threads();
    unsigned missed = ask_a_holder_once(true, true) - foreign_threads;
    CHECK(missed == 0, "the thread skipped by its id should not be counted: %u missed", missed);
    CHECK(regs_seen.calls == 0, "no registers from it (%d calls)", regs_seen.calls);
    CHECK(listed_whole, "/proc/self/task should have been listed to its end");
}

/* Review finding: a thread asleep in sigwait has the signals it waits for
 * out of its blocked mask meanwhile, and was sent ours: the program's
 * sigwait returned SIGRTMAX. It is counted as not asked now. */
static atomic_int waited_signal, waiter_tid;

static void *wait_for_signals(void *arg)
{
    (void)arg;
    atomic_store(&waiter_tid, gettid());
    sigset_t all;
    sigfillset(&all);
    int sig = 0;
    sigwait(&all, &sig);
    atomic_store(&waited_signal, sig);
    return NULL;
}

/* Whether /proc numbers system calls as this program does: its own read of
 * /proc/thread-self/syscall shows SYS_read. Not under qemu-user, where it
 * shows the host's number (x86-64's read is 0, aarch64's 63): a pass (and
 * this test) cannot tell a thread in sigwait there. */
static bool proc_shows_our_syscall_numbers(void)
{
    char call[32] = "";
    int fd = open("/proc/thread-self/syscall", O_RDONLY);
    if (fd < 0)
        return true; /* not known: the case runs and says what it finds */
    ssize_t n = read(fd, call, sizeof call - 1);
    close(fd);
    call[n > 0 ? n : 0] = '\0';
    return atoi(call) == SYS_read;
}

static void a_thread_in_sigwait_is_not_sent_the_signal(void)
{
    if (!proc_shows_our_syscall_numbers()) {
        SKIP_CHECK("/proc/thread-self/syscall shows another system call number than this "
                   "program's read (an emulator's host numbers, as under qemu-user): a thread "
                   "asleep in sigwait cannot be told here");
        return;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the waiter inherits it */
    atomic_store(&waited_signal, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, wait_for_signals, NULL) == 0, "pthread_create failed");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* Until it sleeps in sigwait: before, its blocked mask alone would make
     * it skipped, and the case would test nothing. */
    bool asleep = false;
    for (int i = 0; i < 2000 && !asleep; i++) {
        char path[64], call[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%d/syscall", atomic_load(&waiter_tid));
        FILE *f = fopen(path, "r");
        if (f != NULL) {
            if (fgets(call, sizeof call, f) == NULL)
                call[0] = '\0';
            fclose(f);
        }
        asleep = atoi(call) == SYS_rt_sigtimedwait && call[0] >= '0' && call[0] <= '9';
        if (!asleep)
            usleep(1000);
    }
    REQUIRE(asleep, "the waiting thread never showed in rt_sigtimedwait");
    memset(&regs_seen, 0, sizeof regs_seen);
    unsigned missed =
        os_other_threads_registers(slots, 0, "no-such-name", note_registers, NULL, &listed_whole) -
        foreign_threads;
    usleep(50000);
    int got = atomic_load(&waited_signal);
    CHECK(got == 0, "the waiting thread received signal %d (SIGRTMAX is %d)", got, SIGRTMAX);
    CHECK(missed == 1, "the waiting thread should be counted as not asked: %u", missed);
    pthread_kill(t, SIGUSR1);
    pthread_join(t, NULL);
    CHECK(atomic_load(&waited_signal) == SIGUSR1, "the waiter should then get SIGUSR1 (got %d)",
          atomic_load(&waited_signal));
}

int main(void)
{
    foreign_threads = other_threads_listed(); /* before this program starts any */
    RUN_CASE(lines_of_a_file_much_longer_than_the_buffer_all_arrive);
    RUN_CASE(a_last_record_without_its_separator_is_given);
    RUN_CASE(a_record_longer_than_the_buffer_is_given_once_cut);
    RUN_CASE(a_missing_file_is_false_and_gives_nothing);
    RUN_CASE(maps_lines_parse_with_and_without_a_path);
    RUN_CASE(a_value_held_only_in_a_register_arrives);
#if defined(__x86_64__)
    RUN_CASE(a_value_held_only_in_an_xmm_register_arrives);
    RUN_CASE(a_value_held_only_in_a_ymm_upper_half_arrives);
    RUN_CASE(values_held_only_in_avx512_registers_arrive);
    RUN_CASE(a_value_held_only_in_an_opmask_register_arrives);
#elif defined(__aarch64__)
    RUN_CASE(a_value_held_only_in_a_vector_register_arrives);
#endif
    RUN_CASE(a_thread_with_signals_blocked_is_counted_not_waited_for);
    RUN_CASE(a_thread_skipped_by_its_id_is_neither_asked_nor_counted);
    RUN_CASE(a_thread_in_sigwait_is_not_sent_the_signal);
    return check_finish();
}
