/* realloc of a block already freed. */
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(40);
    announce(p);
    free(p);
    char *q = realloc(p, 80);
    if (q == NULL)
        printf("realloc returned NULL\n");
    return survived();
}
