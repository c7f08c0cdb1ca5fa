/* A double free of a block allocated in a plugin that was loaded by a
 * relative path ("./libsepdebug_plugin.so", from the plugin's directory),
 * after the program changed to another directory: the report must still
 * find the plugin's file, and name the static function that allocated,
 * which only the plugin's separate debug info names. Usage:
 * plugin_by_relative_path DIR (the plugin's directory). */
#include <dlfcn.h>
#include <unistd.h>

#include "fault.h"

int main(int argc, char **argv)
{
    if (argc != 2 || chdir(argv[1]) != 0) {
        printf("usage: plugin_by_relative_path DIR\n");
        return 2;
    }
    void *h = dlopen("./libsepdebug_plugin.so", RTLD_NOW | RTLD_LOCAL);
    void *(*allocate)(size_t) = h ? (void *(*)(size_t))dlsym(h, "plugin_allocate") : NULL;
    if (allocate == NULL) {
        printf("no plugin: %s\n", dlerror());
        return 2;
    }
    if (chdir("/") != 0)
        return 2;
    char *p = allocate(24);
    announce(p);
    free(p);
    free(p);
    return survived();
}
