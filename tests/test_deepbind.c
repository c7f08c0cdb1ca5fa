/*
 * test_deepbind.c — under LD_PRELOAD, a library loaded with RTLD_DEEPBIND
 * uses ebb's malloc and free like the rest of the process. Review finding:
 * Debian's php-cli, which loads its extensions with RTLD_DEEPBIND, died with
 * SIGSEGV at startup when pdo.so freed an ebb block with glibc's free
 * (src/override_dlopen.c).
 *
 *   LD_PRELOAD=build/libebb.so test_deepbind
 *
 * The plugin (libdeepbind_plugin.so, beside this program) is opened by its
 * bare name, found through this program's RUNPATH ($ORIGIN): glibc searches
 * the RUNPATH of dlopen's caller, which ebb's dlopen must leave in place.
 */
#include "check.h"

#include <dlfcn.h>

static const char *const plugin = "libdeepbind_plugin.so";

/* ebb must be the process allocator, or these cases prove nothing. */
static bool ebb_preloaded(void)
{
    return dlsym(RTLD_DEFAULT, "ebb_malloc") != NULL;
}

static void a_deep_bound_library_frees_with_the_process_allocator(void)
{
    REQUIRE(ebb_preloaded(), "expected ebb preloaded (LD_PRELOAD=libebb.so), got glibc's malloc");
    void *h = dlopen(plugin, RTLD_NOW | RTLD_DEEPBIND);
    REQUIRE(h != NULL, "dlopen(%s, RTLD_DEEPBIND): %s", plugin, dlerror());
    void *(*free_address)(void) = (void *(*)(void))dlsym(h, "plugin_free_address");
    void (*plugin_free)(void *) = (void (*)(void *))dlsym(h, "plugin_free");
    char *(*plugin_strdup)(const char *) = (char *(*)(const char *))dlsym(h, "plugin_strdup");
    REQUIRE(free_address && plugin_free && plugin_strdup, "the plugin's functions not found");

    void *ours = (void *)free, *theirs = free_address();
    CHECK(theirs == ours, "the deep-bound plugin's free is %p, expected the process's (ebb's) %p",
          theirs, ours);

    /* In a child: glibc's free given an ebb block aborts or crashes. */
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork failed: %s", strerror(errno));
    if (pid == 0) {
        for (int i = 0; i < 1000; i++) {
            plugin_free(malloc(16 + (size_t)i * 37)); /* ours, freed by the plugin */
            free(plugin_strdup("allocated by the plugin")); /* the plugin's, freed here */
        }
        _exit(0);
    }
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid failed: %s", strerror(errno));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "blocks crossing the deep-bound plugin: expected the child to exit 0, got %s %d",
          WIFSIGNALED(status) ? "signal" : "exit status",
          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    dlclose(h);
}

static void a_bare_name_is_found_through_the_callers_runpath(void)
{
    REQUIRE(ebb_preloaded(), "expected ebb preloaded (LD_PRELOAD=libebb.so), got glibc's malloc");
    const int modes[] = {RTLD_NOW, RTLD_LAZY | RTLD_LOCAL, RTLD_NOW | RTLD_DEEPBIND};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        void *h = dlopen(plugin, modes[i]);
        CHECK(h != NULL, "dlopen(%s, 0x%x) through this program's RUNPATH: expected a handle, got %s",
              plugin, (unsigned)modes[i], dlerror());
        if (h)
            dlclose(h);
    }
    void *none = dlopen("libdeepbind_plugin_absent.so", RTLD_NOW);
    CHECK(none == NULL && dlerror() != NULL,
          "dlopen of a library that does not exist: expected NULL and a dlerror message, got %p", none);
}

int main(void)
{
    RUN_CASE(a_deep_bound_library_frees_with_the_process_allocator);
    RUN_CASE(a_bare_name_is_found_through_the_callers_runpath);
    return check_finish();
}
