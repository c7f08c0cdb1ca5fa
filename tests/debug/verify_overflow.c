/* A write past a live block's end, found by ebb_debug_verify() before the
 * block is ever freed. */
#include "ebb.h"
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(40);
    announce(p);
    ((volatile char *)p)[41] = 'x';
    size_t problems = ebb_debug_verify();
    printf("problems=%zu\n", problems);
    return survived();
}
