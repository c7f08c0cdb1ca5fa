/* EBB_DEBUG_LEAK_EXITCODE with another thread holding stdout's lock at exit
 * (as one blocked in printf to a full pipe does): the report's flush of
 * stdout before _exit must not wait for it (fflush did: the process hung). */
#include "fault.h"

#include <pthread.h>
#include <unistd.h>

static void *hold_stdout(void *arg)
{
    (void)arg;
    flockfile(stdout);
    for (;;)
        pause();
    return NULL;
}

__attribute__((noinline)) static void lose(void)
{
    volatile uintptr_t hidden = (uintptr_t)malloc(32) ^ 0x5555555555555555ull;
    (void)hidden;
}

int main(void)
{
    printf("started\n");
    fflush(stdout);
    pthread_t t;
    pthread_create(&t, NULL, hold_stdout, NULL);
    usleep(100000);
    lose();
    scrub_stack();
    return 0;
}
