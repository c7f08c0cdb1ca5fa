/* The leak report maps its arrays at exit; this program's memory requests
 * are refused from the end of main on (a seccomp filter answers mmap with
 * ENOMEM, as a process at its RLIMIT_AS or its cgroup's limit gets it):
 *   leak_report_refused_memory all    every mapping: the report cannot be
 *                                     made, and must say so
 *   leak_report_refused_memory small  mappings of 64 KiB or less: the report's
 *                                     arrays (above 64 KiB, for the 2,000
 *                                     blocks here) are mapped, its search
 *                                     index (8 KiB) not: it searches without
 * Three blocks of 100 bytes are lost from allocate_lost; a chain of 2000
 * blocks of 64 bytes from allocate_chain is reachable from a global. */
#include "fault.h"

#include <errno.h>
#include <stddef.h>
#include <sys/syscall.h>

#include "seccomp_filter.h"

void **volatile chain_head;

__attribute__((noinline)) static void allocate_lost(void)
{
    for (int i = 0; i < 3; i++) {
        volatile uintptr_t hidden = (uintptr_t)malloc(100) ^ 0x5555555555555555ull;
        (void)hidden;
    }
}

__attribute__((noinline)) static void allocate_chain(void)
{
    void **prev = NULL;
    for (int i = 0; i < 2000; i++) {
        void **node = malloc(64);
        node[0] = prev;
        prev = node;
    }
    chain_head = prev;
}

/* mmap refused with ENOMEM from now on: every request, or those of at most
 * 64 KiB (its length's high word 0 and low word at most 65536). */
static int refuse_mappings(int small_only)
{
#if defined(__x86_64__) && defined(__LP64__)
    struct sock_filter filter[] = {
        SECCOMP_LOAD_NATIVE_NR,
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 6),
        BPF_JUMP(BPF_JMP | BPF_JA, small_only ? 0 : 4, 0, 0),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1]) + 4),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 65536, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOMEM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    return seccomp_install(filter, sizeof filter / sizeof filter[0]);
#else
    (void)small_only;
    return -1;
#endif
}

int main(int argc, char **argv)
{
    int small_only = argc > 1 && strcmp(argv[1], "small") == 0;
    allocate_lost();
    allocate_chain();
    scrub_stack();
    printf("done\n");
    fflush(stdout);
    if (refuse_mappings(small_only) != 0) {
        printf("no seccomp filter here\n");
        return 2;
    }
    return 0;
}
