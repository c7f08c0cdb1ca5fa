/* A write after free found by a purge pass (its block's time in the
 * quarantine is over; the driver sets EBB_BACKGROUND=0, so the pass runs
 * inline at a later malloc), and a SIGABRT handler that forks, as crash
 * reporters do, then exits. The report used to abort inside the pass,
 * holding the pass lock that fork's handlers take: the handler hung. */
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "fault.h"

static void on_abort(int sig)
{
    (void)sig;
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    static const char msg[] = "handler: forked\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(5);
    _exit(3);
}

int main(void)
{
    signal(SIGABRT, on_abort);
    char *p = allocate_victim(100);
    announce(p);
    free(p);
    ((volatile char *)p)[10] = 'X';
    for (int i = 0; i < 60; i++) { /* about 3 s; the wait is 1 s */
        nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
        free(malloc(200000));
    }
    return survived();
}
