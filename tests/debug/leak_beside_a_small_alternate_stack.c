/* A worker sets up a 2 KiB alternate signal stack (MINSIGSTKSZ, as older
 * programs size it for a crash handler) and sleeps while main returns. The
 * leak report asks every thread for its registers by a signal; delivered
 * on that stack (SA_ONSTACK), its frame did not fit where the CPU has
 * AVX-512 (3.3 KiB), and the kernel killed the process with SIGSEGV, with
 * no report. Expected: exit 0, the victim lost, the report whole. */
#include "fault.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static char alt[2048];

static void *worker(void *arg)
{
    (void)arg;
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0)
        printf("no alternate stack\n");
    for (;;)
        pause();
    return NULL;
}

int main(void)
{
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 2;
    usleep(50 * 1000);
    return 0;
}
