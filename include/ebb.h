/*
 * ebb.h — the public interface of the ebb memory allocator.
 *
 * ebb is a drop-in malloc: preloaded (LD_PRELOAD=libebb.so) or linked (-lebb) it
 * provides the standard C allocation functions under their usual names. Every
 * function is also available under an `ebb_` prefix, for programs that link ebb
 * beside another allocator; both names reach the same heap.
 *
 * Failure contract (applies to every allocating function below):
 *   - Allocation failure returns NULL and sets errno to ENOMEM. Nothing already
 *     allocated is touched.
 *   - A size computation that would overflow (calloc's n*size, reallocarray's
 *     n*size, an aligned request rounded up to its alignment) fails with ENOMEM
 *     before any memory is requested from the operating system.
 *   - A failed realloc leaves the original block valid and unchanged.
 *   - An alignment that is not a power of two (or, for posix_memalign, not a
 *     multiple of sizeof(void *)) gets EINVAL; see each function.
 *   - Every block returned is aligned to at least 16 bytes (alignof(max_align_t)).
 */
#ifndef EBB_H
#define EBB_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define EBB_API __attribute__((visibility("default")))
#define EBB_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#else
#define EBB_API
#define EBB_MALLOC_ATTR
#endif

/* The version of the library, as "MAJOR.MINOR.PATCH". */
#define EBB_VERSION_MAJOR 0
#define EBB_VERSION_MINOR 1
#define EBB_VERSION_PATCH 0
EBB_API const char *ebb_version(void);

/* malloc(size): a block of at least `size` bytes, 16-byte aligned. malloc(0)
 * returns a unique pointer that must be freed (it is never NULL on success). */
EBB_API EBB_MALLOC_ATTR void *ebb_malloc(size_t size);

/* free(p): releases a block from any ebb allocation function. free(NULL) does
 * nothing. The block may be freed by any thread, not only the one that
 * allocated it. */
EBB_API void ebb_free(void *p);

/* calloc(n, size): n*size zeroed bytes; ENOMEM if n*size overflows. Memory the
 * OS has just mapped is known to be zero and is not cleared again. */
EBB_API EBB_MALLOC_ATTR void *ebb_calloc(size_t n, size_t size);

/* realloc(p, size): resizes in place when the new size fits the block and is
 * at least half of its usable size (a much smaller size moves to a smaller
 * block, so the memory can be reused); huge blocks grow and shrink by
 * remapping pages, never by copying.
 *   realloc(NULL, size) is malloc(size).
 *   realloc(p, 0) frees p and returns NULL, as glibc does; that is not a failure
 *   and errno is left unchanged.
 *   On failure returns NULL with ENOMEM and p is unchanged and still valid. */
EBB_API void *ebb_realloc(void *p, size_t size);

/* reallocarray(p, n, size): realloc(p, n*size), ENOMEM (p unchanged) if n*size
 * overflows. */
EBB_API void *ebb_reallocarray(void *p, size_t n, size_t size);

/* posix_memalign(&p, alignment, size): alignment must be a power of two and a
 * multiple of sizeof(void *); otherwise returns EINVAL. Returns ENOMEM on
 * failure. *p is written only on success. errno is not changed. */
EBB_API int ebb_posix_memalign(void **p, size_t alignment, size_t size);

/* aligned_alloc(alignment, size): alignment must be a power of two (any size is
 * accepted, as in C17/DR 460); otherwise NULL with errno = EINVAL. */
EBB_API EBB_MALLOC_ATTR void *ebb_aligned_alloc(size_t alignment, size_t size);

/* memalign(alignment, size): as aligned_alloc; a non-power-of-two alignment
 * gets NULL with errno = EINVAL (as glibc >= 2.38 does). */
EBB_API EBB_MALLOC_ATTR void *ebb_memalign(size_t alignment, size_t size);

/* valloc(size): page-aligned. pvalloc(size): page-aligned, size rounded up to a
 * whole number of pages (pvalloc(0) allocates one page). */
EBB_API EBB_MALLOC_ATTR void *ebb_valloc(size_t size);
EBB_API EBB_MALLOC_ATTR void *ebb_pvalloc(size_t size);

/* malloc_usable_size(p): the number of bytes the caller may use in the block,
 * which is at least the requested size. 0 for NULL. */
EBB_API size_t ebb_malloc_usable_size(const void *p);

/* free_sized(p, size) (C23): free(p) for a block allocated with `size` bytes by
 * malloc/calloc/realloc. free_aligned_sized(p, alignment, size) (C23): the same
 * for a block from aligned_alloc/posix_memalign/memalign. In release mode the
 * size and alignment are trusted hints; debug mode checks them. */
EBB_API void ebb_free_sized(void *p, size_t size);
EBB_API void ebb_free_aligned_sized(void *p, size_t alignment, size_t size);

/* malloc_trim(pad): gives back to the OS everything that can be given back now,
 * from every thread's heap and the shared caches (pad is ignored). Returns 1 if
 * any memory was released, 0 otherwise. */
EBB_API int ebb_malloc_trim(size_t pad);

/* ebb_collect(force): returns free memory held by the calling thread's heap and
 * the shared caches to the OS. With force, also everything that a later purge
 * would return. Equivalent to malloc_trim(0) when force is true. */
EBB_API void ebb_collect(bool force);

/* mallopt(param, value): accepted for compatibility with glibc programs and
 * ignored (ebb's behaviour is set by EBB_* environment variables). Returns 1,
 * glibc's "success". */
EBB_API int ebb_mallopt(int param, int value);

#ifdef __cplusplus
}
#endif

#endif /* EBB_H */
