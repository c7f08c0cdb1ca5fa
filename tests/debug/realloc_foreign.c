/* realloc of a pointer ebb never returned. */
#include "fault.h"

static char not_from_malloc[64];

int main(void)
{
    char *p = not_from_malloc;
    announce(p);
    char *q = realloc(p, 80);
    if (q == NULL)
        printf("realloc returned NULL\n");
    return survived();
}
