/* A write one byte past the requested size: found at free. */
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(10);
    announce(p);
    ((volatile char *)p)[10] = 'x';
    free(p);
    return survived();
}
