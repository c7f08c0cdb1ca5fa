/* tests/seccomp_filter.h — what the tests that refuse system calls with a
 * seccomp filter share (sandbox_no_vm_readv.c, sandbox_refuse.c,
 * debug/leak_report_refused_memory.c): the native architecture, a filter's
 * first statements, and installing it. NATIVE_ARCH is left undefined on an
 * architecture none of them knows the call numbers of. */
#ifndef EBB_TEST_SECCOMP_FILTER_H
#define EBB_TEST_SECCOMP_FILTER_H

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/* A filter's first four statements: a call of another architecture (its
 * numbers mean other calls) is allowed; else the call's number is loaded
 * for the statements that follow. */
#define SECCOMP_LOAD_NATIVE_NR                                                    \
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),    \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),                 \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                           \
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))

/* Install `n` statements for this process and what it execs (no new
 * privileges first, as an unprivileged process must): 0, or -1. */
static inline int seccomp_install(struct sock_filter *filter, size_t n)
{
    struct sock_fprog program = {(unsigned short)n, filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
                   prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0
               ? 0
               : -1;
}

#endif /* EBB_TEST_SECCOMP_FILTER_H */
