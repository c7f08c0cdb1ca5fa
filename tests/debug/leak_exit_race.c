/* Another thread frees (and unmaps at once) 40 MiB blocks while the leak
 * report runs at exit. The report read the blocks' headers after listing
 * them, and crashed on an unmapped one (7 runs in 20). */
#include <pthread.h>
#include <unistd.h>

#include "fault.h"

static void *churn(void *arg)
{
    (void)arg;
    for (;;) {
        char *p = malloc((size_t)40 << 20);
        if (p)
            p[0] = 1;
        usleep(300);
        free(p);
        usleep(300);
    }
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, churn, NULL);
    usleep(10000);
    return survived();
}
