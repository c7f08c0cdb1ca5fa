/* main ends with pthread_exit while another thread runs on; the process
 * exits when that thread returns, and the leak report runs then. The files
 * of /proc/self/ that describe memory are main's, and read empty once it
 * has exited: the report found no roots and called every block lost (the
 * one a global keeps, glibc's own), with exit status 23 under
 * EBB_DEBUG_LEAK_EXITCODE (review finding), and counted the exited main
 * thread's registers as unread (INCOMPLETE). A join instead (argument
 * "join") is the control. Nothing is lost. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *kept; /* external: the compiler keeps the store */

static void *last_thread(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    for (int i = 0; i < 100; i++)
        free(malloc(1000 + (size_t)i));
    return NULL;
}

int main(int argc, char **argv)
{
    kept = malloc(1000);
    memset(kept, 2, 1000);
    printf("kept=%p\n", (void *)kept);
    fflush(stdout);
    pthread_t t;
    if (pthread_create(&t, NULL, last_thread, NULL) != 0)
        return 9;
    if (argc > 1 && strcmp(argv[1], "join") == 0) {
        pthread_join(t, NULL);
        return 0;
    }
    pthread_exit(NULL);
}
