/* A double free of a huge block bigger than the whole quarantine, after a
 * block of the same size was allocated in between: the common "free, then
 * allocate the same buffer again" pattern. Review finding: the freed mapping
 * went to the huge cache, the new block got its address, and the second free
 * of the old pointer freed the new block, unreported. Now the old range
 * stays reserved while debug mode remembers the block: the new block lies
 * elsewhere, the second free is a double free with its traces, and the new
 * block is untouched ("survived" with EBB_DEBUG_ON_ERROR=continue). */
#include <sys/mman.h>

#include "fault.h"

/* "address-space", run under ulimit -v: five 100 MiB blocks freed must leave
 * the program room for its own mmap of 300 MiB and a thread (reserved ranges
 * under RLIMIT_AS took it: review finding). */
static void *nothing(void *arg)
{
    return arg;
}

static int address_space_left(void)
{
    for (int i = 0; i < 5; i++) {
        char *p = malloc((size_t)100 << 20);
        if (p == NULL)
            return 5;
        memset(p, 1, 4096);
        free(p);
    }
    void *m = mmap(NULL, (size_t)300 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 6;
    munmap(m, (size_t)300 << 20);
    pthread_t t;
    if (pthread_create(&t, NULL, nothing, NULL) != 0)
        return 7;
    pthread_join(t, NULL);
    return survived();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "address-space") == 0)
        return address_space_left();
    size_t n = (size_t)20 << 20;
    char *p = allocate_victim(n);
    announce(p);
    free(p);
    char *q = malloc(n);
    if (q == NULL || q == p)
        return 3; /* the old address handed out again */
    memset(q, 'Q', n);
    free(p);
    if (q[0] != 'Q' || q[n - 1] != 'Q')
        return 4;
    free(q);
    return survived();
}
