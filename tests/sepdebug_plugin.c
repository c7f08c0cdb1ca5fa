/* A plugin whose symbol table is stripped and whose debug info lives in a
 * separate file (tests/tests.mk: objcopy --only-keep-debug, strip, a
 * .gnu_debuglink), as in a distribution's packages: the static function
 * that allocates is named by no symbol table left in the library, only by
 * the debug info (tests/debug/plugin_by_relative_path.c). */
#include <stdlib.h>

__attribute__((noinline)) static void *hidden_allocate(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory"); /* a real call, not a tail call */
    return p;
}

void *plugin_allocate(size_t n)
{
    void *p = hidden_allocate(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
