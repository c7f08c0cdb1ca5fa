/* 32,768 blocks lost from 32,768 different call chains, so the leak report
 * has as many groups. Each level of the recursion calls one of two
 * functions, picked by a bit of the chain's number, from one of two call
 * sites: every chain's return addresses differ. The report grouped blocks by
 * searching the groups found so far, and sorted them by selection: 26 s for
 * 40,000 groups. Run with EBB_DEBUG_TRACE_DEPTH=32 (15 levels and more). */
#include "fault.h"

#define LEVELS 15

static void *left(int level, unsigned bits);
static void *right(int level, unsigned bits);

__attribute__((noinline)) static void *left(int level, unsigned bits)
{
    void *p = level == 0 ? malloc(16) : bits & 1 ? left(level - 1, bits >> 1) : right(level - 1, bits >> 1);
    __asm__ volatile("" ::: "memory"); /* a real call, not a tail call */
    return p;
}

__attribute__((noinline)) static void *right(int level, unsigned bits)
{
    void *p = level == 0 ? malloc(16) : bits & 1 ? left(level - 1, bits >> 1) : right(level - 1, bits >> 1);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    for (unsigned chain = 0; chain < 1u << LEVELS; chain++)
        if (left(LEVELS, chain) == NULL)
            return 2;
    scrub_stack();
    printf("chains=%u\n", 1u << LEVELS);
    return survived();
}
