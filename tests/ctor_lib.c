/*
 * ctor_lib.c — a shared library whose constructor allocates before ebb's own
 * initialization can have run (see tests.mk for the link order that makes the
 * loader run this constructor first). It is not linked with ebb: its malloc is
 * whatever the process has, ebb when ebb is linked in or preloaded.
 *
 * The constructor allocates, frees, reallocates, callocs, aligns, starts a
 * thread that allocates, and keeps one block for test_ctor.c to use.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CTOR_BLOCK_SIZE 1000
#define CTOR_THREAD_BLOCK_SIZE 64

static void *kept_block;
static void *kept_thread_block;
static int problems; /* bit set, see ctor_lib_problems() */
static char malloc_origin[512];

static uint8_t pattern(size_t i)
{
    return (uint8_t)(i * 7 + 3);
}

static void *thread_fn(void *unused)
{
    (void)unused;
    void *p = malloc(5000);
    if (!p)
        return NULL;
    memset(p, 0x33, 5000);
    free(p);
    void *q = malloc(CTOR_THREAD_BLOCK_SIZE);
    if (q)
        memset(q, 0x44, CTOR_THREAD_BLOCK_SIZE);
    return q;
}

__attribute__((constructor(101))) static void ctor_lib_init(void)
{
    /* Some churn first. */
    for (int i = 0; i < 1000; i++) {
        void *p = malloc((size_t)(i * 37) % 3000 + 1);
        if (!p)
            problems |= 1;
        else
            memset(p, 0x55, 1);
        free(p);
    }
    unsigned char *c = calloc(100, 10);
    if (!c)
        problems |= 1;
    else
        for (int i = 0; i < 1000; i++)
            if (c[i])
                problems |= 2;
    unsigned char *r = realloc(c, 100000);
    if (!r) {
        problems |= 4;
        free(c);
    } else {
        for (int i = 0; i < 1000; i++)
            if (r[i])
                problems |= 4;
        free(r);
    }
    void *a = NULL;
    if (posix_memalign(&a, 4096, 100) != 0 || ((uintptr_t)a & 4095))
        problems |= 8;
    free(a);

    kept_block = malloc(CTOR_BLOCK_SIZE);
    if (!kept_block)
        problems |= 1;
    else
        for (size_t i = 0; i < CTOR_BLOCK_SIZE; i++)
            ((uint8_t *)kept_block)[i] = pattern(i);

    pthread_t t;
    if (pthread_create(&t, NULL, thread_fn, NULL) != 0)
        problems |= 16;
    else if (pthread_join(t, &kept_thread_block) != 0 || !kept_thread_block)
        problems |= 16;

    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    if (sym && dladdr(sym, &info) && info.dli_fname)
        strncpy(malloc_origin, info.dli_fname, sizeof malloc_origin - 1);
    else
        strcpy(malloc_origin, "(unknown)");
}

void *ctor_lib_block(void) { return kept_block; }
size_t ctor_lib_block_size(void) { return CTOR_BLOCK_SIZE; }
int ctor_lib_block_intact(void)
{
    for (size_t i = 0; i < CTOR_BLOCK_SIZE; i++)
        if (((uint8_t *)kept_block)[i] != pattern(i))
            return 0;
    return 1;
}
void *ctor_lib_thread_block(void) { return kept_thread_block; }
size_t ctor_lib_thread_block_size(void) { return CTOR_THREAD_BLOCK_SIZE; }
/* 1: NULL from malloc; 2: calloc not zeroed; 4: realloc lost data;
 * 8: posix_memalign failed; 16: the thread failed. */
int ctor_lib_problems(void) { return problems; }
const char *ctor_lib_malloc_origin(void) { return malloc_origin; }
