/* A write one past the requested size, found by realloc. With
 * EBB_DEBUG_ON_ERROR=continue the fault is reported once: realloc's own
 * free of the old block used to check the same canary again and report it
 * a second time ("found at free"), though the program never freed it. */
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(32);
    announce(p);
    p[32] = 'x';
    p = realloc(p, 64);
    free(p);
    return survived();
}
