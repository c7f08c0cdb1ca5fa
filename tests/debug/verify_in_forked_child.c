/* ebb_debug_verify in a forked child of a process whose other thread keeps
 * allocating large blocks: the child finds that thread's segments
 * abandoned, with whatever block it was heading at the fork, and verify
 * reported a "corrupted block header" for it (review finding: 20 children
 * of 300; a report aborts by default). Prints how many children reported;
 * exits 1 if any did. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebb.h"

static atomic_int stop;

static void *churn(void *arg)
{
    unsigned s = 1;
    (void)arg;
    char *live[8] = {0};
    while (!atomic_load(&stop)) {
        size_t n = 100000 + (size_t)rand_r(&s) % 700000;
        int k = rand_r(&s) % 8;
        free(live[k]);
        live[k] = malloc(n);
        if (live[k])
            memset(live[k], 0x77, n);
    }
    for (int k = 0; k < 8; k++)
        free(live[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    int forks = argc > 1 ? atoi(argv[1]) : 200, bad = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, churn, NULL) != 0)
        return 9;
    for (int i = 0; i < forks; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            _exit(ebb_debug_verify() ? 1 : 0);
        int st;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad++;
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    printf("reported=%d of %d\n", bad, forks);
    return bad != 0;
}
