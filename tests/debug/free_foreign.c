/* free of a pointer ebb never returned: a static array. */
#include "fault.h"

static char not_from_malloc[64];

int main(void)
{
    char *p = not_from_malloc + 16;
    announce(p);
    free(p);
    return survived();
}
