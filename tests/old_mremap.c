/*
 * old_mremap.c — an LD_PRELOAD shim for test_purge: mremap as Linux before
 * 6.17 runs a move (MREMAP_FIXED) of a range that spans more than one kernel
 * mapping (VMA): it unmaps the destination, then fails with EFAULT. ebb must
 * never hand mremap such a range (src/large.c, spare pages); on a newer
 * kernel the move would just work, and the mistake would go unseen here.
 * Every other call goes to the kernel unchanged.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static uintptr_t parse_hex(const char **s)
{
    uintptr_t v = 0;
    for (;; (*s)++) {
        char c = **s;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uintptr_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uintptr_t)(c - 'a' + 10);
        else
            return v;
    }
}

/* How many mappings of /proc/self/maps overlap [lo, hi). No allocation: the
 * caller may be the allocator itself. */
static int mappings_in(uintptr_t lo, uintptr_t hi)
{
    static char buf[1 << 20];
    static atomic_flag busy = ATOMIC_FLAG_INIT;
    while (atomic_flag_test_and_set(&busy))
        ;
    int count = -1;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        size_t n = 0;
        ssize_t r;
        while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
            n += (size_t)r;
        close(fd);
        buf[n] = '\0';
        count = 0;
        for (const char *p = buf; *p;) {
            uintptr_t start = parse_hex(&p);
            p++; /* '-' */
            uintptr_t end = parse_hex(&p);
            if (start < hi && end > lo)
                count++;
            while (*p && *p != '\n')
                p++;
            if (*p)
                p++;
        }
    }
    atomic_flag_clear(&busy);
    return count;
}

/* How many moves across VMAs were refused (test_purge reads it by dlsym). */
__attribute__((visibility("default"))) atomic_long old_mremap_refused;

void *mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...)
{
    void *new_address = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_address = va_arg(ap, void *);
        va_end(ap);
        uintptr_t lo = (uintptr_t)old_address;
        if (mappings_in(lo, lo + old_size) > 1) {
            atomic_fetch_add(&old_mremap_refused, 1);
            munmap(new_address, new_size);
            errno = EFAULT;
            return MAP_FAILED;
        }
    }
    long r = syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address);
    return r == -1 ? MAP_FAILED : (void *)r;
}
