/*
 * test_prefixed.c — libebb-prefixed.so, the ebb_ names alone, linked into a
 * program whose allocator stays glibc's: no standard name resolves to ebb
 * (review finding: with libebb.so linked beside another allocator, every name
 * that allocator does not define, such as reallocarray, free_sized or the
 * __libc_ family, was ebb's, and its blocks crossed allocators and crashed),
 * glibc's blocks go through glibc's calls, ebb's through the ebb_ calls.
 */
#include "check.h"

#include <dlfcn.h>
#include <malloc.h>

#include "ebb.h"

/* Every standard or glibc name libebb.so exports (src/exports.map). */
static const char *const standard_names[] = {
    "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "malloc_usable_size", "free_sized", "free_aligned_sized",
    "malloc_trim", "mallopt", "cfree", "mallinfo", "mallinfo2", "malloc_stats", "malloc_info",
    "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc", "__libc_memalign",
    "__libc_valloc", "__libc_pvalloc", "__libc_mallopt", "__libc_mallinfo",
};

static void no_standard_name_resolves_to_ebb(void)
{
    Dl_info ebb_lib;
    REQUIRE(dladdr((void *)ebb_malloc, &ebb_lib) != 0, "dladdr(ebb_malloc) failed");
    CHECK(strstr(ebb_lib.dli_fname, "libebb-prefixed.so") != NULL,
          "ebb_malloc should come from libebb-prefixed.so, not %s", ebb_lib.dli_fname);
    for (size_t i = 0; i < sizeof standard_names / sizeof standard_names[0]; i++) {
        void *sym = dlsym(RTLD_DEFAULT, standard_names[i]);
        if (sym == NULL)
            continue; /* not in this C library either (free_sized before glibc 2.40) */
        Dl_info where;
        CHECK(dladdr(sym, &where) != 0 && where.dli_fbase != ebb_lib.dli_fbase,
              "%s resolves into %s, expected the C library's", standard_names[i],
              where.dli_fname ? where.dli_fname : "?");
    }
}

static void glibc_blocks_and_ebb_blocks_keep_to_their_allocators(void)
{
    /* glibc's: names glibc defines, one of them (reallocarray) the kind the
     * other allocator lacks in the review's case. */
    char *g = malloc(100);
    REQUIRE(g != NULL, "malloc(100) failed");
    memset(g, 'g', 100);
    char *g2 = reallocarray(g, 100, 10);
    REQUIRE(g2 != NULL, "reallocarray(glibc block, 100, 10) failed");
    CHECK(g2[0] == 'g' && g2[99] == 'g', "reallocarray lost the block's bytes");
    CHECK(malloc_usable_size(g2) >= 1000, "malloc_usable_size of the glibc block: %zu",
          malloc_usable_size(g2));
    free(g2);
    malloc_trim(0);

    /* ebb's: through the ebb_ names only. */
    char *e = ebb_malloc(100);
    REQUIRE(e != NULL, "ebb_malloc(100) failed");
    memset(e, 'e', 100);
    char *e2 = ebb_reallocarray(e, 100, 10);
    REQUIRE(e2 != NULL, "ebb_reallocarray failed");
    CHECK(e2[0] == 'e' && e2[99] == 'e', "ebb_reallocarray lost the block's bytes");
    CHECK(ebb_malloc_usable_size(e2) >= 1000, "ebb_malloc_usable_size: %zu", ebb_malloc_usable_size(e2));
    ebb_free(e2);
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    CHECK(ebb_stats_get(&st) == 0, "ebb_stats_get failed");
    CHECK(st.live_blocks == 0, "ebb holds %llu live blocks, expected none (glibc's blocks are not ebb's)",
          (unsigned long long)st.live_blocks);
}

int main(void)
{
    RUN_CASE(no_standard_name_resolves_to_ebb);
    RUN_CASE(glibc_blocks_and_ebb_blocks_keep_to_their_allocators);
    return check_finish();
}
