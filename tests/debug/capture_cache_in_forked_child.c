/* A forked child that swaps one library for another at the same address
 * (review finding, 2026-12-05). The parent allocates through the first
 * plugin (tests/swap_plugin_first.s), which fills the capture cache with
 * that walk, then forks; the child unloads it, loads the second
 * (tests/swap_plugin_second.s) in its place and allocates through it, from
 * the same return address at the same stack address. A forked child cannot
 * check for unloaded code (src/trace.c, "Unloaded code", step 4): replaying
 * the inherited entry gave it the first plugin's frames, or, with the first
 * plugin's rbp rule on the second's scratch rbp, a SIGSEGV inside ebb. Each
 * block is freed twice (run with EBB_DEBUG_ON_ERROR=continue), so that the
 * report prints its allocation's trace. argv[1]: the directory of the two
 * plugins; argv[2] "threaded": a second thread lives through the fork (the
 * child then drops the cache; alone, it keeps it and checks for unloads as
 * any process does). Exit 0 when the child ended normally. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void *plugin;

/* One call site for both allocations, so that the frames above entry() are
 * the same in parent and child. */
__attribute__((noinline)) static void *call_entry(void *(*entry)(void))
{
    void *p = entry();
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void allocate_through(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    plugin = dlopen(path, RTLD_NOW);
    if (plugin == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(2);
    }
    void *(*entry)(void) = (void *(*)(void))dlsym(plugin, "entry");
    void *p = call_entry(entry);
    fprintf(stderr, "--- %s at %p\n", name, (void *)entry);
    free(p);
    free(p); /* the report shows the allocation's trace */
}

static void *sleeper(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    pthread_t thread;
    if (argc > 2 && strcmp(argv[2], "threaded") == 0 && pthread_create(&thread, NULL, sleeper, NULL) != 0)
        return 2;
    pid_t pid = -1;
    for (int i = 0; i < 2; i++) {
        if (i == 1) {
            pid = fork();
            if (pid != 0)
                break;
            dlclose(plugin);
        }
        allocate_through(dir, i == 0 ? "libswap_plugin_first.so" : "libswap_plugin_second.so");
    }
    if (pid == 0)
        _exit(0);
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return 2;
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "--- child killed by signal %d\n", WTERMSIG(status));
        return 1;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
