/* Reports keep their symbolized frames for the reports that follow
 * (src/trace.c, sym_resolve). A library unloaded and another loaded at the
 * same address has other code there: the second library's double free was
 * reported under the first one's function and line (review finding), and so
 * was a rebuilt library loaded again from the same path. Usage:
 * report_after_library_swap FIRST.so SECOND.so [--same-path], under
 * EBB_DEBUG_ON_ERROR=continue; prints where each plugin's function was. */
#include <stdbool.h>
#include <dlfcn.h>

#include "fault.h"

static int run(const char *path, const char *replacement)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("dlopen %s: %s\n", path, dlerror());
        return 2;
    }
    void (*fn)(void) = (void (*)(void))dlsym(h, "plugin_double_free");
    if (fn == NULL) {
        printf("dlsym plugin_double_free: %s\n", dlerror());
        return 2;
    }
    printf("plugin=%p %s\n", (void *)fn, path);
    fflush(stdout);
    fn();
    /* --replaced-while-loaded: then the file is replaced on disk while
     * loaded, as an upgrade does: the next report must not read the new
     * file, though the first just read the old one. */
    if (replacement) {
        if (rename(replacement, path) != 0) {
            printf("rename %s onto %s failed\n", replacement, path);
            return 2;
        }
        fn();
    }
    dlclose(h);
    return 0;
}

int main(int argc, char **argv)
{
    bool same_path = argc == 4 && strcmp(argv[3], "--same-path") == 0;
    bool replaced = argc == 4 && strcmp(argv[3], "--replaced-while-loaded") == 0;
    if (argc != 3 && !same_path && !replaced) {
        printf("usage: report_after_library_swap FIRST.so SECOND.so [--same-path|--replaced-while-loaded]\n");
        return 2;
    }
    free(allocate_victim(8)); /* links this program to ebb (the linker drops an unused library) */
    if (replaced) /* and the new file loaded afresh, where the old one was */
        return run(argv[1], argv[2]) != 0 || run(argv[1], NULL) != 0 ? 2 : survived();
    if (run(argv[1], NULL) != 0)
        return 2;
    /* --same-path: the second build replaces the first's file, as a rebuild
     * does, and is loaded from the first's path. */
    if (same_path && rename(argv[2], argv[1]) != 0) {
        printf("rename %s onto %s failed\n", argv[2], argv[1]);
        return 2;
    }
    if (run(same_path ? argv[1] : argv[2], NULL) != 0)
        return 2;
    return survived();
}
