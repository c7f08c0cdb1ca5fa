/* A double free half a second after the first free: still reported as a
 * double free, since the block waits in the quarantine EBB_DEBUG_QUARANTINE_IDLE
 * ms (1000) before it can be released and reused. (With a 200 ms wait, review
 * finding, malloc handed the block out again and the second free released that
 * new, live block without a word.) */
#include <time.h>

#include "ebb.h"
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(100);
    announce(p);
    free(p);
    nanosleep(&(struct timespec){.tv_nsec = 500000000}, NULL);
    for (int i = 0; i < 20000; i++) /* would take p again, had it been released */
        free(malloc(100));
    free(p);
    return survived();
}
