/*
 * deepbind_plugin.c — a library that tests/test_deepbind.c loads with
 * RTLD_DEEPBIND: it frees the program's blocks and hands out blocks of its
 * own, through whichever malloc and free its references bound to.
 */
#include <stdlib.h>
#include <string.h>

void *plugin_free_address(void)
{
    return (void *)free;
}

void plugin_free(void *p)
{
    free(p);
}

char *plugin_strdup(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    return d ? strcpy(d, s) : NULL;
}
