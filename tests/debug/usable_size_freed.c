/* malloc_usable_size of a freed block: named for the call, not as a double
 * free. */
#include <malloc.h>

#include "fault.h"

int main(void)
{
    char *p = allocate_victim(40);
    free(p);
    announce(p);
    size_t n = malloc_usable_size(p);
    printf("usable=%zu\n", n); /* 0 with EBB_DEBUG_ON_ERROR=continue */
    return survived();
}
