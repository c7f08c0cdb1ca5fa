/*
 * override_dlopen.c — dlopen, so that a library loaded with RTLD_DEEPBIND
 * still calls ebb's malloc and free, and dlclose, for debug mode (below). In
 * libebb.so only (Makefile): a static program has no next dlopen to call.
 *
 * RTLD_DEEPBIND makes the loaded library look up its symbols in itself and
 * its own dependencies before the global scope, and the C library is one of
 * those dependencies: its malloc and free then win over the preloaded ones.
 * glibc 2.34 dropped the malloc hooks that once sent those back to the
 * process allocator, so a deep-bound library frees ebb's blocks with glibc's
 * free, which aborts ("free(): invalid pointer") or crashes (review finding:
 * Debian's php-cli died with SIGSEGV at startup under LD_PRELOAD, in
 * pdo.so's module startup; PHP loads every extension with RTLD_DEEPBIND).
 * Dropping the flag is what keeps one allocator per process, the promise of
 * override.c; what the library loses is only its own definitions' priority
 * over the program's, which a program that interposes malloc already gives
 * up for those names.
 *
 * The caller must stay the caller: glibc's dlopen reads its return address
 * to find the calling object, whose RUNPATH it searches for a bare name and
 * whose namespace the library joins. So the call to the next dlopen is the
 * last thing done, a tail call that jumps with the caller's return address
 * in place (tests/test_deepbind.c checks that a bare name found through the
 * program's RUNPATH still loads).
 *
 * dlclose, and dlopen too, tell debug mode's capture cache (src/trace.c,
 * "Unloads a hit sees"): a library unloaded and another loaded at its
 * addresses must not be unwound by the first one's rules, which a cache hit
 * would replay without asking the loader (issue 4,
 * tests/debug/capture_cache_after_library_swap.c). A counter each: nothing
 * more in release mode.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

#include "internal.h"

#ifdef RTLD_DEEPBIND
typedef void *(*dlopen_fn)(const char *, int);

/* A compiler that can promise the tail call is asked to; GCC before 15
 * cannot, and makes it anyway at -O2 (sibling-call optimization), which
 * the RUNPATH case of tests/test_deepbind.c verifies. */
#if defined(__has_attribute)
#if __has_attribute(musttail)
#define TAIL_CALL __attribute__((musttail))
#endif
#endif
#ifndef TAIL_CALL
#define TAIL_CALL
#endif

/* The next definition (the C library's, or another interposer's), found at
 * the first call. Relaxed: every thread that looks it up stores the same
 * pointer. */
static _Atomic(dlopen_fn) next_dlopen;

__attribute__((visibility("default"))) void *dlopen(const char *file, int flags)
{
    dlopen_fn next = atomic_load_explicit(&next_dlopen, memory_order_relaxed);
    if (__builtin_expect(next == NULL, 0)) {
        next = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
        atomic_store_explicit(&next_dlopen, next, memory_order_relaxed);
    }
    if (next == NULL) /* no dlopen after ours: nothing can be loaded */
        return NULL;
    trace_dlopen_begin();
    TAIL_CALL return next(file, flags & ~RTLD_DEEPBIND);
}
#endif

typedef int (*dlclose_fn)(void *);

/* As next_dlopen. */
static _Atomic(dlclose_fn) next_dlclose;

/* Not a tail call: the capture cache is told when the unload is done
 * (glibc's dlclose does not look at its caller). */
__attribute__((visibility("default"))) int dlclose(void *handle)
{
    dlclose_fn next = atomic_load_explicit(&next_dlclose, memory_order_relaxed);
    if (__builtin_expect(next == NULL, 0)) {
        next = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
        atomic_store_explicit(&next_dlclose, next, memory_order_relaxed);
    }
    if (next == NULL) /* no dlclose after ours: nothing was loaded */
        return -1;
    trace_dlclose_begin();
    int rc = next(handle);
    trace_dlclose_end();
    return rc;
}
