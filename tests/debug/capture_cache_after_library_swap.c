/* Issue 4: a capture-cache hit did not check for unloaded code. One process
 * (no fork) loads a plugin, allocates through it, unloads it, and does so
 * again and again from one call site, so that every allocation on the way
 * (dlopen's and dlclose's own too) is served by the cache; then it loads
 * another plugin in the first one's place (tests/swap_plugin_first.s and
 * tests/swap_plugin_second.s: a malloc call at the same return address,
 * reached at the same stack address) and allocates through it. With no miss
 * between the unload and that allocation, the hit replayed the first
 * plugin's walk on the second's stack: the first's rbp rule on the second's
 * scratch rbp took a frame 32 MiB above the stack, which a reserved,
 * inaccessible region of this thread's stack mapping makes a SIGSEGV inside
 * ebb every time (elsewhere it could be a wrong trace). Run with
 * EBB_DEBUG_ON_ERROR=continue: the last block is freed twice, so that the
 * report prints its allocation's trace. Usage:
 * capture_cache_after_library_swap DIR [FIRST SECOND [unseen]], DIR holding
 * the plugins (by default libswap_plugin_first.so, then the second);
 * "unseen": load and unload with the C library's dlopen and dlclose, which
 * ebb's do not see (as the C library's own unloads, or a program linked with
 * libebb.a): only the replay's bound keeps it from the SIGSEGV. Exit 0 when
 * the thread ended normally. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ROUNDS       8                    /* loads of the first plugin before the swap */
#define STACK_BYTES  ((size_t)1 << 20)
#define GUARD_BYTES  ((size_t)64 << 20)   /* above the stack, inaccessible: a walk that
                                             goes 32 MiB up faults here */

static const char *dir, *first = "libswap_plugin_first.so", *second = "libswap_plugin_second.so";
static void *(*open_fn)(const char *, int) = dlopen; /* "unseen": the C library's */
static int (*close_fn)(void *) = dlclose;

/* One call site for every allocation through a plugin, so that its frames
 * above entry() are the same each time. */
__attribute__((noinline)) static void *call_entry(void *(*entry)(void))
{
    void *p = entry();
    __asm__ volatile("" ::: "memory");
    return p;
}

/* Free p, twice if `twice` (the report shows the allocation's trace). */
__attribute__((noinline)) static void release(void *p, int twice)
{
    free(p);
    __asm__ volatile("" ::: "memory");
    if (twice)
        free(p);
    __asm__ volatile("" ::: "memory");
}

/* Load `name`, allocate through it, free, unload, with the same calls each
 * time (a report, or a call site that differs, is a miss, which would empty
 * the cache). `report` 1: print where entry() was; 2: also free twice, while
 * the plugin is loaded. */
__attribute__((noinline)) static void allocate_through(const char *name, int report)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    void *h = open_fn(path, RTLD_NOW);
    if (h == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(2);
    }
    void *(*entry)(void) = (void *(*)(void))dlsym(h, "entry");
    void *p = call_entry(entry);
    if (report)
        fprintf(stderr, "--- %s at %p\n", name, (void *)entry);
    release(p, report == 2);
    close_fn(h);
}

/* The plugin and report of each round, in tables: one call site for all. */
static const char *names[ROUNDS + 1];
static int reports[ROUNDS + 1];

static void *swap(void *arg)
{
    (void)arg;
    for (int i = 0; i <= ROUNDS; i++)
        allocate_through(names[i], reports[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    dir = argc > 1 ? argv[1] : ".";
    if (argc > 3) {
        first = argv[2];
        second = argv[3];
    }
    if (argc > 4 && strcmp(argv[4], "unseen") == 0) {
        void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
        open_fn = libc ? (void *(*)(const char *, int))dlsym(libc, "dlopen") : NULL;
        close_fn = libc ? (int (*)(void *))dlsym(libc, "dlclose") : NULL;
        if (open_fn == NULL || close_fn == NULL) {
            fprintf(stderr, "the C library's dlopen and dlclose not found\n");
            return 2;
        }
    }
    for (int i = 0; i <= ROUNDS; i++) {
        names[i] = i < ROUNDS ? first : second;
        reports[i] = i < ROUNDS - 1 ? 0 : i - ROUNDS + 2;
    }
    char *map = mmap(NULL, STACK_BYTES + GUARD_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED || mprotect(map, STACK_BYTES, PROT_READ | PROT_WRITE) != 0)
        return 2;
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstack(&attr, map, STACK_BYTES) != 0 ||
        pthread_create(&thread, &attr, swap, NULL) != 0 || pthread_join(thread, NULL) != 0)
        return 2;
    return 0;
}
