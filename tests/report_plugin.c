/* A plugin that frees a block twice, built twice under two names
 * (tests/tests.mk: libreport_plugin_a.so, libreport_plugin_b.so), for
 * tests/debug/report_after_library_swap.c: the second is loaded where the
 * first was, and its report must name its own function and line; and for
 * tests/debug/trace_of_unloaded_library.c, a block the first allocated must
 * not be reported as the second's. */
#include <stdlib.h>

#ifdef SECOND
#define PLUGIN_DOUBLE_FREE second_plugin_double_free
#define PLUGIN_ALLOCATE second_plugin_allocate
#else
#define PLUGIN_DOUBLE_FREE first_plugin_double_free
#define PLUGIN_ALLOCATE first_plugin_allocate
#endif

__attribute__((noinline)) void PLUGIN_DOUBLE_FREE(void)
{
    char *volatile p = malloc(24);
    free(p);
    free(p); /* the plugin's double free */
    __asm__ volatile("" ::: "memory");
}

/* Both builds export this name, so the program finds either one. */
void plugin_double_free(void)
{
    PLUGIN_DOUBLE_FREE();
}

__attribute__((noinline)) void *PLUGIN_ALLOCATE(void)
{
    void *volatile p = malloc(40);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* Both builds export this name too. */
void *plugin_allocate(void)
{
    return PLUGIN_ALLOCATE();
}
