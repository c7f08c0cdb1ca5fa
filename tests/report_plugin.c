/* A plugin that frees a block twice, built twice under two names
 * (tests/tests.mk: libreport_plugin_a.so, libreport_plugin_b.so), for
 * tests/debug/report_after_library_swap.c: the second is loaded where the
 * first was, and its report must name its own function and line. */
#include <stdlib.h>

#ifdef SECOND
#define PLUGIN_DOUBLE_FREE second_plugin_double_free
#else
#define PLUGIN_DOUBLE_FREE first_plugin_double_free
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
