/* A plugin allocates two blocks and is closed; another plugin is loaded at
 * its address. One block is then freed twice, the other lost: both reports
 * named the second plugin's function and line as where the first plugin's
 * blocks were allocated, as if certain (review finding: traces keep return
 * addresses, and the report symbolized them against whatever was loaded
 * there by then). Usage: trace_of_unloaded_library FIRST.so SECOND.so,
 * under EBB_DEBUG_ON_ERROR=continue; prints where each plugin's function
 * was, and the victim. */
#include <dlfcn.h>

#include "fault.h"

static void *lost;

static void *load(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("dlopen %s: %s\n", path, dlerror());
        exit(2);
    }
    void *fn = dlsym(h, "plugin_allocate");
    if (fn == NULL) {
        printf("dlsym plugin_allocate: %s\n", dlerror());
        exit(2);
    }
    printf("plugin=%p %s\n", fn, path);
    fflush(stdout);
    return h;
}

static void *allocate_in(void *h)
{
    void *(*fn)(void) = (void *(*)(void))dlsym(h, "plugin_allocate");
    return fn();
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        printf("usage: trace_of_unloaded_library FIRST.so SECOND.so\n");
        return 2;
    }
    void *h = load(argv[1]);
    char *victim = allocate_in(h);
    lost = allocate_in(h);
    dlclose(h);
    h = load(argv[2]);
    free(allocate_in(h)); /* the second plugin's own code runs at that address */
    announce(victim);
    free(victim);
    free(victim);
    lost = NULL;
    scrub_stack();
    return survived(); /* the second plugin stays loaded for the leak report */
}
