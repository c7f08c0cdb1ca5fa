/* free_sized with a size other than the one allocated. */
#include "fault.h"

void free_sized(void *p, size_t size);

int main(void)
{
    char *p = allocate_victim(100);
    announce(p);
    free_sized(p, 99);
    return survived();
}
