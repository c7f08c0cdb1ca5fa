/* free of a stack address. */
#include "fault.h"

int main(void)
{
    char buf[64];
    char *volatile p = buf + 8;
    announce(p);
    free(p);
    return survived();
}
