/* A leak report over a million live blocks (a soak's report: gawk exiting
 * with 1.5 million live blocks spent 4.4 s and about 80 MB in it). With the
 * argument "child", it allocates, 125,000 times: three 24-byte nodes of a
 * hash table, each with a 16-byte value (all reachable, in an order the
 * buckets scatter), one 24-byte block lost from lose_small and one 40-byte
 * block lost from lose_big, and exits: 1,000,000 blocks and the bucket
 * array. The report must find the two lost groups exactly.
 *
 * Without an argument, it runs itself as that child twice, with
 * EBB_DEBUG_LEAKS=off and with the environment's setting, and prints
 * "report_kib=N": how much more the child's peak RSS was with the report
 * (wait4's ru_maxrss), the report's own memory. It was about 62 MiB (a
 * 56-byte span and an 8-byte work entry a block), now about 36 MiB. The
 * parent ends with _exit: its own report would mix with the child's. */
#include "fault.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 125000

typedef struct node_s {
    struct node_s *next;
    char *value;
    long key;
} node_t;

node_t **volatile million_buckets;

__attribute__((noinline)) static void lose_small(void)
{
    volatile uintptr_t hidden = (uintptr_t)malloc(24) ^ 0x5555555555555555ull;
    (void)hidden;
}

__attribute__((noinline)) static void lose_big(void)
{
    volatile uintptr_t hidden = (uintptr_t)malloc(40) ^ 0x5555555555555555ull;
    (void)hidden;
}

static int child(void)
{
    size_t nb = 3 * ROUNDS / 4; /* chains of 4 on average */
    node_t **buckets = calloc(nb, sizeof *buckets);
    if (buckets == NULL)
        return 2;
    uint64_t x = 88172645463325252ull; /* xorshift: the same scatter every run */
    for (long i = 0; i < ROUNDS; i++) {
        for (int k = 0; k < 3; k++) {
            node_t *e = malloc(sizeof *e);
            if (e == NULL || (e->value = malloc(16)) == NULL)
                return 2;
            memset(e->value, 0, 16);
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            e->key = 3 * i + k;
            e->next = buckets[x % nb];
            buckets[x % nb] = e;
        }
        lose_small();
        lose_big();
    }
    million_buckets = buckets;
    scrub_stack();
    return 0;
}

/* Run this program as the child, EBB_DEBUG_LEAKS=leaks if not NULL; its
 * peak RSS in KiB, -1 if it failed. */
static long run_child(const char *self, const char *leaks)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (leaks != NULL)
            setenv("EBB_DEBUG_LEAKS", leaks, 1);
        execl(self, self, "child", (char *)NULL);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("the child (EBB_DEBUG_LEAKS=%s) failed: status 0x%x\n", leaks ? leaks : "as set", status);
        return -1;
    }
    return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0)
        return child();
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        _exit(2);
    self[n] = '\0';
    long without = run_child(self, "off");
    long with = without < 0 ? -1 : run_child(self, NULL);
    if (with < 0)
        _exit(2);
    printf("report_kib=%ld\n", with - without);
    fflush(stdout);
    _exit(0);
}
