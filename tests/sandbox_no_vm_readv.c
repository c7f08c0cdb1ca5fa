/* sandbox_no_vm_readv [--no-pipes] PROGRAM [ARGS]: run PROGRAM where process_vm_readv
 * fails with EPERM, as it does under a seccomp filter such as systemd's
 * SystemCallFilter=@system-service (and with ENOSYS under qemu-user).
 *
 * ebb reads its own memory through the kernel where it may be unmapped
 * meanwhile (src/os.c, "Reading this process's own memory"): the leak
 * report's scan, and the scavenger's look at a dead thread's TLS. Refused,
 * the first said "0 bytes lost in 0 blocks" and the second was a SIGSEGV.
 * This launcher installs a filter refusing that one call, checks that it
 * is refused, and execs the program (the filter stays across exec).
 * With --no-pipes, pipe and pipe2 fail too (EMFILE), leaving ebb no way to
 * read through the kernel: the leak report must then say it is incomplete.
 * Exit 2 if the filter cannot be installed. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "seccomp_filter.h"

int main(int argc, char **argv)
{
    int first = 1;
    bool no_pipes = argc > 1 && strcmp(argv[1], "--no-pipes") == 0;
    first += no_pipes;
    if (argc <= first) {
        fprintf(stderr, "usage: sandbox_no_vm_readv [--no-pipes] PROGRAM [ARGS]\n");
        return 2;
    }
#ifndef SYS_pipe
#define SYS_pipe SYS_pipe2 /* aarch64 has pipe2 only */
#endif
#ifdef NATIVE_ARCH
    struct sock_filter filter[] = {
        SECCOMP_LOAD_NATIVE_NR,
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        /* Without --no-pipes, this jump lands on ALLOW. */
        BPF_JUMP(BPF_JMP | BPF_JA, no_pipes ? 0 : 3, 0, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pipe2, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pipe, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EMFILE & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    if (seccomp_install(filter, sizeof filter / sizeof filter[0]) != 0) {
        perror("sandbox_no_vm_readv: installing the seccomp filter");
        return 2;
    }
    char byte = 1, copy = 0;
    struct iovec local = {&copy, 1}, remote = {&byte, 1};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != -1 || errno != EPERM) {
        fprintf(stderr, "sandbox_no_vm_readv: process_vm_readv was not refused\n");
        return 2;
    }
#else
    fprintf(stderr, "sandbox_no_vm_readv: no filter for this architecture\n");
    return 2;
#endif
    execvp(argv[first], argv + first);
    perror("sandbox_no_vm_readv: exec");
    return 2;
}
