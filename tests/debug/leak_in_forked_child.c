/* Leak reports of forked children. The parent loses 100 bytes from
 * lose_in_parent, then forks twice: the first child loses 30 bytes of its own
 * from lose_in_child and exits, the second exits losing nothing; the parent
 * waits for both and exits. Each process reports at its exit: a child lists
 * the blocks it lost itself and counts the parent's 100 bytes in one line.
 * Prints the children's pids and exit statuses. */
#include "fault.h"

#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static void lose_in_parent(void)
{
    volatile uintptr_t hidden = (uintptr_t)malloc(100) ^ 0x5555555555555555ull;
    (void)hidden;
}

__attribute__((noinline)) static void lose_in_child(void)
{
    volatile uintptr_t hidden = (uintptr_t)malloc(30) ^ 0x5555555555555555ull;
    (void)hidden;
}

static pid_t child(int leaks)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (leaks)
            lose_in_child();
        scrub_stack();
        exit(0);
    }
    return pid;
}

int main(void)
{
    lose_in_parent();
    scrub_stack();
    pid_t leaking = child(1), clean = child(0);
    int st_leaking = -1, st_clean = -1;
    waitpid(leaking, &st_leaking, 0);
    waitpid(clean, &st_clean, 0);
    printf("leaking=%d status=%d\n", (int)leaking, WIFEXITED(st_leaking) ? WEXITSTATUS(st_leaking) : -1);
    printf("clean=%d status=%d\n", (int)clean, WIFEXITED(st_clean) ? WEXITSTATUS(st_clean) : -1);
    return 0;
}
