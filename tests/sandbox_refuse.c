/* sandbox_refuse CALL[,CALL...] PROGRAM [ARGS]: run PROGRAM where the
 * kernel refuses CALLs, as an older kernel or a sandbox does, to drive the
 * leak report down its fallback paths (src/leak.c):
 *   pagemap_scan  the PAGEMAP_SCAN ioctl fails with ENOTTY, as before Linux
 *                 6.7: used pages are found by reading /proc/self/pagemap
 *   mincore       mincore fails with ENOSYS (a seccomp filter's answer):
 *                 a big shared root is read whole
 * A seccomp filter refuses them (it stays across exec); the launcher checks
 * that it does before it execs the program. process_vm_readv and pipes have
 * their own launcher (sandbox_no_vm_readv.c). Exit 2 if the filter cannot be
 * installed. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp_filter.h"

/* linux/fs.h's PAGEMAP_SCAN: _IOWR('f', 16, struct pm_scan_arg), 96 bytes
 * (declared here for older headers, as src/leak.c does). */
#define PAGEMAP_SCAN_CMD _IOWR('f', 16, uint64_t[12])

/* The low word of a call's argument i (the filter reads 32 bits at a time;
 * an ioctl number fits in them). */
#define ARG_LOW(i) (offsetof(struct seccomp_data, args) + (i) * sizeof(uint64_t) + \
                    (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 0 : 4))

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: sandbox_refuse pagemap_scan|mincore[,...] PROGRAM [ARGS]\n");
        return 2;
    }
    bool pagemap_scan = strstr(argv[1], "pagemap_scan") != NULL;
    bool no_mincore = strstr(argv[1], "mincore") != NULL;
#ifdef NATIVE_ARCH
    struct sock_filter filter[] = {
        SECCOMP_LOAD_NATIVE_NR,
        /* mincore (when asked) -> ENOSYS */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, no_mincore ? SYS_mincore : (uint32_t)-1, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        /* ioctl(fd, PAGEMAP_SCAN, ...) (when asked) -> ENOTTY */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, pagemap_scan ? SYS_ioctl : (uint32_t)-1, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(1)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)PAGEMAP_SCAN_CMD, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOTTY & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    if (seccomp_install(filter, sizeof filter / sizeof filter[0]) != 0) {
        perror("sandbox_refuse: installing the seccomp filter");
        return 2;
    }
    static unsigned char page[4096] __attribute__((aligned(4096)));
    unsigned char vec[1];
    if (no_mincore && (mincore(page, sizeof page, vec) != -1 || errno != ENOSYS)) {
        fprintf(stderr, "sandbox_refuse: mincore was not refused\n");
        return 2;
    }
    uint64_t arg[12] = {sizeof arg, 0, (uint64_t)(uintptr_t)page, (uint64_t)(uintptr_t)page + sizeof page};
    if (pagemap_scan && (ioctl(0, PAGEMAP_SCAN_CMD, arg) != -1 || errno != ENOTTY)) {
        fprintf(stderr, "sandbox_refuse: PAGEMAP_SCAN was not refused\n");
        return 2;
    }
#else
    fprintf(stderr, "sandbox_refuse: no filter for this architecture\n");
    return 2;
#endif
    execvp(argv[2], argv + 2);
    perror("sandbox_refuse: exec");
    return 2;
}
