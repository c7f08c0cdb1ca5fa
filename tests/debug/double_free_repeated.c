/* Many reports from a program that goes on after its faults
 * (EBB_DEBUG_ON_ERROR=continue): three call sites, each freeing a block
 * twice, five times over. Reports keep their symbolized frames for the next
 * report (20 reports of one double free used to take 15 s, each one running
 * addr2line again); every report must still name its own call site, with
 * its file:line. */
#include "fault.h"

__attribute__((noinline)) static void twice_in_first(void)
{
    char *volatile p = allocate_victim(16);
    free(p);
    free(p); /* the first site's second free */
}

__attribute__((noinline)) static void twice_in_second(void)
{
    char *volatile p = allocate_victim(32);
    free(p);
    free(p); /* the second site's */
}

__attribute__((noinline)) static void twice_in_third(void)
{
    char *volatile p = allocate_victim(48);
    free(p);
    free(p); /* the third site's */
}

int main(void)
{
    for (int i = 0; i < 5; i++) {
        twice_in_first();
        twice_in_second();
        twice_in_third();
    }
    return survived();
}
