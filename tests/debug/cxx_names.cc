/* C++ names in reports (a review of `java -version` under debug mode: its
 * frames read `_ZN2os6mallocEm8MEMFLAGSRK15NativeCallStack+121`). A double
 * free and two lost blocks, from functions with nested names, templates,
 * substitutions, std:: abbreviations and parameter types; tests/test_debug.sh
 * (the cxx_names case) runs it with EBB_DEBUG_ON_ERROR=continue and reads
 * both reports. Its expected names are c++filt's for these symbols:
 *   _ZN5store4PoolIcE4makeEm
 *       store::Pool<char>::make(unsigned long)
 *   _ZN5store6detail7releaseIcEEvPT_PNS_4PoolIS2_EERKSt4pairIiiE
 *       void store::detail::release<char>(char*, store::Pool<char>*, std::pair<int, int> const&)
 *   _ZN5store6detail4loseIcEEvPNS_4PoolIT_EES5_
 *       void store::detail::lose<char>(store::Pool<char>*, store::Pool<char>*)
 * and spread<...>, whose 148 bytes of mangled name (the type's name once,
 * then substitutions) demangle to 2,385: longer than the 1,023 bytes a
 * report keeps of a name, so it is printed cut, with "..." after it.
 * With an argument the program first puts itself in a seccomp sandbox that
 * refuses what running c++filt takes (the names must then stay mangled, and
 * the reports whole):
 *   no-exec   execve and execveat fail with EACCES
 *   no-vfork  vfork fails with EPERM, and clone with CLONE_VFORK
 * C++, not C: tests/tests.mk builds it with g++. */
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>

#include "seccomp_filter.h"

namespace store {

template <typename T> struct Pool {
    int uses;
    static T *make(std::size_t n);
};

/* noipa: no clone of it ("[clone .constprop.0]") and no inlining, so each
 * name is the one written above. */
template <typename T> __attribute__((noipa)) T *Pool<T>::make(std::size_t n)
{
    T *p = static_cast<T *>(std::malloc(n * sizeof(T)));
    __asm__ volatile("" ::: "memory"); /* a real call, not a tail call */
    return p;
}

namespace detail {

template <typename T>
__attribute__((noipa)) void release(T *p, Pool<T> *owner, std::pair<int, int> const &tag)
{
    owner->uses += tag.first;
    std::free(p);
    __asm__ volatile("" ::: "memory");
}

/* A block nothing points to: its address kept only xor-ed. */
template <typename T> __attribute__((noipa)) void lose(Pool<T> *a, Pool<T> *b)
{
    volatile std::uintptr_t hidden =
        reinterpret_cast<std::uintptr_t>(Pool<T>::make(40)) ^ 0x5555555555555555ull;
    (void)hidden;
    a->uses++;
    b->uses++;
    __asm__ volatile("" ::: "memory");
}

} // namespace detail

struct AnIngredientWithAVeryLongNameIndeedSoThatTemplatesOfItGrowLongWhenDemangled {};

/* 8 bytes lost, as in lose. */
template <typename... T> __attribute__((noipa)) void spread(T *...)
{
    volatile std::uintptr_t hidden =
        reinterpret_cast<std::uintptr_t>(std::malloc(8)) ^ 0x5555555555555555ull;
    (void)hidden;
    __asm__ volatile("" ::: "memory");
}

} // namespace store

/* The filter for `what`; false if it cannot be installed here. */
static bool sandbox(const char *what)
{
#ifdef NATIVE_ARCH
    bool no_exec = std::strcmp(what, "no-exec") == 0;
#ifdef SYS_vfork
    const unsigned vfork_nr = SYS_vfork;
#else
    const unsigned vfork_nr = (unsigned)-1; /* aarch64 has none: clone does it */
#endif
    struct sock_filter exec_filter[] = {
        SECCOMP_LOAD_NATIVE_NR,
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execve, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execveat, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_filter vfork_filter[] = {
        SECCOMP_LOAD_NATIVE_NR,
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, vfork_nr, 4, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4),
        /* clone's flags: its first argument's low word */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                 offsetof(struct seccomp_data, args) +
                     (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 0 : 4)),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_VFORK, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    int rc = no_exec ? seccomp_install(exec_filter, sizeof exec_filter / sizeof exec_filter[0])
                     : seccomp_install(vfork_filter, sizeof vfork_filter / sizeof vfork_filter[0]);
    if (rc != 0)
        return false;
    if (no_exec) { /* the filter's answer, not the file system's ENOENT */
        char *const argv[] = {nullptr};
        if (execve("/nonexistent/c++filt", argv, argv) != -1 || errno != EACCES)
            return false;
    }
    return true;
#else
    (void)what;
    return false;
#endif
}

int main(int argc, char **argv)
{
    if (argc > 1 && !sandbox(argv[1])) {
        std::printf("no sandbox here\n");
        return 77;
    }
    static store::Pool<char> pool, other;
    char *p = store::Pool<char>::make(24);
    std::printf("victim=%p\n", static_cast<void *>(p));
    std::fflush(stdout);
    std::pair<int, int> tag(1, 2);
    store::detail::release<char>(p, &pool, tag);
    store::detail::release<char>(p, &pool, tag); /* the double free */
    store::detail::lose<char>(&pool, &other);
    store::AnIngredientWithAVeryLongNameIndeedSoThatTemplatesOfItGrowLongWhenDemangled l;
    store::spread(&l, &l, &l, &l, &l, &l, &l, &l, &l, &l, &l, &l, &l, &l);
    std::printf("survived\n");
    return 0;
}
