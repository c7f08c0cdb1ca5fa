/*
 * override.c — the standard C allocation names, and glibc's own entry points,
 * so that when ebb is the process allocator (preloaded or linked) every block
 * of the process comes from ebb and no block ever crosses allocators.
 *
 * malloc and free inline the fast paths (alloc.h); the rest are one direct
 * jump to their ebb_ twins (the library binds its own symbols locally, see
 * -Bsymbolic-functions in the Makefile).
 */
#include <malloc.h>
#include <stdlib.h>

#include "alloc.h"

#define EBB_EXPORT __attribute__((visibility("default")))

/* Not declared by glibc's headers (or only by newer ones). */
EBB_EXPORT void cfree(void *p);
EBB_EXPORT void free_sized(void *p, size_t size);
EBB_EXPORT void free_aligned_sized(void *p, size_t alignment, size_t size);
EBB_EXPORT void *__libc_malloc(size_t size);
EBB_EXPORT void __libc_free(void *p);
EBB_EXPORT void *__libc_calloc(size_t n, size_t size);
EBB_EXPORT void *__libc_realloc(void *p, size_t size);
EBB_EXPORT void *__libc_memalign(size_t alignment, size_t size);
EBB_EXPORT void *__libc_valloc(size_t size);
EBB_EXPORT void *__libc_pvalloc(size_t size);

EBB_EXPORT void *malloc(size_t size)
{
    return alloc_malloc_inline(size);
}

EBB_EXPORT void free(void *p)
{
    alloc_free_inline(p);
}

EBB_EXPORT void *calloc(size_t n, size_t size) { return ebb_calloc(n, size); }
EBB_EXPORT void *realloc(void *p, size_t size) { return ebb_realloc(p, size); }
EBB_EXPORT void *reallocarray(void *p, size_t n, size_t size) { return ebb_reallocarray(p, n, size); }
EBB_EXPORT int posix_memalign(void **out, size_t alignment, size_t size)
{
    return ebb_posix_memalign(out, alignment, size);
}
EBB_EXPORT void *aligned_alloc(size_t alignment, size_t size) { return ebb_aligned_alloc(alignment, size); }
EBB_EXPORT void *memalign(size_t alignment, size_t size) { return ebb_memalign(alignment, size); }
EBB_EXPORT void *valloc(size_t size) { return ebb_valloc(size); }
EBB_EXPORT void *pvalloc(size_t size) { return ebb_pvalloc(size); }
EBB_EXPORT size_t malloc_usable_size(void *p) { return ebb_malloc_usable_size(p); }
EBB_EXPORT void free_sized(void *p, size_t size) { ebb_free_sized(p, size); }
EBB_EXPORT void free_aligned_sized(void *p, size_t alignment, size_t size)
{
    ebb_free_aligned_sized(p, alignment, size);
}
EBB_EXPORT int malloc_trim(size_t pad) { return ebb_malloc_trim(pad); }
EBB_EXPORT int mallopt(int param, int value) { return ebb_mallopt(param, value); }
EBB_EXPORT void cfree(void *p) { alloc_free_inline(p); }

EBB_EXPORT void *__libc_malloc(size_t size) { return alloc_malloc_inline(size); }
EBB_EXPORT void __libc_free(void *p) { alloc_free_inline(p); }
EBB_EXPORT void *__libc_calloc(size_t n, size_t size) { return ebb_calloc(n, size); }
EBB_EXPORT void *__libc_realloc(void *p, size_t size) { return ebb_realloc(p, size); }
EBB_EXPORT void *__libc_memalign(size_t alignment, size_t size) { return ebb_memalign(alignment, size); }
EBB_EXPORT void *__libc_valloc(size_t size) { return ebb_valloc(size); }
EBB_EXPORT void *__libc_pvalloc(size_t size) { return ebb_pvalloc(size); }
