/*
 * test_ctor.c — ebb works from the very first call, before its own
 * initialization: tests/ctor_lib.c's constructor allocates (and starts a
 * thread that allocates) before libebb's constructors run, and this program
 * then uses, checks, reallocates and frees those blocks.
 *
 * Built twice (tests.mk): linked with -lebb -lctor, and (-DCTOR_PRELOAD)
 * linked with -lctor only, to be run with LD_PRELOAD=libebb.so.
 */
#include "check.h"

#include <dlfcn.h>
#include <stdbool.h>

#include "ebb.h"

void *ctor_lib_block(void);
size_t ctor_lib_block_size(void);
int ctor_lib_block_intact(void);
void *ctor_lib_thread_block(void);
size_t ctor_lib_thread_block_size(void);
int ctor_lib_problems(void);
const char *ctor_lib_malloc_origin(void);

typedef size_t (*usable_fn)(const void *);

/* ebb's malloc_usable_size, looked up at run time so the preloaded build
 * needs no link-time reference to ebb. */
static usable_fn ebb_usable(void)
{
    return (usable_fn)dlsym(RTLD_DEFAULT, "ebb_malloc_usable_size");
}

static void ebb_is_the_process_allocator(void)
{
#ifdef CTOR_PRELOAD
    const char *pre = getenv("LD_PRELOAD");
    REQUIRE(pre && strstr(pre, "libebb"), "this build must run with LD_PRELOAD=.../libebb.so, "
            "LD_PRELOAD is %s", pre ? pre : "unset");
#else
    CHECK(strcmp(ebb_version(), "0.1.0") == 0, "ebb_version(): got %s", ebb_version());
#endif
    REQUIRE(ebb_usable() != NULL, "expected ebb_malloc_usable_size to be loaded (libebb in the "
            "process), dlsym found nothing");
    const char *origin = ctor_lib_malloc_origin();
    CHECK(strstr(origin, "libebb") != NULL, "expected the constructor's malloc to be libebb's, "
          "it was from %s", origin);
}

static void constructor_before_ebb_init_allocated_without_problems(void)
{
    int p = ctor_lib_problems();
    CHECK(p == 0, "expected the constructor's allocations to work, problem bits 0x%x (1 NULL, "
          "2 calloc not zero, 4 realloc lost data, 8 posix_memalign, 16 thread)", p);
}

static void block_from_constructor_is_an_ebb_block_and_usable(void)
{
    usable_fn usable = ebb_usable();
    REQUIRE(usable, "ebb_malloc_usable_size not found");
    uint8_t *b = ctor_lib_block();
    size_t n = ctor_lib_block_size();
    REQUIRE(b != NULL, "expected the constructor to have kept a block");
    CHECK(usable(b) >= n, "expected ebb to know the constructor's block (usable >= %zu), got %zu",
          n, usable(b));
    CHECK(ctor_lib_block_intact(), "expected the constructor's block to keep its contents");
    uint8_t copy[1000];
    memcpy(copy, b, sizeof copy);
    b = realloc(b, 100000);
    REQUIRE(b, "realloc of the constructor's block: expected a block");
    CHECK(memcmp(copy, b, sizeof copy) == 0, "realloc of the constructor's block: contents lost");
    CHECK(usable(b) >= 100000, "realloc'd block: ebb usable size %zu", usable(b));
    free(b);

    uint8_t *t = ctor_lib_thread_block();
    REQUIRE(t, "expected the constructor's thread to have returned a block");
    CHECK(usable(t) >= ctor_lib_thread_block_size(), "expected the constructor thread's block to "
          "be ebb's (usable >= %zu), got %zu", ctor_lib_thread_block_size(), usable(t));
    CHECK(check_all_bytes(t, ctor_lib_thread_block_size(), 0x44) == ctor_lib_thread_block_size(),
          "constructor thread's block: contents changed");
    free(t); /* freed by another thread than the one (long gone) that allocated it */

    /* And ordinary allocation in main goes on. */
    for (int i = 0; i < 10000; i++) {
        void *p = malloc((size_t)i % 5000);
        REQUIRE(p, "malloc(%d): expected a block", i % 5000);
        memset(p, 1, (size_t)i % 5000);
        free(p);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    RUN_CASE(ebb_is_the_process_allocator);
    RUN_CASE(constructor_before_ebb_init_allocated_without_problems);
    RUN_CASE(block_from_constructor_is_an_ebb_block_and_usable);
    return check_finish();
}
