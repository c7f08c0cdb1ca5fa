/*
 * test_dlopen.c — libebb.so loaded with dlopen beside the C library's malloc,
 * for its ebb_ names, then closed while its threads may still run: the
 * background thread it started, and a thread of the program that used it,
 * whose exit runs ebb's thread-exit handler. The library is linked with
 * `-z nodelete` (Makefile), so dlclose keeps its code mapped; before, the
 * scavenger and that handler ran in unmapped code and the process died with
 * SIGSEGV (review finding).
 *
 *   test_dlopen PATH_TO_LIBEBB_SO
 */
#include "check.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

static const char *lib_path;
static void *(*lib_malloc)(size_t);
static void (*lib_free)(void *);
static pthread_barrier_t used, closed;

/* Allocates with ebb, then waits until the library is closed, and exits. */
static void *user_thread(void *arg)
{
    (void)arg;
    void *p = lib_malloc(1000);
    memset(p, 1, 1000);
    lib_free(p);
    pthread_barrier_wait(&used);
    pthread_barrier_wait(&closed);
    return NULL;
}

static void a_closed_library_stays_mapped_for_its_threads(void)
{
    void *h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h != NULL, "dlopen(%s): %s", lib_path, dlerror());
    lib_malloc = (void *(*)(size_t))dlsym(h, "ebb_malloc");
    lib_free = (void (*)(void *))dlsym(h, "ebb_free");
    REQUIRE(lib_malloc != NULL && lib_free != NULL, "ebb_malloc/ebb_free not found in %s", lib_path);

    pthread_barrier_init(&used, NULL, 2);
    pthread_barrier_init(&closed, NULL, 2);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, user_thread, NULL) == 0, "pthread_create failed");
    pthread_barrier_wait(&used);

    /* Memory to purge, so that the background thread starts and has work
     * for a purge delay after the close. */
    enum { N = 64 };
    void *v[N];
    void *big = lib_malloc((size_t)10 << 20);
    REQUIRE(big != NULL, "ebb_malloc(10 MiB) failed");
    memset(big, 1, (size_t)10 << 20);
    for (int i = 0; i < N; i++) {
        v[i] = lib_malloc(100000);
        REQUIRE(v[i] != NULL, "ebb_malloc(100000) failed");
        memset(v[i], 1, 100000);
    }
    for (int i = 0; i < N; i++)
        lib_free(v[i]);
    lib_free(big);

    CHECK(dlclose(h) == 0, "dlclose failed: %s", dlerror());
    void *again = dlopen(lib_path, RTLD_NOW | RTLD_NOLOAD);
    CHECK(again != NULL, "after dlclose, %s is no longer loaded: expected -z nodelete to keep it",
          lib_path);
    if (again)
        dlclose(again);

    pthread_barrier_wait(&closed); /* the user thread exits now */
    pthread_join(t, NULL);
    /* Several purge delays, in which the background thread runs: the
     * process must still be alive after them (the runner checks its exit). */
    usleep(300 * 1000);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH_TO_LIBEBB_SO\n", argv[0]);
        return 2;
    }
    lib_path = argv[1];
    RUN_CASE(a_closed_library_stays_mapped_for_its_threads);
    return check_finish();
}
