/* A program that rewrites its environment strings in place, as
 * setproctitle does in nginx and PostgreSQL, and changes directory, as
 * daemons do, then frees a block twice (run with EBB_DEBUG_ON_ERROR=continue
 * and a relative EBB_DEBUG_LOG). The report must reach the log file named at
 * start all the same: ebb keeps its own copy of the option, made absolute. */
#include <unistd.h>

#include "fault.h"

extern char **environ;

int main(void)
{
    for (char **e = environ; *e; e++)
        memset(*e, 0, strlen(*e));
    if (chdir("/") != 0)
        return 2;
    char *p = allocate_victim(24);
    announce(p);
    free(p);
    free(p);
    return survived();
}
