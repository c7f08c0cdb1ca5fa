/* libos_shim.so, preloaded (LD_PRELOAD) with OS_SHIM=WHAT[,WHAT...]: the
 * calls the leak report makes (through src/os.c: os_pread, the listing of
 * /proc/self/task) answered in ways no
 * seccomp filter can give (tests/sandbox_refuse.c refuses a call; it cannot
 * make one return part of what it was asked for, nor fail its second call
 * and not its first):
 *   task_cut       the listing of /proc/self/task fails in the middle: its
 *                  first getdents64 is given 80 bytes of buffer ("." and ".."
 *                  and one thread, the first, which is the main thread), the
 *                  next fails with EIO
 *   pagemap_short  every read of /proc/self/pagemap returns half the
 *                  entries asked for (the kernel reads whole entries only:
 *                  a count or offset not a multiple of 8 is EINVAL)
 *   pagemap_fail   every read of /proc/self/pagemap fails with EIO
 *   tgkill_top_two tgkill with either of the two highest real-time signals
 *                  fails with EINVAL, as under qemu-user 7.2 (it has no host
 *                  signal to send the guest's SIGRTMAX-1 and SIGRTMAX as;
 *                  their sigaction succeeds)
 * It replaces syscall(2) and pread(2) (ebb calls both through the C
 * library; the C library's own calls do not go through them). Its own calls
 * are made with the syscall instruction: no call to the C library's
 * syscall, which it replaces, nor to dlsym, which may allocate from ebb,
 * which calls syscall. x86-64 and aarch64 only. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "libos_shim: no syscall instruction for this architecture"
#endif

static long raw_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
#else
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
#endif
}

/* The C library's convention: -1 and errno for an error. */
static long result(long r)
{
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

static bool asked(const char *what)
{
    const char *v = getenv("OS_SHIM");
    return v != NULL && strstr(v, what) != NULL;
}

/* Whether fd is open on /proc/<this pid>/<file>. */
static bool fd_is(int fd, const char *file)
{
    char path[64], link[128], want[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    long n = raw_syscall(SYS_readlinkat, -100 /* AT_FDCWD */, (long)path, (long)link,
                         sizeof link - 1, 0, 0);
    if (n <= 0)
        return false;
    link[n] = '\0';
    snprintf(want, sizeof want, "/proc/%ld/%s", raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0), file);
    return strcmp(link, want) == 0;
}

static atomic_int task_listings; /* getdents64 calls on /proc/self/task */

long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
    long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_getdents64 && asked("task_cut") && fd_is((int)a, "task")) {
        if (atomic_fetch_add(&task_listings, 1) > 0)
            return result(-EIO);
        c = c < 80 ? c : 80;
    }
    if (nr == SYS_tgkill && asked("tgkill_top_two") && c >= SIGRTMAX - 1)
        return result(-EINVAL);
    return result(raw_syscall(nr, a, b, c, d, e, f));
}

ssize_t pread(int fd, void *buf, size_t n, off_t offset)
{
    if ((asked("pagemap_short") || asked("pagemap_fail")) && fd_is(fd, "pagemap")) {
        if (asked("pagemap_fail"))
            return result(-EIO);
        n = n / 16 > 0 ? n / 16 * 8 : n;
    }
    return result(raw_syscall(SYS_pread64, fd, (long)buf, (long)n, (long)offset, 0, 0));
}

ssize_t pread64(int fd, void *buf, size_t n, off_t offset)
{
    return pread(fd, buf, n, offset);
}
