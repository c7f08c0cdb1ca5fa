/* A write into a freed block in the quarantine, found by ebb_debug_verify(). */
#include "ebb.h"
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(40);
    announce(p);
    free(p);
    ((volatile char *)p)[3] = 'x';
    size_t problems = ebb_debug_verify();
    printf("problems=%zu\n", problems);
    return survived();
}
