/* A program that rewrites its environment strings in place, as
 * setproctitle does in nginx and PostgreSQL, then frees a block twice (run
 * with EBB_DEBUG_ON_ERROR=continue and EBB_DEBUG_LOG set). The report must
 * reach the log file all the same: ebb keeps its own copy of the option. */
#include "fault.h"

extern char **environ;

int main(void)
{
    for (char **e = environ; *e; e++)
        memset(*e, 0, strlen(*e));
    char *p = allocate_victim(24);
    announce(p);
    free(p);
    free(p);
    return survived();
}
