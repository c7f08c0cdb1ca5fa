/* A forked child's leak report while another thread of the parent was inside
 * dl_iterate_phdr at the fork. The loader holds its module-list lock around
 * the callback, so the child inherits that lock held by a thread it does not
 * have. The report used to list the loaded objects' RELRO regions with
 * dl_iterate_phdr in the child, and waited for that lock for ever. The child
 * loses one block from lose_in_child and exits; the parent waits for it at
 * most 20 s (then kills it) and prints its status. */
#include "fault.h"

#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int inside, may_leave;

static int slow_callback(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info, (void)size, (void)arg;
    atomic_store(&inside, 1);
    while (!atomic_load(&may_leave))
        usleep(1000);
    return 1; /* one module is enough */
}

static void *walk_modules(void *arg)
{
    (void)arg;
    dl_iterate_phdr(slow_callback, NULL);
    return NULL;
}

__attribute__((noinline)) static void lose_in_child(void)
{
    volatile uintptr_t hidden = (uintptr_t)malloc(30) ^ 0x5555555555555555ull;
    (void)hidden;
}

int main(void)
{
    pthread_t walker;
    if (pthread_create(&walker, NULL, walk_modules, NULL) != 0)
        return 2;
    while (!atomic_load(&inside))
        usleep(1000);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        lose_in_child();
        scrub_stack();
        exit(0);
    }
    atomic_store(&may_leave, 1);
    pthread_join(walker, NULL);
    int status = -1;
    for (int waited_ms = 0; waited_ms < 20000; waited_ms += 10) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
        usleep(10000);
    }
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        printf("child hung\n");
    }
    printf("child=%d status=%d\n", (int)pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return survived();
}
