/* A write into a freed block half a second after its free, found by
 * ebb_debug_verify(): a block stays in the quarantine EBB_DEBUG_QUARANTINE_IDLE
 * ms (1000) before its wait can release it. (With a 200 ms wait, review
 * finding, this write went unreported.) */
#include <time.h>

#include "ebb.h"
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(100);
    announce(p);
    free(p);
    nanosleep(&(struct timespec){.tv_nsec = 500000000}, NULL);
    ((volatile char *)p)[7] = 'x';
    size_t problems = ebb_debug_verify();
    printf("problems=%zu\n", problems);
    return survived();
}
